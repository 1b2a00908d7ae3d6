/**
 * `marsh show CHECKPOINT [--patch] [--json]` (docs/guide.md, "Committing a
 * checkpoint"): a checkpoint's record (its operation's argv, exit and
 * disposition, its root and parent, the paths it changed); with `--patch`
 * its `git apply`-ready patch against its parent instead, on stdout.
 *
 * Needs what {@linkcode connectDaemon} needs.
 *
 * @module
 */

import type { CheckpointInfo, CheckpointShownReply } from "../protocol/daemon_checkpoint.ts";
import { CliError } from "./cli_error.ts";
import { connectDaemon, type DaemonConnection, DaemonConnectionError } from "./daemon_connect.ts";
import type { CliIo } from "./io.ts";

const enc = new TextEncoder();
const dec = new TextDecoder();

/** `marsh show --help`'s text after the options. */
export const SHOW_HELP = `
CHECKPOINT is a checkpoint id, or at least 8 of its first digits (marsh log
lists them). The record: the operation's command, how it ended and what
happened to its files, the root and parent, and the paths it changed
against its parent (a session's start: against the empty tree). With
--patch, the patch instead, made by the same writer as a split's capture:
\`git apply\` takes it on the parent's tree.

Exit status: 0 shown; 2 unknown or ambiguous checkpoint, or its layers
cannot be read.

Examples:
  marsh show 3f9a1c2e
  marsh show 3f9a1c2e --patch | git apply --check
  marsh show 3f9a1c2e --json | jq .paths
`;

function describe(c: CheckpointInfo, r: CheckpointShownReply): string {
  const lines = [
    `checkpoint  ${c.id}`,
    `session     ${c.session.name}`,
    `parent      ${c.parent ?? "(none: the session's start)"}`,
    `root        ${c.root}`,
  ];
  if (c.operation !== null) {
    lines.push(`operation   ${c.operation.argv.map(shellWord).join(" ")}`);
    lines.push(`cwd         ${c.operation.cwd}`);
    lines.push(`exit        ${c.operation.exit ?? "(not ended)"}`);
    lines.push(`disposition ${c.operation.disposition ?? c.operation.state}`);
    const r = c.operation.receipt;
    if (r !== null) lines.push(`receipt     ${r.complete ? "complete" : "not complete"}: ${r.why}`);
  }
  lines.push(`created     ${new Date(c.created_unix_ms).toISOString()}`);
  lines.push(`changed     ${r.changed} ${r.changed === 1 ? "path" : "paths"}`);
  for (const p of r.paths) lines.push(`  ${p.status} ${p.path}`);
  if (r.changed > r.paths.length) lines.push(`  ... ${r.changed - r.paths.length} more`);
  return lines.join("\n") + "\n";
}

/** A word as a shell would need it quoted to read it back. */
function shellWord(w: string): string {
  return /^[A-Za-z0-9_./:=@%+-]+$/.test(w) ? w : `'${w.replaceAll("'", `'\\''`)}'`;
}

/**
 * Runs `marsh show` and returns its exit status.
 *
 * @throws {CliError} with the daemon's status and message
 */
export async function showCommand(
  checkpoint: string,
  opts: { readonly patch: boolean; readonly json: boolean },
  io: CliIo,
  connect: () => Promise<DaemonConnection> = connectDaemon,
): Promise<number> {
  const who = "marsh show";
  await using conn = await connect();
  const text: Uint8Array[] = [];
  try {
    await conn.send({ v: 1, t: "checkpoint.show", cwd: io.cwd(), checkpoint, patch: opts.patch });
    for await (const f of conn) {
      if (f.t === "chunk") {
        const bytes = Uint8Array.fromBase64(f.data);
        if (opts.json) text.push(bytes);
        else if (!await io.write(bytes)) return 0;
        continue;
      }
      if (f.t === "error") throw new CliError(`${who}: ${f.message}`, f.code);
      if (f.t === "notice") {
        io.error(f.message);
        continue;
      }
      if (f.t !== "checkpoint.shown") {
        throw new DaemonConnectionError(`an unexpected ${f.t} frame from the daemon`);
      }
      if (opts.json) {
        const { v: _v, t: _t, ...body } = f;
        const patch = opts.patch
          ? { patch: text.map((b) => dec.decode(b, { stream: true })).join("") + dec.decode() }
          : {};
        await io.write(enc.encode(`${JSON.stringify({ ...body, ...patch })}\n`));
      } else if (!opts.patch) {
        await io.write(enc.encode(describe(f.checkpoint, f)));
      }
      return 0;
    }
    throw new DaemonConnectionError("the daemon closed the connection without a reply");
  } catch (cause) {
    if (!(cause instanceof DaemonConnectionError)) throw cause;
    throw new CliError(`${who}: ${cause.message}`, 2, { cause });
  }
}
