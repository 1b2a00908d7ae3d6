/**
 * Runs a fanout's branches at once in the caller's directory (docs/guide.md, "marsh fanout and
 * marsh collect"): each in its own process group (a new session, so a signal reaches everything
 * the branch started), each reading the same spooled stdin, with `FANOUT_BRANCH` set; their
 * stdout and stderr are kept, up to the fanout output limit for all of them together. No daemon
 * is involved: a fanout is local concurrency, charged to whoever runs it.
 *
 * Needs `--allow-run` (the branches' commands; `bash` for shell branches; signals to their groups).
 *
 * @module
 */

import {
  FANOUT_BRANCH_ENV,
  FANOUT_GRACE_MS,
  FANOUT_OUTPUT_LIMIT,
  type FanoutBranch,
  fanoutBranchValue,
  type FanoutSpec,
} from "../model/fanout.ts";
import { concatBytes } from "../model/bytes.ts";

const enc = new TextEncoder();

/** How the fanout ended, besides its branches. */
export type FanoutEnd =
  | { readonly kind: "done" }
  /** A signal was forwarded to every branch. */
  | { readonly kind: "signal"; readonly signal: Deno.Signal }
  /** The branches wrote more than the output limit together: every branch was stopped. */
  | { readonly kind: "output-limit" };

/** What {@linkcode runFanout} reports. */
export interface FanoutResult {
  readonly end: FanoutEnd;
  readonly branches: readonly FanoutBranch[];
}

/** A running branch. */
interface Running {
  readonly spec: FanoutSpec;
  /** Its process (the leader of its own process group), or null when it could not start. */
  readonly child: Deno.ChildProcess | null;
  readonly startedMs: number;
  readonly stdout: Uint8Array[];
  readonly stderr: Uint8Array[];
  /** A branch that could not start: its exit (127: not found, else 126). */
  readonly startExit: number | null;
  /**
   * Set once its leader is reaped and its streams are at their end. Until
   * then its group may hold processes (a background job keeping stdout
   * open), and Linux reuses no pid still in use as a process group id.
   */
  done: boolean;
}

/** The first word of an argv branch, or `bash` for a shell branch, with its arguments. */
function commandOf(spec: FanoutSpec): [string, string[]] {
  if (spec.kind === "shell") return ["bash", ["-c", spec.string]];
  return [spec.argv[0]!, spec.argv.slice(1)];
}

/** A branch that could not start: its exit and message, as a shell reports them. */
function notStarted(spec: FanoutSpec, error: unknown): { exit: number; message: string } {
  const [cmd] = commandOf(spec);
  if (error instanceof Deno.errors.NotFound) {
    return { exit: 127, message: `marsh fanout: ${cmd}: command not found` };
  }
  if (error instanceof Deno.errors.PermissionDenied) {
    return { exit: 126, message: `marsh fanout: ${cmd}: permission denied` };
  }
  const why = error instanceof Error ? error.message : String(error);
  return { exit: 126, message: `marsh fanout: ${cmd}: cannot run it: ${why}` };
}

/**
 * Runs one fanout; {@linkcode FanoutRun.signal} forwards a signal to every branch, and disposing of
 * it KILLs what is left.
 */
export class FanoutRun {
  readonly #id: string;
  readonly #running: Running[] = [];
  #outputBytes = 0;
  #end: FanoutEnd = { kind: "done" };
  #killTimer: ReturnType<typeof setTimeout> | undefined;

  /**
   * Starts every branch now, in declaration order, in the current directory.
   *
   * @param id the fanout's id (`FANOUT_BRANCH=<id>/<label>`)
   * @param input the spooled stdin every branch reads
   */
  constructor(id: string, specs: readonly FanoutSpec[], input: Uint8Array) {
    this.#id = id;
    for (const spec of specs) this.#running.push(this.#start(spec, input));
  }

