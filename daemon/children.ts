/**
 * The daemon's two children, the split-filesystem service and the worker,
 * recorded in the control dir (`children.json`) by pid and `/proc` start
 * time, so that the next daemon can end what a killed one left running
 * before its recovery marks anything uncertain (docs/engine.md "Processes").
 * A pid that was reused since never matches its start time, so it is never
 * signalled.
 *
 * The daemon cannot read `/proc`; the split-filesystem service does it for
 * it ({@linkcode ProcessLink}, `proc-starts` and `proc-kill` of
 * protocol/processes.ts).
 *
 * Needs read and write on the control dir.
 *
 * @module
 */

import { CHILDREN_NAME } from "../protocol/control_dir.ts";
import type { ProcessesReply, ProcessId } from "../protocol/processes.ts";
import type { SplitfsService } from "../protocol/splitfs_client.ts";

/** Which child a record names. */
export type ChildRole = "splitfs" | "worker";

/** One recorded child. */
export interface ChildRecord extends ProcessId {
  readonly role: ChildRole;
}

/** What sees and signals processes for the daemon. */
export interface ProcessLink {
  /** The start time of each live pid, null where there is none. */
  starts(pids: readonly number[]): Promise<readonly (number | null)[]>;
  /** SIGKILL to each process still alive with its recorded start time. */
  kill(processes: readonly ProcessId[]): Promise<void>;
}

/** The split-filesystem service as a {@linkcode ProcessLink}. */
export function serviceLink(service: SplitfsService): ProcessLink {
  return {
    starts: async (pids) =>
      (await service.request<ProcessesReply>({ v: 1, t: "proc-starts", pids })).starts,
    kill: async (processes) => {
      await service.request({ v: 1, t: "proc-kill", processes });
    },
  };
}

const ROLES: readonly ChildRole[] = ["splitfs", "worker"];
const MAX_RECORD_BYTES = 4096;

/** What {@linkcode readChildren} found: the records, or why there are none to trust. */
export type ChildrenFile =
  | { readonly children: readonly ChildRecord[]; readonly problem: null }
  | { readonly children: readonly []; readonly problem: string };

/** Validates a record file's contents. */
export function parseChildren(text: string): ChildRecord[] {
  const x: unknown = JSON.parse(text);
  if (typeof x !== "object" || x === null || (x as { v?: unknown }).v !== 1) {
    throw new TypeError("not a version 1 record");
  }
  const list = (x as { children?: unknown }).children;
  if (!Array.isArray(list) || list.length > ROLES.length) {
    throw new TypeError("children must be a list of at most 2");
  }
  return list.map((c) => {
    const { role, pid, start } = (c ?? {}) as Record<string, unknown>;
    if (!ROLES.includes(role as ChildRole)) throw new TypeError(`unknown role ${String(role)}`);
    if (typeof pid !== "number" || !Number.isSafeInteger(pid) || pid <= 0) {
      throw new TypeError("pid must be a positive integer");
    }
    if (typeof start !== "number" || !Number.isSafeInteger(start) || start < 0) {
      throw new TypeError("start must be a non-negative integer");
    }
    return { role: role as ChildRole, pid, start };
  });
}

/** The last daemon's record; none when it stopped cleanly (or never recorded any). */
export function readChildren(home: string): ChildrenFile {
  const path = `${home}/${CHILDREN_NAME}`;
  let text: string;
  try {
    const st = Deno.lstatSync(path);
    if (!st.isFile || st.size > MAX_RECORD_BYTES) {
      return { children: [], problem: `${path} is not a small regular file` };
    }
    text = Deno.readTextFileSync(path);
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return { children: [], problem: null };
    throw error;
  }
  try {
    return { children: parseChildren(text), problem: null };
  } catch (error) {
    if (!(error instanceof TypeError || error instanceof SyntaxError)) throw error;
    return { children: [], problem: `${path} is unreadable (${error.message})` };
  }
}

/** Records this daemon's children (written whole: a new file renamed over the old). */
export function writeChildren(home: string, children: readonly ChildRecord[]): void {
  const path = `${home}/${CHILDREN_NAME}`;
  const tmp = `${path}.new`;
  Deno.writeTextFileSync(tmp, `${JSON.stringify({ v: 1, children })}\n`, { mode: 0o600 });
  Deno.renameSync(tmp, path);
}

