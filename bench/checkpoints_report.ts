/**
 * The tables of `deno task bench --checkpoints` (bench/checkpoints.ts):
 * every figure against issue 14's target (met or MISSED), the steps of a
 * small operation, the storage equation, the serial series and the
 * concurrency checks, with the command and the machine's load.
 *
 * @module
 */

import { fmtMs, fmtRatio, table } from "./_format.ts";
import type { Pct, SizeCheckpoints } from "./checkpoints.ts";
import { renderStorageEquation } from "./checkpoints_stats.ts";
import { CHANGED_CAP, type Series } from "./checkpoints_series.ts";
import { FORKS } from "./checkpoints_concurrency.ts";
import { type FsyncFloor, renderFsyncFloor } from "./fsync_floor.ts";

/** Issue 14's targets (docs/checkpoints.md "Measured"). */
export const TARGETS = {
  casP50: 2,
  casP99: 10,
  rollback: 1,
  view: 5,
  fork: 0.3,
  /** The small op's drain-to-CAS at the largest size over the smallest (noise allowance). */
  growth: 1.25,
} as const;

/** One row: figure, target, size, measured, verdict. */
export interface Row {
  readonly figure: string;
  readonly target: string;
  readonly files: number | null;
  readonly measured: string;
  /** Null: reported, no target. */
  readonly met: boolean | null;
}

/** The whole run. */
export interface CheckpointsResult {
  readonly command: string;
  readonly runs: number;
  readonly sizes: readonly SizeCheckpoints[];
  readonly load: { readonly start: string; readonly end: string };
  /** `/proc/pressure/io`'s `some avg10`, in %, at start and end. */
  readonly io: { readonly start: string; readonly end: string };
  readonly fsync: FsyncFloor;
  readonly cores: number;
}

const pctText = (p: Pct) => `p50 ${fmtMs(p.p50)}, p99 ${fmtMs(p.p99)} (n=${p.n})`;
const bytes = (n: number) => `${Math.round(n).toLocaleString("en-US")} B`;

function atMost(
  figure: string,
  files: number,
  value: number,
  limit: number,
  measured: string,
): Row {
  return { figure, target: `≤ ${limit} ms`, files, measured, met: value <= limit };
}

