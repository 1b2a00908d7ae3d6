/**
 * `marsh splits rm ID...` and `marsh splits prune`: removing splits by id,
 * or every finished one (docs/guide.md "Housekeeping").
 *
 * Each split is removed or refused on its own, by the daemon's one removal
 * path (`marsh splits rm ID`'s): a refusal does not stop the others, and the
 * exit status is 2 when any split was not removed.
 *
 * Needs what {@linkcode connectDaemon} needs.
 *
 * @module
 */

import type { RemovedSplit } from "../protocol/housekeeping.ts";
import { CliError } from "./cli_error.ts";
import { connectDaemon, type DaemonConnection, request } from "./daemon_connect.ts";
import { parseDuration } from "./duration.ts";
import type { CliIo } from "./io.ts";

const enc = new TextEncoder();

/** Refused requests' status (as one `marsh splits rm ID`'s). */
const REFUSED = 2;

/**
 * `marsh splits rm ID...`: each id in the order given (a repeated one
 * once), one request each; prints each removal on stdout and each refusal
 * on stderr.
 *
 * @returns 0 when every split was removed, else the first refusal's status
 */
export async function splitsRmCommand(
  ids: readonly string[],
  opts: { readonly json: boolean },
  io: CliIo,
  connect: () => Promise<DaemonConnection> = connectDaemon,
): Promise<number> {
  const removed: { id: string; message: string }[] = [];
  const failed: { id: string; reason: string }[] = [];
  let status = 0;
  for (const id of new Set(ids)) {
    // A daemon that cannot be reached ends the command; a refusal ends only its id.
    await using conn = await connect();
    try {
      const reply = await request(
        conn,
        { v: 1, t: "splits.rm", id },
        ["ok"],
        "marsh splits rm",
        io.error,
      );
      const message = reply.message ?? `split ${id}: removed`;
      removed.push({ id, message });
      if (!opts.json) await io.write(enc.encode(`${message}\n`));
    } catch (error) {
      if (!(error instanceof CliError)) throw error;
      if (status === 0) status = error.code;
      failed.push({ id, reason: error.message.replace(/^marsh splits rm: /, "") });
      if (!opts.json) io.error(error.message);
    }
  }
  if (opts.json) await io.write(enc.encode(`${JSON.stringify({ removed, failed })}\n`));
  return status;
}

/**
 * `marsh splits prune [--all] [--older-than D] [--dry-run] [--json]`.
 *
 * @returns 0 when every finished split chosen was removed, 2 when one was not
 * @throws {CliError} (status 2) for a bad duration, before anything is asked or removed
 */
export async function splitsPruneCommand(
  opts: {
    readonly all: boolean;
    readonly olderThan?: string;
    readonly dryRun: boolean;
    readonly json: boolean;
  },
  io: CliIo,
  connect: () => Promise<DaemonConnection> = connectDaemon,
): Promise<number> {
  let olderThanMs: number | null = null;
  if (opts.olderThan !== undefined) {
    const d = parseDuration(opts.olderThan);
    if ("problem" in d) {
      throw new CliError(`marsh splits prune: --older-than ${d.problem}; nothing was removed`);
    }
    olderThanMs = d.ms;
  }
  const cwd = opts.all
    ? null
    : currentDir(io, "marsh splits prune", "cd into the project, or give --all");
  await using conn = await connect();
  const reply = await request(
    conn,
    { v: 1, t: "splits.prune", cwd, olderThanMs, dryRun: opts.dryRun },
    ["splits.pruned"],
    "marsh splits prune",
    io.error,
  );
  const { v: _v, t: _t, ...body } = reply;
  if (opts.json) {
    await io.write(enc.encode(`${JSON.stringify(body)}\n`));
  } else {
    const lines = body.removed.map((s) => opts.dryRun ? `would remove ${describe(s)}` : s.message);
    if (body.removed.length === 0 && body.failed.length === 0) {
      const age = opts.olderThan === undefined ? "" : ` created more than ${opts.olderThan} ago`;
      const where = body.root === null ? "" : ` in ${body.root}`;
      lines.push(`no finished splits${age}${where}`);
    }
    if (lines.length > 0) await io.write(enc.encode(`${lines.join("\n")}\n`));
    for (const f of body.failed) io.error(`marsh splits prune: ${f.reason}`);
  }
  return body.failed.length === 0 ? 0 : REFUSED;
}

/** `split <id> (<state>, created <time>)`. */
export function describe(s: RemovedSplit): string {
  return `split ${s.id} (${s.state}, created ${isoTime(s.created_unix_ms)})`;
}

function isoTime(ms: number): string {
  const d = new Date(ms);
  return Number.isNaN(d.getTime()) ? "-" : d.toISOString();
}

/**
 * The caller's cwd, which the daemon locates the project from.
 *
 * @throws {CliError} when it is gone, with `fix` (what to do instead)
 */
export function currentDir(io: CliIo, who: string, fix: string): string {
  try {
    return io.cwd();
  } catch (cause) {
    throw new CliError(`${who}: the current directory is gone; ${fix}`, REFUSED, { cause });
  }
}
