/**
 * The Kit benchmark's tables (bench/kit_e2e.ts measures them).
 *
 * @module
 */

import { fmtMs, fmtRatio, table } from "./_format.ts";
import { type ContainerPhases, KIT, type KitE2eResult } from "./kit_types.ts";

function ms(x: number | null): string {
  return x === null ? "n/a" : fmtMs(x);
}

function ratio(a: number | null, b: number | null): string {
  return a === null || b === null ? "n/a" : fmtRatio(a / b);
}

/** The tables: one container phase by phase, then N branches end to end, then marsh's breakdown. */
export function renderKitE2e(result: KitE2eResult): string {
  const out = [
    `## Kit branches end to end: \`::: a ${KIT} true\` against \`docker run --rm --network none ` +
    `--init IMAGE true\`; ${result.runs} runs, medians`,
    "",
    `Engine ${result.socket}, image ${result.image} (${
      result.imageId.slice(0, 19)
    }); a fresh daemon with its own MARSH_HOME on a ${result.files}-file Git project; forks: ` +
    `${result.forkStrategies.join(", ") || "none seen"}.`,
  ];
  const c = result.container;
  if (c !== null) {
    const row = (label: string, pick: (p: ContainerPhases) => number | null) => {
      const a = pick(c.marsh);
      const b = pick(c.docker);
      return [label, ms(a), ms(b), ratio(a, b)];
    };
    out.push(
      "",
      "One `true` container, phase by phase (engine times from `docker events`; marsh's window " +
        "from the manifest: the branch's started_unix_ms, when the daemon asks the worker to " +
        "launch, to its finished_unix_ms, when the container's removal is verified and the fork " +
        "captured; docker's from CLI spawn to exit). Each phase is its own median:",
      "",
      table([
        ["phase", "marsh Kit branch", "docker run --rm", "marsh/docker"],
        row("launch (marsh) / CLI spawn (docker) → create", (p) => p.toCreateMs),
        row("create → start", (p) => p.createToStartMs),
        row("start → die: the container's start to exit", (p) => p.startToDieMs),
        row("die → destroy", (p) => p.dieToDestroyMs),
        row("destroy → settled (marsh) / CLI exit (docker)", (p) => p.destroyToDoneMs),
        row("whole window", (p) => p.totalMs),
        [
          "whole window, marsh without its capture",
          `${fmtMs(c.marshWindowNoCaptureMs)} (capture ${fmtMs(c.captureMs)})`,
          fmtMs(c.docker.totalMs),
          fmtRatio(c.marshWindowNoCaptureMs / c.docker.totalMs),
        ],
      ]),
    );
  }
  out.push(
    "",
    "Per argv branch, end to end: `marsh split -n ::: … true | marsh join --json` (spawn until " +
      "both exited; join removes the split) against N `docker run --rm … true` at once:",
    "",
    table([
      [
        "branches",
        "marsh split → join",
        "docker run --rm ×N",
        "overhead",
        "overhead per branch",
        "marsh/docker",
      ],
      ...result.rows.map((r) => [
        String(r.branches),
        `${fmtMs(r.marsh.medianMs)} (min ${fmtMs(r.marsh.minMs)})`,
        `${fmtMs(r.docker.medianMs)} (min ${fmtMs(r.docker.minMs)})`,
        fmtMs(r.overheadMs),
        fmtMs(r.overheadPerBranchMs),
        fmtRatio(r.ratio),
      ]),
    ]),
    "",
    "Where marsh's time goes (from the manifest: created_unix_ms, branches' started_unix_ms and " +
      "finished_unix_ms, timing_ms), medians:",
    "",
    table([
      [
        "branches",
        "CLI → request",
        "request → launch",
        "of which snapshot",
        "of which forks",
        "launch → last settled",
        "of which capture",
        "settled → exit",
      ],
      ...result.rows.map((r) => [
        String(r.branches),
        fmtMs(r.breakdown.cliToRequestMs),
        fmtMs(r.breakdown.requestToLaunchMs),
        fmtMs(r.breakdown.snapshotMs),
        fmtMs(r.breakdown.forksMs),
        fmtMs(r.breakdown.launchToSettledMs),
        fmtMs(r.breakdown.captureMs),
        fmtMs(r.breakdown.settledToExitMs),
      ]),
    ]),
  );
  for (const w of result.warnings) out.push("", `WARNING: ${w}`);
  return out.join("\n");
}