/** Every figure of the run as a row. */
export function rowsOf(r: CheckpointsResult): Row[] {
  const rows: Row[] = [];
  for (const s of r.sizes) {
    const f = s.files;
    rows.push(
      atMost(
        "small op (5 files): drain to head CAS, p50",
        f,
        s.small.cas.p50,
        TARGETS.casP50,
        fmtMs(s.small.cas.p50),
      ),
      atMost(
        "small op (5 files): drain to head CAS, p99",
        f,
        s.small.cas.p99,
        TARGETS.casP99,
        fmtMs(s.small.cas.p99),
      ),
      {
        figure: "marsh op -- true / (bash -c true + marsh status)",
        target: "(report)",
        files: f,
        measured: `${fmtRatio(s.noop.ratio)} (${fmtMs(s.noop.opTrueMs)} vs ${
          fmtMs(s.noop.bashTrueMs)
        } + ${fmtMs(s.noop.statusMs)})`,
        met: null,
      },
      atMost(
        "rollback: head CAS, p50",
        f,
        s.rollback.head.p50,
        TARGETS.rollback,
        `${fmtMs(s.rollback.head.p50)} (CLI ${fmtMs(s.rollback.wall.p50)})`,
      ),
      atMost(
        "rollback: view remount, p50",
        f,
        s.rollback.view.p50,
        TARGETS.view,
        fmtMs(s.rollback.view.p50),
      ),
      atMost(
        "fork: journal, p50",
        f,
        s.fork.fork.p50,
        TARGETS.fork,
        `${fmtMs(s.fork.fork.p50)} (view ${fmtMs(s.fork.view.p50)}, CLI ${fmtMs(s.fork.wall.p50)})`,
      ),
      {
        figure: "no-change op: layer bytes",
        target: "= 0",
        files: f,
        measured: `${bytes(s.storage.noChangeLayerBytes)}, ${s.storage.noChangeLayers} layers`,
        met: s.storage.noChangeLayerBytes === 0 && s.storage.noChangeLayers === 0,
      },
      {
        figure: "fork: layer bytes",
        target: "= 0",
        files: f,
        measured: `${bytes(s.storage.forkLayerBytes)}, ${s.storage.forkLayers} layers`,
        met: s.storage.forkLayerBytes === 0 && s.storage.forkLayers === 0,
      },
      {
        figure: "small op: layer bytes beyond its changed bytes",
        target: "metadata only",
        files: f,
        measured: `${bytes(s.storage.small.tree + s.storage.small.root)} (payload ${
          bytes(s.storage.small.payload)
        })`,
        // A metadata term growing with the tree (a whole index per layer) is not "metadata only".
        met: s.storage.small.tree + s.storage.small.root <= 64 * 1024,
      },
      {
        figure: "A, B, A again: the first root id again",
        target: "same id",
        files: f,
        measured: s.storage.returned.first === s.storage.returned.third
          ? `${s.storage.returned.first.slice(0, 12)} both`
          : "different",
        met: s.storage.returned.first === s.storage.returned.third,
      },
      {
        figure: `${FORKS} forks advancing at once`,
        target: `${FORKS} ok, own heads`,
        files: f,
        measured: `${s.concurrency.forks.succeeded} ok, ${s.concurrency.forks.ownHeads} heads, ${
          fmtMs(s.concurrency.forks.wallMs)
        }`,
        met: s.concurrency.forks.succeeded === FORKS && s.concurrency.forks.ownHeads === FORKS,
      },
      {
        figure: "two writers on one session",
        target: "one wins, one refused",
        files: f,
        measured: `exit ${s.concurrency.writers.first} and ${s.concurrency.writers.second}`,
        met: s.concurrency.writers.first === 0 && s.concurrency.writers.second === 1,
      },
      {
        figure: "rollback under a running op",
        target: "op stale (exit 1)",
        files: f,
        measured:
          `op exit ${s.concurrency.stale.op}, rollback exit ${s.concurrency.stale.rollback}`,
        met: s.concurrency.stale.op === 1 && s.concurrency.stale.rollback === 0,
      },
      {
        figure: "reader with a file open in the old view",
        target: "old content",
        files: f,
        measured:
          `held: ${s.concurrency.reader.heldSaw}, reopened: ${s.concurrency.reader.freshSaw}`,
        met: s.concurrency.reader.ok,
      },
    );
  }
  const first = r.sizes[0], last = r.sizes.at(-1);
  if (first !== undefined && last !== undefined && first !== last) {
    const g = last.small.cas.p50 / first.small.cas.p50;
    rows.push({
      figure: `small op drain to CAS p50, ${last.files} over ${first.files} files`,
      target: `≤ ${TARGETS.growth}× (size-independent)`,
      files: null,
      measured: fmtRatio(g),
      met: g <= TARGETS.growth,
    });
  }
  return rows;
}

function seriesRows(s: Series): string[][] {
  return s.points.map((p) => [
    s.kind,
    String(p.count),
    `${fmtMs(p.logMs)} (${p.logEntries})`,
    bytes(p.journalBytes),
    bytes(p.layerBytes),
    `${(p.rssKiB.daemon / 1024).toFixed(1)} / ${(p.rssKiB.tree / 1024).toFixed(1)} MiB`,
  ]);
}

