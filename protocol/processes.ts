/**
 * The split-filesystem service's process frames (part of
 * `protocol/splitfs.ts`): a restarted daemon learns and ends what its
 * predecessor left running, which only the service can see in `/proc`
 * (docs/engine.md "Processes").
 *
 * @module
 */

import { ProtocolError } from "./protocol_error.ts";

/** One process: its pid and `/proc` start time (clock ticks after boot). A reused pid never matches. */
export interface ProcessId {
  readonly pid: number;
  readonly start: number;
}

/** Most processes in one request. */
export const MAX_PROCESSES = 16;

/** The start time of each pid. Answered with `proc-starts`. */
export interface ProcessStartsRequest {
  readonly v: 1;
  readonly t: "proc-starts";
  readonly pids: readonly number[];
}

/** SIGKILL to each process that is alive and started when given. Answered with `ok`. */
export interface ProcessKillRequest {
  readonly v: 1;
  readonly t: "proc-kill";
  readonly processes: readonly ProcessId[];
}

/** The process requests. */
export type ProcessRequest = ProcessStartsRequest | ProcessKillRequest;

/** Start times in the order asked; null where no live (not zombie) process has that pid. */
export interface ProcessesReply {
  readonly v: 1;
  readonly t: "proc-starts";
  readonly starts: readonly (number | null)[];
}

function count(v: unknown, what: string): number {
  if (typeof v !== "number" || !Number.isSafeInteger(v) || v < 0) {
    throw new ProtocolError(`malformed ${what}: must be a non-negative integer`);
  }
  return v;
}

function bounded(v: unknown, what: string): unknown[] {
  if (!Array.isArray(v) || v.length > MAX_PROCESSES) {
    throw new ProtocolError(`malformed ${what}: must be a list of at most ${MAX_PROCESSES}`);
  }
  return v;
}

function pid(v: unknown, what: string): number {
  const n = count(v, what);
  if (n === 0) throw new ProtocolError(`malformed ${what}: must be a pid`);
  return n;
}

/** Validates a process request (its `v` is checked by the caller). */
export function parseProcessRequest(x: Record<string, unknown>): ProcessRequest {
  if (x.t === "proc-starts") {
    return {
      v: 1,
      t: "proc-starts",
      pids: bounded(x.pids, "proc-starts pids").map((p) => pid(p, "proc-starts pid")),
    };
  }
  if (x.t === "proc-kill") {
    return {
      v: 1,
      t: "proc-kill",
      processes: bounded(x.processes, "proc-kill processes").map((p) => {
        if (typeof p !== "object" || p === null) {
          throw new ProtocolError("malformed proc-kill process: must be an object");
        }
        const o = p as Record<string, unknown>;
        return { pid: pid(o.pid, "proc-kill pid"), start: count(o.start, "proc-kill start") };
      }),
    };
  }
  throw new ProtocolError(`unknown request type: ${JSON.stringify(x.t)}`);
}

/** Validates a `proc-starts` reply. */
export function parseProcessesReply(x: Record<string, unknown>): ProcessesReply {
  return {
    v: 1,
    t: "proc-starts",
    starts: bounded(x.starts, "proc-starts starts").map((s) =>
      s === null ? null : count(s, "proc-starts start")
    ),
  };
}
