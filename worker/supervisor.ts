/**
 * The worker's side of one attempt's supervisor (`worker/supervisor.pl`): a
 * small Perl process (perl-base only) that starts the branch's `bash` (an
 * operation's argv) in a new session without a controlling terminal, in the attempt's own cgroup v2
 * group when one can be made, as a child subreaper in every case, and stays
 * until every process of the attempt is gone.
 *
 * Why a separate process: Deno's runtime owns `waitpid` for the worker's
 * children; signalling a process that is not the worker's own child needs
 * unscoped `--allow-run`; and Deno refuses `/proc` and `/sys` to anything
 * short of `--allow-all`. The supervisor does those three things, and the
 * worker keeps its narrow flags.
 *
 * For an operation it also opens the caller's FIFOs and relays the
 * branch's stdio between them and pipes of its own (`protocol/worker.ts`
 * `StdioFifos`): a relay, not the FIFOs as the branch's own fds, so that a
 * reader that goes away costs the rest of its stream, never the branch
 * (which would otherwise die of `SIGPIPE`), and so that no open waits on
 * another.
 *
 * The supervisor is started through `node:child_process`, the one Deno API
 * that gives a child a fourth pipe (fd 3) for its status lines, so the
 * branch's stdout and stderr stay the branch's own. The worker's commands
 * (interrupt, kill) go down its stdin after the config; the end of that
 * pipe tells the supervisor the worker is gone.
 *
 * Needs `--allow-run=perl` and `--allow-env=NODE_V8_COVERAGE` (read by
 * Deno's `node:child_process`).
 *
 * @module
 */

import { type ChildProcess, spawn } from "node:child_process";
import { constants } from "node:os";
import { Readable } from "node:stream";
import {
  MAX_LINGERING,
  type Mechanism,
  type ProcessInfo,
  type StdioFifos,
} from "../protocol/worker.ts";

/** What the supervisor is asked to do. */
export interface SupervisorConfig {
  /** `auto`: a cgroup when one can be made, else a subreaper; `adopt`: end an orphaned cgroup. */
  readonly mode: "auto" | "subreaper" | "adopt";
  readonly attempt: string;
  /** `adopt` only: the cgroup to empty. */
  readonly cgroup?: string;
  /** The branch's working directory; with {@linkcode namespace}, as that namespace sees it. */
  readonly cwd: string;
  /**
   * The pid whose user and mount namespace the branch runs in: the
   * supervisor's child enters both (`setns`) before anything else, so the
   * branch keeps the pid, cgroup and parent the supervisor gave it.
   */
  readonly namespace?: number;
  /**
   * The branch's view (`worker/shell_view.ts`): steps done in a private
   * mount namespace of the child's own, after which `CAP_SYS_ADMIN` leaves
   * its bounding set. Absent or empty: the mount namespace it is in.
   */
  readonly view?: readonly ViewStep[];
  /** The spool file; `null`: `/dev/null` (or {@linkcode fifos}'s stdin). */
  readonly stdin: string | null;
  /** Run as `bash -c script` unless {@linkcode argv} is given. */
  readonly script: string;
  /** An operation's command, exec'd as it is (`argv[0]` looked up in the branch's `PATH`). */
  readonly argv?: readonly string[];
  /**
   * An operation's FIFOs (`protocol/worker.ts` `StdioFifos`), relayed by the
   * supervisor; `waitMs` bounds the wait for the caller to open its ends.
   */
  readonly fifos?: StdioFifos & { readonly waitMs: number };
  /** Already filtered. */
  readonly env: Readonly<Record<string, string>>;
}