/** Drops the record once the children have exited (a clean stop). */
export function removeChildren(home: string): void {
  try {
    Deno.removeSync(`${home}/${CHILDREN_NAME}`);
  } catch (error) {
    if (!(error instanceof Deno.errors.NotFound)) throw error;
  }
}

/** What became of one recorded child. */
export type ChildFate = "gone" | "exited" | "killed" | "left";

/** Bounds of {@linkcode endChildren}. */
export interface EndOptions {
  /** How long the worker may take to end by itself (it cancels its attempts when its pipe closes). */
  readonly workerWaitMs: number;
  /** How long a SIGKILLed process may take to be gone. */
  readonly killWaitMs: number;
  readonly pollMs: number;
  readonly sleep?: (ms: number) => Promise<void>;
  readonly now?: () => number;
}

/** Default bounds: well inside the CLI's wait for a starting daemon. */
export const END_DEFAULTS: EndOptions = { workerWaitMs: 2000, killWaitMs: 3000, pollMs: 50 };

/**
 * Ends the children a killed daemon left: the service at once (it may be
 * writing a split's `out/`), the worker after {@linkcode EndOptions.workerWaitMs}
 * (it ends by itself when its pipe closes), each by SIGKILL, then waits until
 * they are gone, bounded.
 *
 * @returns each child's fate, in the order given
 */
export async function endChildren(
  link: ProcessLink,
  children: readonly ChildRecord[],
  opts: EndOptions = END_DEFAULTS,
): Promise<{ child: ChildRecord; fate: ChildFate }[]> {
  const sleep = opts.sleep ?? ((ms) => new Promise((r) => setTimeout(r, ms)));
  const now = opts.now ?? Date.now;
  const fates = new Map<ChildRecord, ChildFate>();
  const living = async (): Promise<ChildRecord[]> => {
    const pending = children.filter((c) => !fates.has(c) || fates.get(c) === "killed");
    if (pending.length === 0) return [];
    const starts = await link.starts(pending.map((c) => c.pid));
    const alive: ChildRecord[] = [];
    pending.forEach((c, i) => {
      if (starts[i] === c.start) alive.push(c);
      else if (!fates.has(c)) fates.set(c, "exited");
    });
    return alive;
  };
  const waitGone = async (until: number): Promise<ChildRecord[]> => {
    for (;;) {
      const alive = await living();
      if (alive.length === 0 || now() >= until) return alive;
      await sleep(opts.pollMs);
    }
  };
  const kill = async (list: readonly ChildRecord[]) => {
    if (list.length === 0) return;
    await link.kill(list.map(({ pid, start }) => ({ pid, start })));
    for (const c of list) fates.set(c, "killed");
  };

  const first = await living();
  for (const c of children) if (!first.includes(c)) fates.set(c, "gone");
  await kill(first.filter((c) => c.role !== "worker"));
  const left = await waitGone(now() + opts.workerWaitMs);
  await kill(left.filter((c) => fates.get(c) !== "killed"));
  for (const c of await waitGone(now() + opts.killWaitMs)) fates.set(c, "left");
  return children.map((child) => ({ child, fate: fates.get(child) ?? "gone" }));
}

/** The log line for one child's fate. */
export function describeFate(child: ChildRecord, fate: ChildFate, waitMs: number): string {
  const who = `the last daemon's ${
    child.role === "splitfs" ? "split-filesystem service" : "worker"
  } (pid ${child.pid})`;
  switch (fate) {
    case "gone":
      return `restart: ${who} was already gone`;
    case "exited":
      return `restart: ${who} ended by itself`;
    case "killed":
      return `restart: ${who} was still running: killed (SIGKILL)`;
    case "left":
      return `restart: error: ${who} is still alive ${waitMs} ms after SIGKILL; what it runs may still change its splits' directories; stop it (kill -9 ${child.pid}) and restart the daemon (marsh daemon stop; marsh daemon start)`;
  }
}
