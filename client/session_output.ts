/**
 * The text of `marsh sessions` and `marsh log` (docs/guide.md "Checkpoint
 * sessions"); `--json` prints the replies instead.
 *
 * @module
 */

import type { LogEntryInfo, SessionLogReply, SessionsReply } from "../protocol/daemon_session.ts";

/** Checkpoint and root ids are shown this long; `--json` has them whole. */
export const SHORT = 12;

function short(id: string | null): string {
  return id === null ? "-" : id.slice(0, SHORT);
}

function when(ms: number): string {
  return new Date(ms).toISOString().replace(/\.\d+Z$/, "Z");
}

/** `marsh sessions`: one block per session. */
export function renderSessions(r: Omit<SessionsReply, "v" | "t">): string {
  if (r.sessions.length === 0) {
    return `no open session in ${r.root} (start one with: marsh session start)\n`;
  }
  const lines: string[] = [];
  for (const s of r.sessions) {
    lines.push(
      `${s.name}  head ${short(s.head)}  root ${short(s.root)}  since ${when(s.created_unix_ms)}`,
    );
    const shows = s.view_root === null
      ? "not mounted"
      : s.view_root === s.root
      ? `shows the head's root (${s.view_class})`
      : `shows root ${short(s.view_root)} (${s.view_class}), not yet the head's`;
    lines.push(`  view ${s.view}: ${shows}`);
    if (s.view_visible === "service-namespace") {
      lines.push(
        "  (mounted in the daemon's own namespace: look at it through marsh op, e.g. marsh op -- ls)",
      );
    }
    if (s.with_ignored) lines.push("  ignored files included");
  }
  return `${lines.join("\n")}\n`;
}

function outcome(e: LogEntryInfo): string {
  const o = e.operation;
  if (o === null) return "start: snapshot of the project";
  const ran = o.execution === "exited"
    ? `exit ${o.exit}`
    : o.execution === "signaled"
    ? `signal ${o.signal}`
    : o.execution ?? o.state;
  return `${ran}, ${o.disposition ?? o.state}`;
}

function quoteWord(w: string): string {
  return /^[A-Za-z0-9_./=:,+@%-]+$/.test(w) ? w : `'${w.replaceAll("'", `'\\''`)}'`;
}

/** `marsh log`: one block per checkpoint, newest first. */
export function renderLog(r: Omit<SessionLogReply, "v" | "t">): string {
  const lines: string[] = [];
  for (const e of r.entries) {
    const mark = e.head ? " (head)" : e.on_head ? "" : " (abandoned)";
    lines.push(`checkpoint ${e.checkpoint}${mark}`);
    lines.push(`  ${when(e.created_unix_ms)}  root ${short(e.root)}  session ${e.session}`);
    const o = e.operation;
    if (o !== null) {
      const at = o.cwd === "." ? "" : ` (in ${o.cwd})`;
      lines.push(`  $ ${o.argv.map(quoteWord).join(" ")}${at}`);
      if (o.view === "relative") {
        lines.push(
          "  relative: it saw the project by its cwd only; a write by absolute path may have left the session",
        );
      }
    }
    // A no-change disposition says it already.
    const n = e.changed === null || e.changed === 0 ? "" : `; ${e.changed} changed`;
    lines.push(`  ${outcome(e)}${n}`);
    for (const p of e.paths) lines.push(`    ${p.change.padEnd(8)} ${p.path}`);
    if (e.truncated && e.changed !== null) {
      lines.push(`    ... and ${e.changed - e.paths.length} more`);
    }
  }
  return `${lines.join("\n")}\n`;
}
