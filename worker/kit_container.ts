/**
 * One argv branch (`::: LABEL CMD ARGS...`) run as a fresh Kit container
 * (docs/rules.md "Branches"): create, attach, start, wait within the
 * kit's wall clock, the output limit and the caller's abort signal, then
 * remove the container and verify that it is gone before anything resolves.
 *
 * What the container is:
 *
 * - the kit's image (pinned to the id inspected), `--init` (Docker's tini is
 *   pid 1 and forwards signals), no TTY, stdin the spool (streamed in, then
 *   closed) or empty, `NetworkMode` the kit's (`none` by default),
 *   `WorkingDir` the launch's cwd: the fork's subdirectory at the same
 *   absolute path as on the host;
 * - the mounts of `kit_mounts.ts` and nothing else of the project;
 * - `Env` (`kit_env.ts`): the variables the daemon forwards (checked again),
 *   then `HOME=<the image user's home>` and `MARSH_JOB=<job>`, and with a
 *   job capability `PATH=/run/marsh/bin:<the image's PATH>` and
 *   `MARSH_ENTRY=1` (docs/rules.md "The job capability"); the image's own
 *   `Env` stays underneath;
 * - with a job capability, `/run/marsh` (`kit_mounts.ts`), and in it the
 *   `job.json` the worker writes before the container is made: the daemon's
 *   part plus the starting `PATH` and the starting environment's digests,
 *   which only the image config tells. A
 *   launch whose `/run/marsh` cannot be set up fails; it never runs without one;
 * - the command: `argv[0]` is the kit name. A kit with an `entrypoint`
 *   gets it as the container's `ENTRYPOINT` and `argv[1..]` as `CMD`; a kit
 *   without one keeps the image's entrypoint and gets all of `argv` as `CMD`,
 *   so its name must be a program on the image's `PATH`;
 * - labels `marsh.job`, `marsh.attempt`, `marsh.split`, `marsh.label`,
 *   `marsh.kit`; the name `marsh-<attempt>`; stop signal `SIGINT` with the
 *   grace as the stop timeout (so an operator's `docker stop` is our
 *   cancel too); no log driver (the output is attached, never stored by the
 *   engine); `CAP_MKNOD` dropped, so no device node can be planted in a fork;
 *   `no-new-privileges`, so no set-uid program raises the job's privileges.
 *
 * The user is the launch's `user`, the forks' owner (the daemon's uid and
 * gid), else the image's (`Config.User`). Without user-namespace remapping
 * a container's uid is the host's: as the forks' owner it can write its
 * fork whatever the image's `USER` (an image user that is not the owner
 * would get `EACCES` on every write), Git inside sees no dubious
 * ownership, and what it creates is the owner's, never root's on a
 * non-root daemon's project. The image user's home is still where the
 * Kit home is bound.
 *
 * Needs what `DockerApi` needs (`--allow-net=unix:<socket>`, read and write
 * on the socket, unscoped `--allow-env`), write access to the output files'
 * directory and the capability dir (both under the control dir) and read
 * access to the spool (`kitWorkerFlags` in `kit_flags.ts`).
 *
 * @module
 */

import type { Readable, Writable } from "node:stream";
import type { DockerApi } from "../docker/docker_api.ts";
import { DockerApiError } from "../docker/docker_api.ts";
import { CAP_FILES, type JobJson } from "../protocol/job_capability.ts";
import { imagePath, jobJson, kitEnv, kitEnvRecord, receivedEnv } from "./kit_env.ts";
import { isWithin, type KitCap, type KitLaunch } from "../protocol/kit_launch.ts";
import { DEFAULT_GRACE_MS } from "../protocol/worker.ts";
import { Demuxer } from "./kit_demux.ts";
import { KitDocker, statusOf } from "./kit_docker.ts";
import { ContainerNotRemovedError, KitLaunchError } from "./kit_errors.ts";
import { engineMounts, guestHome, type KitMount, planMounts } from "./kit_mounts.ts";
import { OutputBudget } from "./output.ts";
import {
  LABEL_ATTEMPT,
  REMOVE_TIMEOUT_MS,
  removeAttempt,
  removeWithAttempt,
} from "./kit_removal.ts";

export { ContainerNotRemovedError, KitLaunchError } from "./kit_errors.ts";
export { imagePath, jobJson, kitEnv } from "./kit_env.ts";