/**
 * One step of a branch's view, in order. A `bind` source must exist and be
 * reached through no symlink; every source is opened before the first step.
 *
 * - `bind`, `bind-ro`: a non-recursive bind of `source` at `target`
 *   (read-only: then remounted read-only);
 * - `bind-ro-if`: `bind-ro` when `source` exists (a directory or a file,
 *   not a symlink), after making its mount point at `target`; else nothing;
 * - `mkdir`: `target` and its parents as directories (a symlink refuses);
 * - `tmpfs`: a small `nosuid,nodev,noexec` tmpfs at `target`;
 * - `file`: a new file `target` holding `source`;
 * - `remount-ro`: the mount at `target` made read-only.
 */
export interface ViewStep {
  readonly step: "bind" | "bind-ro" | "bind-ro-if" | "mkdir" | "tmpfs" | "file" | "remount-ro";
  /** The bind source, or a `file`'s text; `""` for the others. */
  readonly source: string;
  readonly target: string;
}

/** Most steps a view may have (the supervisor reads the count as up to three digits). */
export const MAX_VIEW_STEPS = 999;

/** A status line from the supervisor. */
export type SupervisorMessage =
  | {
    readonly kind: "launched";
    readonly pid: number;
    readonly mechanism: Mechanism;
    readonly cgroup: string | null;
  }
  | { readonly kind: "exited"; readonly code: number | null; readonly signal: string | null }
  | {
    readonly kind: "lingering";
    /** How many processes remain; `processes` names the first of them by pid. */
    readonly total: number;
    readonly processes: readonly ProcessInfo[];
  }
  | {
    readonly kind: "settled";
    readonly cgroupRemoved: boolean;
    /** With FIFOs: the bytes the stdout and stderr readers got. */
    readonly relayed?: readonly [number, number];
  }
  | { readonly kind: "fail"; readonly message: string }
  | { readonly kind: "warn"; readonly message: string };

/** The supervisor said something this module does not understand: a fault in marsh. */
export class SupervisorError extends Error {
  override name = "SupervisorError";
}

/**
 * `prctl`, `setsid`, `close`, `clone3`, `rt_sigprocmask`, `setns`,
 * `unshare`, `mount`, `statfs`, `capget` and `capset` syscall numbers, then
 * `O_NOFOLLOW`: Perl's `syscall` takes raw numbers, and `POSIX` costs 11 ms
 * to load.
 */
const SYSCALLS: Partial<Record<typeof Deno.build.arch, string>> = {
  x86_64: "157,112,3,435,14,308,272,165,137,125,126,131072",
  aarch64: "167,157,57,435,135,268,97,40,43,90,91,32768",
};

const SCRIPT = new URL("./supervisor.pl", import.meta.url).pathname;
const enc = new TextEncoder();

/**
 * The config the supervisor reads first on its stdin: `LENGTH\n`, then
 * that many bytes of NUL-terminated fields.
 *
 * @throws {SupervisorError} on an architecture whose syscall numbers are not known
 */
export function encodeConfig(cfg: SupervisorConfig): Uint8Array {
  const nrs = SYSCALLS[Deno.build.arch];
  if (nrs === undefined) {
    throw new SupervisorError(`no syscall numbers for ${Deno.build.arch}`);
  }
  const view = cfg.view ?? [];
  const argv = cfg.argv ?? [];
  if (view.length > MAX_VIEW_STEPS) {
    throw new SupervisorError(`a view of ${view.length} steps (at most ${MAX_VIEW_STEPS})`);
  }
  const fields = [
    "marsh-supervisor/4",
    cfg.mode,
    cfg.attempt,
    cfg.cgroup ?? "",
    cfg.cwd,
    cfg.namespace === undefined ? "" : String(cfg.namespace),
    cfg.stdin ?? "",
    cfg.script,
    nrs,
    cfg.fifos?.stdin ?? "",
    cfg.fifos?.stdout ?? "",
    cfg.fifos?.stderr ?? "",
    String(cfg.fifos?.waitMs ?? 0),
    String(argv.length),
    ...argv,
    String(view.length),
    ...view.flatMap((v) => [v.step, v.source, v.target]),
    ...Object.entries(cfg.env).map(([k, v]) => `${k}=${v}`),
  ];
  for (const f of fields) {
    if (f.includes("\0")) throw new SupervisorError("a config field contains a NUL byte");
  }
  const body = enc.encode(fields.map((f) => `${f}\0`).join(""));
  const head = enc.encode(`${body.length}\n`);
  const out = new Uint8Array(head.length + body.length);
  out.set(head);
  out.set(body, head.length);
  return out;
}

