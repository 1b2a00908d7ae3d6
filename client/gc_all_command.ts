/**
 * `marsh gc --all [--dry-run] [--json]`: removes everything marsh stored
 * for the current project — every split (none may be running or awaiting a
 * join), every snapshot layer, and the rest of `.marsh` (docs/guide.md
 * "Housekeeping").
 *
 * Needs what {@linkcode connectDaemon} needs.
 *
 * @module
 */

import { connectDaemon, type DaemonConnection, request } from "./daemon_connect.ts";
import { formatBytes } from "./gc_command.ts";
import type { CliIo } from "./io.ts";
import { currentDir, describe } from "./prune_command.ts";

const enc = new TextEncoder();

/**
 * Runs `gc --all` for the project at the current directory.
 *
 * @returns 0 when everything marsh stored is gone; 2 when a split or the store was not removed
 * @throws {CliError} with the daemon's refusal (a running split: nothing was removed)
 */
export async function gcAllCommand(
  opts: { readonly dryRun: boolean; readonly json: boolean },
  io: CliIo,
  connect: () => Promise<DaemonConnection> = connectDaemon,
): Promise<number> {
  const cwd = currentDir(io, "marsh gc", "cd into the project");
  await using conn = await connect();
  const reply = await request(
    conn,
    { v: 1, t: "gc.all", cwd, dryRun: opts.dryRun },
    ["gc.all"],
    "marsh gc",
    io.error,
  );
  const { v: _v, t: _t, ...body } = reply;
  const ok = body.failed.length === 0 && body.problem === null;
  if (opts.json) {
    await io.write(enc.encode(`${JSON.stringify(body)}\n`));
    return ok ? 0 : 2;
  }
  const lines = body.splits.map((s) => opts.dryRun ? `would remove ${describe(s)}` : s.message);
  const n = body.splits.length;
  const m = body.layers.length;
  const what = `${n} split${n === 1 ? "" : "s"} and ${m} snapshot layer${m === 1 ? "" : "s"} (${
    formatBytes(body.bytes)
  })`;
  const marsh = `${body.root}/.marsh`;
  if (opts.dryRun) {
    lines.push(`would remove ${what}${body.gone && ok ? `, and ${marsh}` : ""}`);
  } else if (body.problem === null || n > 0 || m > 0 || body.gone) {
    // A refusal that removed nothing says so on stderr alone: "removed 0 …" would read as done.
    lines.push(`removed ${what}${body.gone ? `; ${marsh} is gone` : ""}`);
  }
  if (body.left.length > 0) {
    lines.push(
      `${opts.dryRun ? "would leave" : "left"} ${marsh}: it holds ${
        body.left.join(", ")
      }, which marsh did not make`,
    );
  }
  if (lines.length > 0) await io.write(enc.encode(`${lines.join("\n")}\n`));
  for (const f of body.failed) io.error(`marsh gc: ${f.reason}`);
  if (body.problem !== null) io.error(`marsh gc: ${body.problem}`);
  return ok ? 0 : 2;
}