function seriesNote(s: Series): string {
  const d = s.cas === null
    ? ""
    : `; drain to CAS ${fmtMs(s.cas.firstMs)} -> ${fmtMs(s.cas.lastMs)} (${fmtRatio(s.cas.ratio)})`;
  const slopes = `; journal ${s.journalSlope === null ? "n/a" : bytes(s.journalSlope)}/op ` +
    `(rows ${s.payloadSlope === null ? "n/a" : bytes(s.payloadSlope)}/op), ` +
    `layers ${s.layerSlope === null ? "n/a" : bytes(s.layerSlope)}/op`;
  const steps = Object.entries(s.phases).map(([k, v]) =>
    `${k} ${fmtMs(v.firstMs)} -> ${fmtMs(v.lastMs)}`
  ).join(", ");
  return `${s.kind}: marsh op wall, first tenth ${fmtMs(s.wall.firstMs)} -> last tenth ` +
    `${fmtMs(s.wall.lastMs)} (${fmtRatio(s.wall.ratio)})${d}${slopes}; steps: ${steps}`;
}

/** The report as text. */
export function renderCheckpoints(r: CheckpointsResult): string {
  const out: string[] = [];
  for (const s of r.sizes) {
    out.push(
      `## Checkpoints at ${s.files} files (snapshot ${fmtMs(s.snapshotMs)} through the CLI)`,
      "",
      `Small op (5 files): drain to head CAS ${pctText(s.small.cas)}; marsh op wall ${
        pctText(s.small.wall)
      }`,
      "Its steps (medians): " +
        Object.entries(s.small.phases).map(([k, v]) => `${k} ${fmtMs(v)}`).join(", "),
      `No-change op: drain to head CAS ${pctText(s.noop.cas)}`,
      `Rollback: head ${pctText(s.rollback.head)}; view ${pctText(s.rollback.view)}; CLI ${
        pctText(s.rollback.wall)
      }`,
      `Fork: journal ${pctText(s.fork.fork)}; view ${pctText(s.fork.view)}; CLI ${
        pctText(s.fork.wall)
      }`,
      "",
      `Storage of one small op (${s.storage.smallLayers} layer):`,
      renderStorageEquation(s.storage.small, s.storage.smallChangedBytes),
      `(the journal's pages in use grew by ${bytes(s.storage.smallJournalPages)})`,
      "",
      table([
        [
          "series",
          "ops",
          "marsh log --all (entries)",
          "journal",
          "layers added",
          "RSS daemon / tree",
        ],
        ...seriesRows(s.serial.noChange),
        ...seriesRows(s.serial.changed),
      ]),
      "",
      `- ${seriesNote(s.serial.noChange)}`,
      `- ${seriesNote(s.serial.changed)}`,
      ...(s.serial.changedSkipped.length === 0 ? [] : [
        `- changed series stops at ${CHANGED_CAP}: ${s.serial.changedSkipped.join(", ")} ` +
        "changed ops in a row are left out: past 32 layers a background compaction runs beside " +
        "them (docs/checkpoints.md, Compaction), which this series does not time",
      ]),
      `- two writers: the second said "${s.concurrency.writers.message}"`,
      `- rollback under a running op: the op said "${s.concurrency.stale.message}"`,
      ...s.warnings.map((w) => `- WARNING: ${w}`),
      "",
    );
  }
  const rows = rowsOf(r);
  const missed = rows.filter((x) => x.met === false);
  out.push(
    "## TARGETS (issue 14 §5)",
    "",
    table([
      ["figure", "target", "files", "measured", "verdict"],
      ...rows.map((x) => [
        x.figure,
        x.target,
        x.files === null ? "" : String(x.files),
        x.measured,
        x.met === null ? "report" : x.met ? "met" : "MISSED",
      ]),
    ]),
    "",
    missed.length === 0
      ? "Every target is met."
      : `Missed: ${missed.length} of ${rows.filter((x) => x.met !== null).length}.`,
    "",
    `- command: ${r.command}`,
    `- ${r.runs} timed runs of each figure after a warm-up; percentiles by nearest rank; ` +
      "daemon-side times from the replies' and marsh log's timing fields, CLI times by wall clock",
    `- shared noisy machine: ${r.cores} cores, other sessions running; load average ` +
      `${r.load.start} at start, ${r.load.end} at end, I/O pressure (some avg10) ${r.io.start}% ` +
      `and ${r.io.end}%: read the figures as rough`,
    renderFsyncFloor(r.fsync),
  );
  return out.join("\n");
}
