/**
 * `marsh compare --test CMD` (docs/resolution.md, "Comparing branches"):
 * `bash -c CMD` in a throwaway fork of each captured branch's result, all
 * at once, each holding a slot of the split's pool (waiting for one when the
 * pool is full), contained as a shell branch is (the worker's launch: the
 * same view, environment filter and output files). The service makes the
 * fork (`compare-fork`), keeps the output in `out/<label>/compare/`
 * (`compare-out`) and removes the fork, its unmount verified
 * (`compare-drop`); the branch's own fork and patch are never written.
 *
 * @module
 */

import type { SplitRecord } from "../journal/records.ts";
import { OUTPUT_LIMIT } from "../model/limits.ts";
import { ATTEMPTS_DIR } from "../protocol/control_dir.ts";
import type { CompareTest } from "../protocol/daemon_compare.ts";
import type { CompareForkedReply } from "../protocol/splitfs_compare.ts";
import { SplitfsError } from "../protocol/splitfs_client.ts";
import { removeAttemptDir } from "./attempts.ts";
import { exitCodeOf } from "../model/exit_code.ts";
import { timeLimitStatus } from "./branch_controls.ts";
import { shellPlace } from "./shell_view.ts";
import { newId, type SplitContext } from "./split_context.ts";

/** What to run, and for how long at most. */
export interface TestSpec {
  readonly script: string;
  readonly timeoutS: number;
  /** The caller's environment (the worker filters it as a branch's). */
  readonly env: Readonly<Record<string, string>>;
  /** Aborts every run: Ctrl-C at the CLI, or its connection dropped. */
  readonly signal: AbortSignal;
  /** Tells the caller a line (a test waiting for a slot). */
  readonly notice: (message: string) => void;
}

const COMPARE_PREFIX = ".compare-";

function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * Runs the test in a throwaway fork of each of `labels` (captured branches
 * of the open split `s`), in parallel, and answers in the same order.
 * Never throws: a run that could not happen says why in its status.
 */
export function runTests(
  cx: SplitContext,
  s: SplitRecord,
  labels: readonly string[],
  spec: TestSpec,
): Promise<CompareTest[]> {
  return Promise.all(labels.map((label) => runOne(cx, s, label, spec)));
}

async function runOne(
  cx: SplitContext,
  s: SplitRecord,
  label: string,
  spec: TestSpec,
): Promise<CompareTest> {
  const { pool, splitfs, log } = cx.d;
  const holder = `compare:${s.id}/${label}`;
  const t0 = performance.now();
  const ms = () => Math.round(performance.now() - t0);
  if (pool.inUse(s.session) >= pool.size) {
    spec.notice(
      `marsh compare: the test of ${label} waits for a slot (${pool.size} branches and tests of yours are running)`,
    );
  }
  if (!(await pool.wait(s.session, holder, spec.signal))) {
    return { exit: null, ms: 0, status: "cancelled" };
  }
  let forked: CompareForkedReply | null = null;
  let dir: string | null = null;
  let result: CompareTest;
  try {
    forked = await splitfs.request<CompareForkedReply>({
      v: 1,
      t: "compare-fork",
      id: s.id,
      label,
    });
    const attempt = `${s.id}-${label}-cmp${newId().slice(0, 4)}`;
    dir = `${cx.d.home}/${ATTEMPTS_DIR}/${attempt}`;
    Deno.mkdirSync(dir, { recursive: true, mode: 0o700 });
    // Ctrl-C while the fork was being made: nothing is launched.
    if (spec.signal.aborted) {
      result = { exit: null, ms: 0, status: "cancelled" };
    } else {
      const started = performance.now();
      result = await launch(cx, s, label, forked, attempt, dir, spec);
      result = { ...result, ms: Math.round(performance.now() - started) };
      result = await keepOutput(cx, s, label, dir, result);
    }
  } catch (error) {
    const why = error instanceof SplitfsError ? error.message : errorText(error);
    log.info(`compare ${s.id}/${label}: test: ${why}`);
    result = { exit: null, ms: ms(), status: `failed: ${why}` };
  }
  let freed = true;
  if (forked !== null) {
    try {
      await splitfs.request({ v: 1, t: "compare-drop", id: s.id, label });
    } catch (error) {
      // Still in use: the slot stays held, as a branch's whose end is unknown.
      freed = false;
      log.info(`compare ${s.id}/${label}: throwaway fork not removed: ${errorText(error)}`);
      result = {
        ...result,
        status: `${result.status}; its fork ${forked.path} was not removed: ${errorText(error)}`,
      };
    }
  }
  if (dir !== null) removeAttemptDir(dir, log, `compare ${s.id}/${label}`);
  if (freed) pool.release(s.session, holder);
  return result;
}