const SIGNAL_NAMES = new Map<number, string>(
  Object.entries(constants.signals).map(([name, n]) => [n as number, name]),
);

/** `SIGINT` for 2; `SIG<n>` for a number without a name. */
export function signalName(n: number): string {
  return SIGNAL_NAMES.get(n) ?? `SIG${n}`;
}

/**
 * Parses one status line.
 *
 * @throws {SupervisorError} when the line is not one the supervisor writes
 */
export function parseSupervisorLine(line: string): SupervisorMessage {
  const space = line.indexOf(" ");
  const word = space < 0 ? line : line.slice(0, space);
  const rest = space < 0 ? "" : line.slice(space + 1);
  switch (word) {
    case "launched": {
      const m = /^(\d+) (cgroup|subreaper)(?: (\/.*))?$/.exec(rest);
      if (!m) break;
      const cgroup = m[3] ?? null;
      if ((m[2] === "cgroup") !== (cgroup !== null)) break;
      return {
        kind: "launched",
        pid: Number(m[1]),
        mechanism: m[2] as Mechanism,
        cgroup,
      };
    }
    case "exited": {
      const m = /^(code|signal) (\d{1,3})$/.exec(rest);
      if (!m) break;
      const n = Number(m[2]);
      return m[1] === "code"
        ? { kind: "exited", code: n, signal: null }
        : { kind: "exited", code: null, signal: signalName(n) };
    }
    case "lingering": {
      const words = rest.split(" ");
      const total = Number(words[0]);
      const pairs = words.slice(1);
      const listed = pairs.length / 2;
      if (
        !/^[1-9]\d{0,7}$/.test(words[0] ?? "") || !Number.isInteger(listed) || listed < 1 ||
        listed > Math.min(total, MAX_LINGERING)
      ) break;
      const processes: ProcessInfo[] = [];
      for (let i = 0; i < pairs.length; i += 2) {
        const pid = pairs[i]!, hex = pairs[i + 1]!;
        if (!/^[1-9]\d{0,7}$/.test(pid) || !/^(?:[0-9a-f]{2}){1,100}$/.test(hex)) break;
        processes.push({ pid: Number(pid), command: printable(hex) });
      }
      if (processes.length !== listed) break;
      return { kind: "lingering", total, processes };
    }
    case "settled": {
      const m = /^([01])(?: (\d{1,16}) (\d{1,16}))?$/.exec(rest);
      if (!m) break;
      return {
        kind: "settled",
        cgroupRemoved: m[1] === "1",
        ...(m[2] === undefined ? {} : { relayed: [Number(m[2]), Number(m[3])] as const }),
      };
    }
    case "fail":
    case "warn":
      return { kind: word, message: rest };
  }
  throw new SupervisorError(`unexpected supervisor line: ${JSON.stringify(line.slice(0, 200))}`);
}

const lossy = new TextDecoder();

/** A command line's bytes (hex) as text for a listing: control characters become `?`. */
function printable(hex: string): string {
  const bytes = new Uint8Array(hex.length / 2);
  for (let i = 0; i < bytes.length; i++) bytes[i] = parseInt(hex.slice(2 * i, 2 * i + 2), 16);
  // deno-lint-ignore no-control-regex
  return lossy.decode(bytes).replace(/[\x00-\x1f\x7f-\x9f]/g, "?");
}

/** How the supervisor process ended. */
export interface SupervisorExit {
  readonly code: number | null;
  readonly signal: string | null;
  /** Why it could not be started at all. */
  readonly error?: string;
}

