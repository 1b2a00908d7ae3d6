/**
 * `marsh gc [--dry-run] [--json]`: deletes the current project's snapshot
 * layers that no split on disk and no snapshot chain needs, and says how
 * many bytes that freed (docs/guide.md "Housekeeping"; issue 4 §2).
 *
 * Needs what {@linkcode connectDaemon} needs.
 *
 * @module
 */

import { CliError } from "./cli_error.ts";
import { connectDaemon, type DaemonConnection, request } from "./daemon_connect.ts";
import type { CliIo } from "./io.ts";

const enc = new TextEncoder();

/** Bytes as a person reads them: `512 B`, `1.5 KiB`, `3.0 MiB`, `2.00 GiB`. */
export function formatBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  if (n < 1024 ** 3) return `${(n / 1024 ** 2).toFixed(1)} MiB`;
  return `${(n / 1024 ** 3).toFixed(2)} GiB`;
}

/**
 * Runs the collector for the project at the current directory.
 *
 * @throws {CliError} with the daemon's message and status when it refuses
 */
export async function gcCommand(
  opts: { readonly dryRun: boolean; readonly json: boolean },
  io: CliIo,
  connect: () => Promise<DaemonConnection> = connectDaemon,
): Promise<number> {
  let cwd: string;
  try {
    cwd = io.cwd();
  } catch (cause) {
    throw new CliError("marsh gc: the current directory is gone; cd into the project", 2, {
      cause,
    });
  }
  await using conn = await connect();
  const reply = await request(
    conn,
    { v: 1, t: "gc", cwd, dryRun: opts.dryRun },
    ["gc"],
    "marsh gc",
    io.error,
  );
  const { v: _v, t: _t, ...rest } = reply;
  let text: string;
  if (opts.json) text = `${JSON.stringify(rest)}\n`;
  else {
    const n = reply.removed.length;
    const layers = `${n} snapshot layer${n === 1 ? "" : "s"}`;
    text = opts.dryRun
      ? `would remove ${layers} (${formatBytes(reply.bytes)}); ${reply.kept} in use\n`
      : `removed ${layers}, freed ${formatBytes(reply.bytes)}; ${reply.kept} in use\n`;
  }
  await io.write(enc.encode(text));
  return 0;
}