  #start(spec: FanoutSpec, input: Uint8Array): Running {
    const [cmd, args] = commandOf(spec);
    const startedMs = Date.now();
    let child: Deno.ChildProcess | null = null;
    let startExit: number | null = null;
    const stderr: Uint8Array[] = [];
    try {
      child = new Deno.Command(cmd, {
        args,
        env: { [FANOUT_BRANCH_ENV]: fanoutBranchValue(this.#id, spec.label) },
        stdin: "piped",
        stdout: "piped",
        stderr: "piped",
        // A new session: the branch leads its own process group, which the
        // forwarded signals and the KILL after the grace reach whole.
        detached: true,
      }).spawn();
    } catch (error) {
      const { exit, message } = notStarted(spec, error);
      startExit = exit;
      stderr.push(enc.encode(`${message}\n`));
    }
    const r: Running = {
      spec,
      child,
      startedMs,
      stdout: [],
      stderr,
      startExit,
      done: child === null,
    };
    if (child) void this.#feed(child, input);
    return r;
  }

  /** Writes the spool to a branch; one that stops reading early is its own business. */
  async #feed(child: Deno.ChildProcess, input: Uint8Array): Promise<void> {
    const writer = child.stdin.getWriter();
    try {
      if (input.length > 0) await writer.write(input);
      await writer.close();
    } catch (error) {
      if (!(error instanceof Deno.errors.BrokenPipe) && !(error instanceof TypeError)) throw error;
      // The branch exited or closed its stdin before reading it all (as `head` does).
    }
  }

  /** Reads one of a branch's streams into `into`, counting against the output limit. */
  async #drain(stream: ReadableStream<Uint8Array>, into: Uint8Array[]): Promise<void> {
    for await (const chunk of stream) {
      if (this.#end.kind === "output-limit") continue;
      this.#outputBytes += chunk.length;
      if (this.#outputBytes > FANOUT_OUTPUT_LIMIT) {
        this.#end = { kind: "output-limit" };
        this.#forward("SIGINT");
        continue;
      }
      into.push(chunk);
    }
  }

  /**
   * Forwards `signal` to every branch's process group, then KILL after the
   * grace to each group whose leader is still there. The first signal is
   * the one the fanout exits with.
   */
  signal(signal: Deno.Signal): void {
    if (this.#end.kind === "done") this.#end = { kind: "signal", signal };
    this.#forward(signal);
  }

  #forward(signal: Deno.Signal): void {
    this.#killGroups(signal);
    this.#killTimer ??= setTimeout(() => this.#killGroups("SIGKILL"), FANOUT_GRACE_MS);
  }

  #killGroups(signal: Deno.Signal): void {
    for (const r of this.#running) {
      if (r.done || r.child === null) continue;
      try {
        Deno.kill(-r.child.pid, signal);
      } catch (error) {
        if (!(error instanceof Deno.errors.NotFound)) throw error;
        // The group is already empty.
      }
    }
  }

  /**
   * KILLs every branch group not yet done: a fanout that ends early (a bug,
   * an error writing stdin) leaves no branch behind.
   */
  [Symbol.dispose](): void {
    clearTimeout(this.#killTimer);
    this.#killGroups("SIGKILL");
  }

  /** Waits for every branch's end. */
  async wait(): Promise<FanoutResult> {
    try {
      const branches = await Promise.all(this.#running.map((r) => this.#settle(r)));
      return { end: this.#end, branches };
    } finally {
      clearTimeout(this.#killTimer);
    }
  }

  async #settle(r: Running): Promise<FanoutBranch> {
    let exit: number;
    if (r.child === null) {
      exit = r.startExit ?? 126;
    } else {
      const [status] = await Promise.all([
        r.child.status,
        this.#drain(r.child.stdout, r.stdout),
        this.#drain(r.child.stderr, r.stderr),
      ]);
      r.done = true;
      // Deno reports a signal's end as 128 + its number, as a shell does.
      exit = status.code;
    }
    return {
      ...r.spec,
      exit,
      status: `exited ${exit}`,
      stdout: concatBytes(r.stdout),
      stderr: concatBytes(r.stderr),
      startedMs: r.startedMs,
      finishedMs: Date.now(),
    };
  }
}