export { LABEL_ATTEMPT, REMOVE_TIMEOUT_MS };

/** The labels every Kit container carries, with {@linkcode LABEL_ATTEMPT}. */
export const LABEL_JOB = "marsh.job";
export const LABEL_SPLIT = "marsh.split";
export const LABEL_LABEL = "marsh.label";
export const LABEL_KIT = "marsh.kit";
/** The daemon's control dir: whose container it is on a shared engine. */
export const LABEL_OWNER = "marsh.owner";
/** Container names: `marsh-<attempt>`. */
export const CONTAINER_PREFIX = "marsh-";
/** How long output may trail the container's exit before the stream is cut. */
export const DRAIN_MS = 5_000;

/** How a Kit container ended; it is removed (verified) when this is returned. */
export interface KitExit {
  /** The container's exit status (the command's, through tini), unless `signal` says how it ended. */
  readonly code: number | null;
  /**
   * `"SIGINT"` or `"SIGKILL"` when the worker sent that signal (cancel, wall
   * clock, output limit) and the status says it ended the command
   * (128 + the signal's number). Both are null when the container never
   * started (cancelled first).
   */
  readonly signal: string | null;
  /** stdout and stderr together went past the launch's `outputLimit`; the limit was kept. */
  readonly outputLimit: boolean;
  /** The kit's wall clock ran out. */
  readonly wall: boolean;
  /** The abort signal fired. */
  readonly cancelled: boolean;
  readonly containerId: string;
  readonly removed: true;
  /** Bytes kept in the stdout and stderr files. */
  readonly stdoutBytes: number;
  readonly stderrBytes: number;
}

/** Knobs of {@linkcode runKitContainer}; the defaults are the spec's. */
export interface KitRunOptions {
  /** SIGINT, then SIGKILL after this long (docs/rules.md "Cancel": 10 s). */
  readonly graceMs?: number;
  /**
   * Called once the container exists and before it starts, with its id and
   * the mounts it got (the journal records the id for `marsh workers reset`).
   */
  readonly onContainer?: (id: string, mounts: readonly KitMount[]) => void;
  /** Default {@linkcode REMOVE_TIMEOUT_MS}. */
  readonly removeTimeoutMs?: number;
  /** Default {@linkcode DRAIN_MS}. */
  readonly drainMs?: number;
  /** The daemon's control dir, as the `marsh.owner` label ({@linkcode LABEL_OWNER}). */
  readonly owner?: string | null;
}

type StopSignal = "SIGINT" | "SIGKILL";
const SIGNAL_NUMBER: Readonly<Record<StopSignal, number>> = { SIGINT: 2, SIGKILL: 9 };

function noImage(launch: KitLaunch): string {
  return `kit ${launch.kit.name}: the engine has no image ${launch.kit.image}`;
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * The container's `ENTRYPOINT` (`null`: the image's) and `CMD` for `launch`.
 *
 * @throws {KitLaunchError} when `argv[0]` is not the kit's name
 */
export function kitCommand(
  launch: KitLaunch,
): { entrypoint: string[] | null; cmd: string[] } {
  if (launch.argv[0] !== launch.kit.name) {
    throw new KitLaunchError(
      launch.attempt,
      `argv[0] is ${JSON.stringify(launch.argv[0] ?? "")}, not the kit name ${
        JSON.stringify(launch.kit.name)
      }`,
    );
  }
  return launch.kit.entrypoint === null
    ? { entrypoint: null, cmd: [...launch.argv] }
    : { entrypoint: [...launch.kit.entrypoint], cmd: launch.argv.slice(1) };
}

/**
 * Writes `<cap.dir>/job.json`: created new (never over one that exists),
 * mode 0644 whatever the umask, so any user of the image can read it.
 *
 * Needs write access to `cap.dir`.
 *
 * @throws {KitLaunchError} when it exists or cannot be written
 */
async function writeJobJson(launch: KitLaunch, cap: KitCap, json: JobJson): Promise<void> {
  const path = `${cap.dir}/${CAP_FILES.jobJson}`;
  const bytes = new TextEncoder().encode(`${JSON.stringify(json)}\n`);
  try {
    using file = await Deno.open(path, { write: true, createNew: true, mode: 0o644 });
    await writeAll(file, bytes);
    await Deno.chmod(path, 0o644);
  } catch (error) {
    if (error instanceof Deno.errors.NotCapable) throw error;
    throw new KitLaunchError(
      launch.attempt,
      `cannot write the job capability's ${JSON.stringify(path)}: ${describe(error)}`,
      { cause: error },
    );
  }
}

