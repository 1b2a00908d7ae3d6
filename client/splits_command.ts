/**
 * `marsh splits [--all] [--json] [ID]`, `marsh splits cancel ID`: the splits
 * the caller may see, as a tree, and the operator's cancel (removal is
 * `prune_command.ts`).
 *
 * Needs what {@linkcode connectDaemon} needs.
 *
 * @module
 */

import type { Lingering, Manifest } from "../protocol/manifest.ts";
import { connectDaemon, type DaemonConnection, request } from "./daemon_connect.ts";
import type { CliIo } from "./io.ts";
import { currentDir } from "./prune_command.ts";

const enc = new TextEncoder();

/**
 * Lists splits and returns the exit status: one with `id`; every project's
 * with `all`; else the current project's, which the daemon locates from
 * the cwd as `marsh split` does.
 *
 * @throws {CliError} with the daemon's message and status when it refuses
 */
export async function splitsListCommand(
  opts: { readonly json: boolean; readonly id?: string; readonly all?: boolean },
  io: CliIo,
  connect: () => Promise<DaemonConnection> = connectDaemon,
): Promise<number> {
  const scoped = opts.id === undefined && opts.all !== true;
  const cwd = scoped ? currentDir(io, "marsh splits", "cd into a project, or give --all") : null;
  await using conn = await connect();
  const reply = await request(
    conn,
    {
      v: 1,
      t: "splits.list",
      ...(opts.id === undefined ? {} : { id: opts.id }),
      ...(cwd === null ? {} : { cwd }),
    },
    ["splits"],
    "marsh splits",
    io.error,
  );
  let text: string;
  if (opts.json) {
    const root = reply.root === undefined ? {} : { root: reply.root };
    text = `${JSON.stringify({ splits: reply.splits, ...root })}\n`;
  } else if (reply.splits.length === 0 && reply.root !== undefined) {
    const n = reply.elsewhere ?? 0;
    text = `no splits in ${reply.root}${
      n > 0 ? `; ${n} in other projects (marsh splits --all)` : ""
    }\n`;
  } else {
    text = formatSplits(reply.splits);
  }
  await io.write(enc.encode(text));
  return 0;
}

/**
 * `marsh splits cancel ID [LABEL]` / `marsh splits rm ID`.
 *
 * @throws {CliError} with the daemon's message and status when it refuses
 */
export async function splitsActionCommand(
  action: "cancel" | "rm",
  id: string,
  io: CliIo,
  connect: () => Promise<DaemonConnection> = connectDaemon,
  label?: string,
): Promise<number> {
  await using conn = await connect();
  const reply = await request(
    conn,
    action === "cancel"
      ? { v: 1, t: "splits.cancel", id, ...(label === undefined ? {} : { label }) }
      : { v: 1, t: "splits.rm", id },
    ["ok"],
    `marsh splits ${action}`,
    io.error,
  );
  const said = reply.message ??
    (action === "cancel" ? `split ${id}: cancelled` : `split ${id}: removed`);
  await io.write(enc.encode(`${said}\n`));
  return 0;
}

/**
 * The text listing: one block per split, nested splits indented under
 * their parent, one line per branch.
 */
export function formatSplits(splits: readonly Manifest[]): string {
  if (splits.length === 0) return "no splits\n";
  const ids = new Set(splits.map((s) => s.id));
  const children = new Map<string, Manifest[]>();
  const roots: Manifest[] = [];
  for (const s of splits) {
    if (s.parent && ids.has(s.parent.split)) {
      const list = children.get(s.parent.split) ?? [];
      list.push(s);
      children.set(s.parent.split, list);
    } else {
      roots.push(s);
    }
  }
  const lines: string[] = [];
  const visit = (s: Manifest, indent: string) => {
    lines.push(...formatSplit(s, indent));
    for (const child of children.get(s.id) ?? []) visit(child, `${indent}    `);
  };
  for (const s of roots) visit(s, "");
  return `${lines.join("\n")}\n`;
}

function formatSplit(s: Manifest, indent: string): string[] {
  const where = s.cwd === "" || s.cwd === "." ? s.root : `${s.root}/${s.cwd}`;
  const from = s.parent ? `  from ${s.parent.split}:${s.parent.label}` : "";
  const lines = [
    `${indent}${s.id}  ${s.state}  ${isoTime(s.created_unix_ms)}  ${where}${from}`,
  ];
  for (const b of s.branches) {
    let line = `${indent}  ${b.label}  ${b.state}  ${b.placement}  ${b.status ?? "-"}  ${b.files} ${
      b.files === 1 ? "file" : "files"
    }`;
    if (b.job_id) line += `  job ${b.job_id}`;
    if (b.trust === "untrusted") line += "  untrusted";
    lines.push(line);
    if (b.discarded) {
      const d = b.discarded;
      lines.push(
        `${indent}    discarded after ${d.after} by ${d.by} at ${isoTime(d.at_unix_ms)}${
          d.reason === null ? "" : `: ${d.reason}`
        }`,
      );
    }
    if (b.lingering) lines.push(...formatLingering(b.lingering, `${indent}    `));
  }
  if (s.reason) lines.push(`${indent}  reason: ${s.reason}`);
  return lines;
}

/** What a running branch's shell left running, one process a line. */
function formatLingering(l: Lingering, indent: string): string[] {
  const n = l.processes.length + l.more;
  return [
    `${indent}its shell exited at ${isoTime(l.since_unix_ms)}; ${n} ${
      n === 1 ? "process" : "processes"
    } it started still ${n === 1 ? "runs" : "run"}:`,
    ...l.processes.map((p) => `${indent}  ${p.pid}  ${p.command}`),
    ...(l.more > 0 ? [`${indent}  and ${l.more} more`] : []),
  ];
}

function isoTime(ms: number): string {
  const d = new Date(ms);
  return Number.isNaN(d.getTime()) ? "-" : d.toISOString();
}
