/**
 * `marsh resolutions [--json]` (docs/guide.md, "marsh resolutions"): every
 * merge, promote and undo the caller may see, newest first, with who asked,
 * when, how many paths it changed and its restore point.
 *
 * Needs what {@linkcode connectDaemon} needs.
 *
 * @module
 */

import type { ResolutionInfo } from "../protocol/daemon_resolve.ts";
import { connectDaemon, type DaemonConnection, request } from "./daemon_connect.ts";
import type { CliIo } from "./io.ts";

const enc = new TextEncoder();

/**
 * Lists resolutions and returns the exit status (0).
 *
 * @throws {CliError} with the daemon's message and status when it refuses
 */
export async function resolutionsCommand(
  opts: { readonly json?: boolean },
  io: CliIo,
  connect: () => Promise<DaemonConnection> = connectDaemon,
): Promise<number> {
  await using conn = await connect();
  const reply = await request(
    conn,
    { v: 1, t: "resolutions.list" },
    ["resolutions"],
    "marsh resolutions",
    io.error,
  );
  const text = opts.json
    ? `${JSON.stringify({ resolutions: reply.resolutions, more: reply.more })}\n`
    : formatResolutions(reply.resolutions, reply.more);
  await io.write(enc.encode(text));
  return 0;
}

function isoTime(ms: number): string {
  const d = new Date(ms);
  return Number.isNaN(d.getTime()) ? "-" : d.toISOString();
}

/** The text listing: a header, then one line per resolution, then what it undid or was undone by. */
export function formatResolutions(list: readonly ResolutionInfo[], more = 0): string {
  if (list.length === 0) return "no resolutions\n";
  const rows = list.map((r) => [
    r.id,
    r.kind,
    r.scope,
    r.state,
    r.checkout
      ? `session:${r.checkout.name}@${r.checkout.checkpoint.slice(0, 12)}`
      : `${r.split}:${r.label}`,
    r.who,
    isoTime(r.created_unix_ms),
    r.paths_changed === null ? "-" : String(r.paths_changed),
    r.state === "applied" ? r.restore_point : "-",
  ]);
  const head = ["ID", "KIND", "SCOPE", "STATE", "BRANCH", "WHO", "WHEN", "PATHS", "RESTORE POINT"];
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i]!.length)));
  const line = (cells: readonly string[]) =>
    cells.map((c, i) => i === cells.length - 1 ? c : c.padEnd(widths[i]!)).join("  ");
  const lines = [line(head)];
  list.forEach((r, i) => {
    lines.push(line(rows[i]!));
    if (r.undoes !== null) lines.push(`  undoes ${r.undoes}`);
    if (r.undone_by !== null) lines.push(`  undone by ${r.undone_by}`);
    if (r.message !== null) lines.push(`  ${r.message}`);
  });
  if (more > 0) lines.push(`and ${more} older ones, not listed`);
  return `${lines.join("\n")}\n`;
}