/** The labels of `launch`'s container. */
export function kitLabels(launch: KitLaunch, owner: string | null = null): Record<string, string> {
  return {
    [LABEL_JOB]: launch.job,
    [LABEL_ATTEMPT]: launch.attempt,
    [LABEL_SPLIT]: launch.split,
    [LABEL_LABEL]: launch.label,
    [LABEL_KIT]: launch.kit.name,
    ...(owner === null ? {} : { [LABEL_OWNER]: owner }),
  };
}

/** `Create` body without its mounts. */
function containerBody(
  launch: KitLaunch,
  image: { readonly id: string; readonly path: string | null },
  home: string,
  graceMs: number,
  owner: string | null,
): Record<string, unknown> {
  const { entrypoint, cmd } = kitCommand(launch);
  const stdin = launch.stdin !== null;
  return {
    name: `${CONTAINER_PREFIX}${launch.attempt}`,
    Image: image.id,
    ...(entrypoint === null ? {} : { Entrypoint: entrypoint }),
    Cmd: cmd,
    ...(launch.user === null ? {} : { User: launch.user }),
    Env: kitEnv(launch, home, image.path),
    Labels: kitLabels(launch, owner),
    WorkingDir: launch.cwd,
    Tty: false,
    OpenStdin: stdin,
    StdinOnce: stdin,
    AttachStdin: stdin,
    AttachStdout: true,
    AttachStderr: true,
    StopSignal: "SIGINT",
    StopTimeout: Math.ceil(graceMs / 1000),
    HostConfig: {
      Init: true,
      NetworkMode: launch.kit.network,
      Privileged: false,
      AutoRemove: false,
      CapDrop: ["MKNOD"],
      // A set-uid program in the image (or one the job plants) never raises
      // the job's privileges: without user-namespace remapping, container
      // root is host root as far as its mounts go.
      SecurityOpt: ["no-new-privileges"],
      LogConfig: { Type: "none", Config: {} },
    },
  };
}

/** The source the engine says is missing, from its create refusal. */
function missingSource(error: DockerApiError): string | null {
  const m = /bind source path does not exist: (.+)$/s.exec(error.message);
  return m ? m[1]!.trim() : null;
}

/**
 * Creates the container. An optional mount whose source the engine reports
 * missing is dropped and the create retried (at most once per optional
 * mount). A create whose outcome is unknown (no answer, an engine fault) is
 * followed by a removal of anything labelled with the attempt.
 */
async function create(
  api: DockerApi,
  docker: KitDocker,
  launch: KitLaunch,
  body: Record<string, unknown>,
  planned: readonly KitMount[],
  removeTimeoutMs: number,
): Promise<{ id: string; mounts: KitMount[] }> {
  let mounts = [...planned];
  for (;;) {
    const hostConfig = { ...(body.HostConfig as object), Mounts: engineMounts(mounts) };
    try {
      return { id: await docker.create({ ...body, HostConfig: hostConfig }), mounts };
    } catch (error) {
      if (!(error instanceof DockerApiError) || (statusOf(error) ?? 500) >= 500) {
        // The engine may have made it before the answer was lost.
        await removeAttempt(
          api,
          launch.attempt,
          removeTimeoutMs,
          `the create's outcome is unknown (${describe(error)})`,
        );
        throw error;
      }
      const status = statusOf(error);
      if (status === 404) {
        // Removed since its config was read (and kept): the same refusal as before any create.
        docker.forgetImage(launch.kit.image);
        throw new KitLaunchError(launch.attempt, noImage(launch), { cause: error });
      }
      if (status === 400) {
        const missing = missingSource(error);
        const mount = mounts.find((m) => m.source === missing);
        if (mount?.optional) {
          mounts = mounts.filter((m) => m !== mount);
          continue;
        }
        if (mount) {
          throw new KitLaunchError(
            launch.attempt,
            `the ${mount.role} ${mount.source} does not exist`,
            { cause: error },
          );
        }
      }
      if (status === 409) {
        throw new KitLaunchError(
          launch.attempt,
          `a container named ${CONTAINER_PREFIX}${launch.attempt} exists already`,
          { cause: error },
        );
      }
      throw new KitLaunchError(
        launch.attempt,
        `the engine refused the container: ${error.message}`,
        { cause: error },
      );
    }
  }
}

