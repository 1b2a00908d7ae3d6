/**
 * `marsh discard ID [LABEL...] [--reason TEXT] [--json]`: drop a whole split
 * or some of its branches; running ones are stopped, forks removed, the
 * lineage kept in `marsh splits` (docs/guide.md "Discarding branches").
 *
 * Needs what {@linkcode connectDaemon} needs.
 *
 * @module
 */

import { MAX_REASON } from "../protocol/daemon_discard.ts";
import { CliError } from "./cli_error.ts";
import { connectDaemon, type DaemonConnection, request } from "./daemon_connect.ts";
import type { CliIo } from "./io.ts";

const enc = new TextEncoder();

/** `marsh discard --help`'s text after the options. */
export const DISCARD_HELP = `
Without LABEL the whole split is discarded: a running split is cancelled
(SIGINT, then SIGKILL after 10 s), every branch is recorded \`discarded\`, and
its directory (forks, out/, store) is removed. With LABELs only those branches
are: each running one is stopped, its fork removed, its out/LABEL/ kept; the
split and its other branches go on. Either way \`marsh splits\` keeps the
lineage: the state each branch had ended in, the reason, who and when.
A discarded branch is left out of \`marsh join\`'s input (named, not shown).

Only the split's creator may discard it; a branch cannot discard its own split
or its siblings, and a Kit job's capability refuses it.

Exit status: 0 done; 1 refused, nothing changed (joined, being joined, a Kit
container that may still run, discarded already); 2 usage (unknown split or
label: nothing changed); 125 the discard was recorded but a fork or the
directory could not be removed (the message says how to finish).

Examples:
  marsh discard 01J9Z
  marsh discard 01J9Z slow flaky --reason 'took the other approach'
  marsh discard 01J9Z slow --json
`;

/**
 * Asks the daemon to discard, prints what it did (`--json`: the reply
 * without `v` and `t`), and returns 0.
 *
 * @throws {CliError} 2 for a bad `--reason`, else the daemon's status and message
 */
export async function discardCommand(
  opts: {
    readonly id: string;
    readonly labels: readonly string[];
    readonly reason?: string;
    readonly json: boolean;
  },
  io: CliIo,
  connect: () => Promise<DaemonConnection> = connectDaemon,
): Promise<number> {
  const reason = opts.reason ?? null;
  if (reason !== null && (reason.trim() === "" || reason.length > MAX_REASON)) {
    throw new CliError(
      `marsh discard: --reason needs 1 to ${MAX_REASON} characters of text; nothing was discarded`,
    );
  }
  await using conn = await connect();
  const reply = await request(
    conn,
    { v: 1, t: "split.discard", id: opts.id, labels: [...opts.labels], reason },
    ["split.discarded"],
    "marsh discard",
    io.error,
  );
  const { v: _v, t: _t, ...body } = reply;
  await io.write(enc.encode(opts.json ? `${JSON.stringify(body)}\n` : `${body.message}\n`));
  return 0;
}
