/**
 * `marsh compare ID [--json]` (docs/resolution.md, "Comparing branches"):
 * one row per branch, to choose from before `marsh merge` or `marsh choose`.
 *
 * Needs what {@linkcode connectDaemon} needs.
 *
 * @module
 */

import type { Command } from "commander";
import type { CompareReply, CompareRow } from "../protocol/daemon_compare.ts";
import { connectDaemon, type DaemonConnection, request } from "./daemon_connect.ts";
import type { CliIo } from "./io.ts";

const enc = new TextEncoder();

const HELP = `
One row per branch: its state and exit, the files its patch changes, the
lines added and removed (binary files counted apart), whether its --git
merge would apply cleanly to your tree as it is now (a dry run: nothing of
yours is written), and which other branches change the same paths.

Only the split's creator may compare it. Exit status: 0 shown, 2 usage or
refused, 125 failure.

Examples:
  marsh compare 5k2m9q0d
  marsh compare 5k2m9q0d --json | jq '.branches[] | select(.clean)'
`;

/** Registers `marsh compare`. */
export function registerCompareCommand(
  program: Command,
  ctx: {
    readonly io: CliIo;
    readonly setStatus: (code: number) => void;
    readonly userErrors: (cmd: Command, path: string) => Command;
  },
): void {
  const { io, setStatus, userErrors } = ctx;
  userErrors(program.command("compare"), "marsh compare")
    .description("Compare a split's branches before choosing one: counts, overlaps, clean merge.")
    .argument("<ID>", "the split's id (marsh splits)")
    .option("--json", `print the rows as one JSON document (schema marsh.compare/v1)`)
    .addHelpText("after", HELP)
    .action(async (id: string, opts: { json?: boolean }) => {
      setStatus(await compareCommand(id, { json: opts.json === true }, io));
    });
}

/**
 * Compares split `id`'s branches and returns the exit status.
 *
 * @throws {CliError} with the daemon's message and status when it refuses
 */
export async function compareCommand(
  id: string,
  opts: { readonly json: boolean },
  io: CliIo,
  connect: () => Promise<DaemonConnection> = connectDaemon,
): Promise<number> {
  await using conn = await connect();
  const reply = await request(
    conn,
    { v: 1, t: "resolve.compare", id },
    ["compare"],
    "marsh compare",
    io.error,
  );
  const { v: _v, t: _t, ...doc } = reply;
  await io.write(enc.encode(opts.json ? `${JSON.stringify(doc)}\n` : formatCompare(reply)));
  return 0;
}

function mergeCell(r: CompareRow): string {
  if (r.clean === null) return "-";
  return r.clean ? "clean" : `conflict (${r.conflicts})`;
}

/** The text table: a header, one line per branch, then the notes. */
export function formatCompare(reply: CompareReply): string {
  if (reply.branches.length === 0) return `split ${reply.id} has no branches\n`;
  const rows = [["LABEL", "STATE", "STATUS", "FILES", "+", "-", "BINARY", "MERGE", "OVERLAPS"]];
  for (const r of reply.branches) {
    rows.push([
      r.label,
      r.state,
      r.status ?? "-",
      String(r.files),
      String(r.added),
      String(r.removed),
      String(r.binary),
      mergeCell(r),
      r.overlaps.length === 0 ? "-" : r.overlaps.map((o) => `${o.label} (${o.paths})`).join(", "),
    ]);
  }
  const widths = rows[0]!.map((_, c) => Math.max(...rows.map((row) => row[c]!.length)));
  const lines = rows.map((row) =>
    row.map((cell, c) => c === row.length - 1 ? cell : cell.padEnd(widths[c]!)).join("  ")
  );
  for (const r of reply.branches) if (r.note) lines.push(`${r.label}: ${r.note}`);
  return lines.join("\n") + "\n";
}