async function writeAll(file: Deno.FsFile, bytes: Uint8Array): Promise<void> {
  for (let off = 0; off < bytes.length;) off += await file.write(bytes.subarray(off));
}

/** Copies the demultiplexed output into the files within `budget`; the rest is read and dropped. */
async function pumpOutput(
  source: Readable,
  out: Deno.FsFile,
  err: Deno.FsFile,
  budget: OutputBudget,
  onCrossed: () => void,
): Promise<{ stdout: number; stderr: number }> {
  const kept = { stdout: 0, stderr: 0 };
  const demux = new Demuxer();
  try {
    for await (const chunk of source as AsyncIterable<Uint8Array>) {
      for (const piece of demux.push(chunk)) {
        // Past the limit the container is being stopped; keep reading so it never blocks.
        if (budget.crossed) continue;
        const keep = budget.take(piece.bytes.length);
        if (keep > 0) {
          await writeAll(piece.stream === "stdout" ? out : err, piece.bytes.subarray(0, keep));
          kept[piece.stream] += keep;
        }
        if (budget.report()) onCrossed();
      }
    }
  } catch (error) {
    // Destroying the stream (output that trails the exit too long) ends the copy.
    if (!source.destroyed) throw error;
  }
  return kept;
}

/** Resolves when `w` may take more, or is closed; rejects on its error. */
function drained(w: Writable): Promise<void> {
  // Destroyed (the container ended, and the attach with it) between the read
  // and the write: its 'close' came already and will not come again.
  if (w.destroyed || w.writableEnded) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const done = () => {
      w.off("drain", done);
      w.off("close", done);
      w.off("error", fail);
      resolve();
    };
    const fail = (error: unknown) => {
      w.off("drain", done);
      w.off("close", done);
      reject(error);
    };
    w.on("drain", done);
    w.on("close", done);
    w.once("error", fail);
  });
}

/** Streams the spool into the container's stdin, then closes it. */
async function pumpInput(spool: Deno.FsFile, input: Writable): Promise<void> {
  const buf = new Uint8Array(256 * 1024);
  for (;;) {
    if (input.destroyed || input.writableEnded) return;
    const n = await spool.read(buf);
    if (n === null) break;
    if (!input.write(buf.slice(0, n))) await drained(input);
  }
  input.end();
}

/** What {@linkcode drive} found. */
interface Outcome {
  readonly status: number | null;
  readonly sent: ReadonlySet<StopSignal>;
  readonly outputLimit: boolean;
  readonly wall: boolean;
  readonly cancelled: boolean;
  readonly stdoutBytes: number;
  readonly stderrBytes: number;
}