/**
 * One running supervisor. Its branch's stdout and stderr are {@linkcode stdout}
 * and {@linkcode stderr}; status lines arrive through `onMessage`.
 */
export class Supervisor {
  readonly #child: ChildProcess;
  readonly #exit: Promise<SupervisorExit>;
  #exited = false;

  private constructor(child: ChildProcess, exit: Promise<SupervisorExit>) {
    this.#child = child;
    this.#exit = exit.then((e) => {
      this.#exited = true;
      child.stdin?.end();
      return e;
    });
  }

  /**
   * Starts a supervisor and hands it its config.
   *
   * @param onMessage every status line, in order
   * @param perl the Perl to run (default `perl` from `PATH`)
   */
  static start(
    cfg: SupervisorConfig,
    onMessage: (m: SupervisorMessage) => void,
    perl = "perl",
  ): Supervisor {
    const config = encodeConfig(cfg);
    const child = spawn(perl, [SCRIPT], {
      stdio: ["pipe", "pipe", "pipe", "pipe"],
      // Perl needs nothing from the worker's environment; the branch's
      // environment travels in the config.
      env: {},
    });
    // Not "close": that waits for stdout and stderr too, which orphans of
    // a supervisor that was killed may hold open.
    const ended = new Promise<SupervisorExit>((resolve) => {
      child.once(
        "error",
        (error: Error) => resolve({ code: null, signal: null, error: error.message }),
      );
      child.once("exit", (code: number | null, signal: string | null) => resolve({ code, signal }));
    });
    // A child that could not be started has no status pipe.
    const status = child.stdio[3] as Readable | null | undefined;
    let linesRead = Promise.resolve();
    if (status) {
      linesRead = new Promise<void>((resolve) => {
        status.once("close", () => resolve());
        status.once("end", () => resolve());
      });
      readLines(status, (line) => {
        let m: SupervisorMessage;
        try {
          m = parseSupervisorLine(line);
        } catch (error) {
          m = { kind: "warn", message: String(error) };
        }
        onMessage(m);
      });
    }
    const exit = ended.then(async (e) => {
      if (e.error === undefined) await linesRead;
      return e;
    });
    child.stdin?.on("error", () => {/* the supervisor died; its exit reports it */});
    child.stdin?.write(config);
    return new Supervisor(child, exit);
  }

  /** The supervisor's pid (0 when it could not start). */
  get pid(): number {
    return this.#child.pid ?? 0;
  }

  /** The branch's stdout pipe (empty if the supervisor could not start). */
  get stdout(): Readable {
    return this.#child.stdout ?? Readable.from([]);
  }

  /** The branch's stderr pipe (empty if the supervisor could not start). */
  get stderr(): Readable {
    return this.#child.stderr ?? Readable.from([]);
  }

  /** Resolves when the supervisor has ended and its status lines are read. */
  get exit(): Promise<SupervisorExit> {
    return this.#exit;
  }

  /** SIGINT to every process of the attempt. */
  interrupt(): void {
    this.#command("i");
  }

  /** SIGKILL to every process of the attempt, repeated until none is left. */
  kill(): void {
    this.#command("k");
  }

  // A command, not a signal: Deno's `ChildProcess.kill` sends one signal per
  // child and then does nothing, and a pipe cannot be spoofed by the branch.
  #command(c: "i" | "k"): void {
    if (this.#exited) return;
    this.#child.stdin?.write(c);
  }
}

function readLines(stream: Readable, onLine: (line: string) => void): void {
  const dec = new TextDecoder();
  let buf = "";
  stream.on("data", (chunk: Uint8Array) => {
    buf += dec.decode(chunk, { stream: true });
    for (let nl = buf.indexOf("\n"); nl >= 0; nl = buf.indexOf("\n")) {
      onLine(buf.slice(0, nl));
      buf = buf.slice(nl + 1);
    }
  });
  stream.on("error", () => {/* the stream ends with the process; its exit reports it */});
}