/**
 * Has the service copy the test's output files into `out/<label>/compare/`.
 * A launch that failed before the worker made them has none: nothing to keep.
 */
async function keepOutput(
  cx: SplitContext,
  s: SplitRecord,
  label: string,
  dir: string,
  result: CompareTest,
): Promise<CompareTest> {
  const stdout = `${dir}/stdout`, stderr = `${dir}/stderr`;
  if (!exists(stdout) || !exists(stderr)) return result;
  try {
    await cx.d.splitfs.request({ v: 1, t: "compare-out", id: s.id, label, stdout, stderr });
    return result;
  } catch (error) {
    cx.d.log.info(`compare ${s.id}/${label}: output not kept: ${errorText(error)}`);
    return { ...result, status: `${result.status}; its output was not kept: ${errorText(error)}` };
  }
}

function exists(path: string): boolean {
  try {
    Deno.statSync(path);
    return true;
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return false;
    throw error;
  }
}

/** Launches the test on the worker and waits until every process of it is gone. */
function launch(
  cx: SplitContext,
  s: SplitRecord,
  label: string,
  forked: CompareForkedReply,
  attempt: string,
  dir: string,
  spec: TestSpec,
): Promise<CompareTest> {
  const { worker, splitfs, shellView, settings } = cx.d;
  const namespace = forked.strategy === "userns-overlay" || shellView.view === "project"
    ? splitfs.namespace
    : null;
  if (forked.strategy === "userns-overlay" && namespace === null) {
    throw new Error(
      "its fork is mounted in a namespace the split-filesystem service does not have",
    );
  }
  cx.control ??= Deno.realPathSync(cx.d.home);
  const place = shellPlace(shellView, s, s.git, `${COMPARE_PREFIX}${label}`, cx.control);
  const done = Promise.withResolvers<CompareTest>();
  let stopped: string | null = null;
  let exit: number | null = null;
  let launched = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const stop = (status: string) => {
    if (stopped !== null) return;
    stopped = status;
    if (launched) void worker.cancel(attempt, settings.graceMs);
  };
  const onAbort = () => stop("cancelled");
  spec.signal.addEventListener("abort", onAbort, { once: true });
  const end = (r: CompareTest) => {
    clearTimeout(timer);
    spec.signal.removeEventListener("abort", onAbort);
    done.resolve(r);
  };
  worker.launch({
    attempt,
    script: spec.script,
    ...place,
    env: spec.env,
    stdin: null,
    stdout: `${dir}/stdout`,
    stderr: `${dir}/stderr`,
    outputLimit: OUTPUT_LIMIT,
    ...(namespace ? { namespace: { pid: namespace.pid } } : {}),
  }, {
    launched: () => {
      launched = true;
      // Aborted while it was being launched: the cancel could not be sent before.
      if (stopped !== null) void worker.cancel(attempt, settings.graceMs);
      timer = setTimeout(() => stop(timeLimitStatus(spec.timeoutS)), spec.timeoutS * 1000);
    },
    exited: (code, signal) => {
      exit = exitCodeOf(code, signal);
    },
    settled: () => {
      end(
        stopped !== null
          ? { exit: null, ms: 0, status: stopped }
          : { exit, ms: 0, status: `exited ${exit}` },
      );
    },
    outputLimit: () => stop(`failed: output limit of ${OUTPUT_LIMIT} bytes reached`),
    error: (message) => end({ exit: null, ms: 0, status: `failed: ${message}` }),
  }).catch((error) => end({ exit: null, ms: 0, status: `failed: ${errorText(error)}` }));
  return done.promise;
}