/** Attach, start, wait; stops the container on abort, wall clock or output limit. */
async function drive(
  api: DockerApi,
  docker: KitDocker,
  id: string,
  launch: KitLaunch,
  files: { out: Deno.FsFile; err: Deno.FsFile; spool: Deno.FsFile | null },
  signal: AbortSignal,
  opts: { graceMs: number; drainMs: number },
): Promise<Outcome> {
  const attached = await docker.attach(id, files.spool !== null);
  // The engine closing the connection first (EPIPE, ECONNRESET) is one way an
  // attach ends. What counts is the container's status from the wait, so such
  // an error is dropped here; without a listener Node would throw it.
  const onStreamError = (_error: unknown): void => {};
  attached.output.on("error", onStreamError);
  attached.input?.on("error", onStreamError);
  const sent = new Set<StopSignal>();
  let started = false;
  let wall = false;
  let cancelled = signal.aborted;
  let limit = false;
  let killTimer: ReturnType<typeof setTimeout> | undefined;
  let wallTimer: ReturnType<typeof setTimeout> | undefined;
  const kill = (sig: StopSignal) => {
    sent.add(sig);
    docker.kill(id, sig).catch(() =>
      // It cannot be signalled: end it the hard way. When that fails too, the
      // wait below (or the verified removal after it) reports the engine's failure.
      api.removeContainer(id).catch((error: unknown) => void error)
    );
  };
  // SIGINT, then SIGKILL after the grace (docs/rules.md "Cancel"); later reasons add nothing.
  const stop = () => {
    if (!started || sent.size > 0) return;
    kill("SIGINT");
    killTimer = setTimeout(() => kill("SIGKILL"), opts.graceMs);
  };
  const onAbort = () => {
    cancelled = true;
    stop();
  };
  signal.addEventListener("abort", onAbort, { once: true });
  const budget = new OutputBudget(launch.outputLimit);
  let outputFailure: unknown = null;
  const output = pumpOutput(attached.output, files.out, files.err, budget, () => {
    limit = true;
    stop();
  }).catch((error) => {
    // Reported below once the container is stopped; the pump itself is done.
    outputFailure = error;
    stop();
    return { stdout: 0, stderr: 0 };
  });
  let input: Promise<void> = Promise.resolve();
  try {
    if (cancelled) {
      attached.output.destroy();
      attached.input?.destroy();
      await output;
      return {
        status: null,
        sent,
        outputLimit: false,
        wall,
        cancelled,
        stdoutBytes: 0,
        stderrBytes: 0,
      };
    }
    try {
      await api.startContainer(id);
    } catch (error) {
      if (error instanceof DockerApiError) {
        throw new KitLaunchError(
          launch.attempt,
          `the container of kit ${launch.kit.name} did not start: ${error.message}`,
          { cause: error },
        );
      }
      throw error;
    }
    started = true;
    // Output streams from the start, so the limit (or a failed write) may have
    // been crossed before the start call returned, when stop() could not act yet.
    if (cancelled || limit || outputFailure !== null) stop();
    wallTimer = setTimeout(() => {
      wall = true;
      stop();
    }, launch.kit.wallS * 1000);
    if (files.spool && attached.input) {
      const sink = attached.input;
      input = pumpInput(files.spool, sink).catch((error) => {
        // A command that exits or closes stdin before reading it all is normal
        // (a pipe's EPIPE). Whatever failed, the command gets end of input;
        // the output half of the connection stays open.
        onStreamError(error);
        if (!sink.destroyed) sink.end();
      });
    }
    const status = await api.waitContainer(id);
    clearTimeout(wallTimer);
    clearTimeout(killTimer);
    let drainTimer: ReturnType<typeof setTimeout> | undefined;
    const trailing = await Promise.race([
      output.then(() => true),
      new Promise<false>((r) => drainTimer = setTimeout(() => r(false), opts.drainMs)),
    ]);
    clearTimeout(drainTimer);
    if (!trailing) attached.output.destroy();
    const kept = await output;
    if (outputFailure !== null) {
      throw new KitLaunchError(
        launch.attempt,
        `cannot write the output of kit ${launch.kit.name}: ${describe(outputFailure)}`,
        { cause: outputFailure },
      );
    }
    return {
      status,
      sent,
      outputLimit: limit,
      wall,
      cancelled,
      stdoutBytes: kept.stdout,
      stderrBytes: kept.stderr,
    };
  } finally {
    signal.removeEventListener("abort", onAbort);
    clearTimeout(wallTimer);
    clearTimeout(killTimer);
    attached.input?.destroy();
    attached.output.destroy();
    await input;
    await output;
  }
}

/** How the status reads, given the signals the worker sent. */
function exitOf(status: number | null, sent: ReadonlySet<StopSignal>) {
  if (status === null) return { code: null, signal: null };
  for (const sig of ["SIGKILL", "SIGINT"] as const) {
    if (sent.has(sig) && status === 128 + SIGNAL_NUMBER[sig]) return { code: null, signal: sig };
  }
  return { code: status, signal: null };
}

/** Opens the output files (new, 0600) and the spool; closes what it opened when one fails. */
async function openFiles(
  launch: KitLaunch,
): Promise<{ out: Deno.FsFile; err: Deno.FsFile; spool: Deno.FsFile | null }> {
  const opened: Deno.FsFile[] = [];
  const open = async (path: string, what: string, options: Deno.OpenOptions) => {
    try {
      const f = await Deno.open(path, options);
      opened.push(f);
      return f;
    } catch (error) {
      if (error instanceof Deno.errors.NotCapable) throw error;
      for (const f of opened) f.close();
      throw new KitLaunchError(
        launch.attempt,
        `cannot open the ${what} file ${JSON.stringify(path)}: ${describe(error)}`,
        { cause: error },
      );
    }
  };
  // FIFOs the daemon made and reads (a live `marsh run`): opened, never created.
  const create = launch.stdio === "fifos"
    ? { write: true }
    : { write: true, createNew: true, mode: 0o600 };
  const out = await open(launch.stdout, "stdout", create);
  const err = await open(launch.stderr, "stderr", create);
  const spool = launch.stdin === null ? null : await open(launch.stdin, "stdin", { read: true });
  return { out, err, spool };
}

/**
 * Runs `launch` as one Kit container and resolves once the container has
 * ended and its removal is verified. The abort signal cancels: SIGINT,
 * then SIGKILL after the grace; the result then says `cancelled`. So do
 * the kit's wall clock (`wall`) and output past `outputLimit`
 * (`outputLimit`; the bytes up to the limit are kept).
 *
 * Needs `--allow-net=unix:<socket>`, read and write on the socket,
 * unscoped `--allow-env`, write access to the output files' directory and
 * the capability dir, and read access to the spool.
 *
 * @throws {ContainerNotRemovedError} when a container of the attempt may
 *   still exist: the caller keeps the slot held
 * @throws {KitLaunchError} when the launch cannot run as given (image,
 *   mounts, argv, files, the capability's `job.json`, or the engine refused
 *   to start it); no container is left
 * @throws {EngineUnreachableError | DockerApiError} when the engine failed
 *   mid-run; the container was removed (verified)
 * @throws the signal's reason when it was aborted before a container was made
 */
export async function runKitContainer(
  api: DockerApi,
  launch: KitLaunch,
  signal: AbortSignal,
  opts: KitRunOptions = {},
): Promise<KitExit> {
  signal.throwIfAborted();
  const graceMs = opts.graceMs ?? DEFAULT_GRACE_MS;
  const removeTimeoutMs = opts.removeTimeoutMs ?? REMOVE_TIMEOUT_MS;
  if (!isWithin(launch.cwd, launch.fork)) {
    throw new KitLaunchError(launch.attempt, `the cwd ${launch.cwd} is not inside the fork`);
  }
  kitCommand(launch);
  const docker = new KitDocker(api.socket);
  const image = await docker.imageConfig(launch.kit.image);
  if (image === null) throw new KitLaunchError(launch.attempt, noImage(launch));
  const home = guestHome(launch.attempt, launch.kit.image, image);
  const planned = planMounts(launch, home);
  const path = imagePath(image.env);
  const body = containerBody(launch, { id: image.id, path }, home, graceMs, opts.owner ?? null);
  const files = await openFiles(launch);
  try {
    signal.throwIfAborted();
    if (launch.cap !== null) {
      const record = kitEnvRecord(
        launch.cap,
        image.env,
        body.Env as string[],
        Object.keys(receivedEnv(launch)),
      );
      await writeJobJson(launch, launch.cap, jobJson(launch.cap, path, record));
    }
    const { id, mounts } = await create(api, docker, launch, body, planned, removeTimeoutMs);
    let outcome: Outcome | null = null;
    let failure: unknown = null;
    try {
      opts.onContainer?.(id, mounts);
      outcome = await drive(api, docker, id, launch, files, signal, {
        graceMs,
        drainMs: opts.drainMs ?? DRAIN_MS,
      });
    } catch (error) {
      failure = error;
    }
    try {
      await removeWithAttempt(api, id, launch.attempt, removeTimeoutMs);
    } catch (error) {
      if (error instanceof ContainerNotRemovedError && failure !== null) {
        throw new ContainerNotRemovedError(error.attempt, error.containerId, error.message, {
          cause: failure,
        });
      }
      throw error;
    }
    if (failure !== null || outcome === null) throw failure;
    return {
      ...exitOf(outcome.status, outcome.sent),
      outputLimit: outcome.outputLimit,
      wall: outcome.wall,
      cancelled: outcome.cancelled,
      containerId: id,
      removed: true,
      stdoutBytes: outcome.stdoutBytes,
      stderrBytes: outcome.stderrBytes,
    };
  } finally {
    files.out.close();
    files.err.close();
    files.spool?.close();
  }
}
