/**
 * Branch launch, Kit placement: an argv branch is one Kit job in one fresh
 * container (docs/kits.md). Its cwd is the fork's copy of the caller's cwd
 * at the same absolute path inside the container; it mounts, of the
 * project, only its fork, the fork's Git metadata and the object dirs.
 * Capture starts only after the worker verified the container deleted
 * (`settled`); until then the pool slot stays taken.
 *
 * @module
 */

import type { AttemptRef } from "../model/branch_phase.ts";
import { containerOf, lostProof } from "../model/branch_phase.ts";
import type { SplitRecord } from "../journal/records.ts";
import { branchCode } from "../protocol/manifest.ts";
import type { KitCap } from "../protocol/kit_launch.ts";
import { type EnvSource, forwardedEnv } from "./job_env_forward.ts";
import { stoppedState } from "./branch_controls.ts";
import { kitSpec, openJobCap } from "./kit_job_cap.ts";
import { admitBranchJob } from "./split_launch_admit.ts";
import { OUTPUT_LIMIT } from "../model/limits.ts";
import type { LiveBranch, LiveSplit, SplitContext } from "./split_context.ts";
import { admit, newAttempt, settle } from "./split_launch.ts";
import { cancel } from "./split_lease.ts";
import { moveBranch } from "./split_moves.ts";
import { OUTPUT_LIMIT_REASON, outputSize } from "./split_settings.ts";
import { endUnlaunched, publish, releaseSlot, revoke } from "./split_settle.ts";

function exists(path: string): boolean {
  try {
    Deno.lstatSync(path);
    return true;
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return false;
    throw error;
  }
}

/** Launches an argv branch: its job's `/run/marsh`, then one container on the worker. */
export async function launchKit(
  cx: SplitContext,
  live: LiveSplit,
  split: SplitRecord,
  b: LiveBranch,
  envSource: EnvSource,
  spool: string | null,
): Promise<void> {
  const { journal, worker, log, settings, sockets } = cx.d;
  const label = b.label;
  const kit = b.kit!;
  const jobId = b.jobId!;
  if (live.cancelReason || live.stopped.has(label)) {
    return endUnlaunched(cx, live, b, "cancelled", "cancelled");
  }
  if (worker.engine === null) {
    return endUnlaunched(
      cx,
      live,
      b,
      "failed",
      `failed: no Docker engine for Kit branches: ${cx.d.engineProblem ?? "none was chosen"}`,
    );
  }
  if (b.strategy === "userns-overlay") {
    return endUnlaunched(
      cx,
      live,
      b,
      "failed",
      "failed: its fork is mounted in a namespace the Docker engine cannot see",
    );
  }
  // Its job is a member of its tree first (docs/rules.md "Admission"), then the split's pool.
  // The caller's MARSH_SPAWN and FANOUT_BRANCH: a job's are in its offer (both only narrow or label).
  const callerEnv = envSource.kind === "caller" ? envSource.env : envSource.offer.env;
  if (!(await admitBranchJob(cx, live, split, b, callerEnv))) return;
  if (!(await admit(cx, live, b))) return;
  const attempt = newAttempt(cx, live, b);
  const { dir } = attempt;
  // What the job receives (docs/rules.md, "Environment forwarding").
  const { env, dropped } = forwardedEnv(cx.d.envKey, envSource, kit.env);
  if (dropped.length > 0) {
    log.info(
      `split ${live.id}/${label}: job ${jobId}: offered variables not forwarded: ${
        dropped.map((d) => `${d.name} (${d.why})`).join(", ")
      }`,
    );
  }
  // The job's capability (docs/kits.md, "The job capability: how `/run/marsh` is made"): its socket
  // and its /run/marsh. A failed setup fails the attempt; a job never runs without one.
  const git = journal.getSplit(live.id)?.git ?? null;
  const view = {
    root: b.fork,
    admin: git === null ? null : `${split.dir}/.admin/${label}`,
    objectDirs: git?.objects ?? [],
    readOnly: [],
    branch: { split: live.id, label },
  };
  let cap: KitCap;
  try {
    const opened = await openJobCap({
      jobClient: cx.d.jobClient,
      deno: cx.d.deno,
      sockets,
      registered: () => journal.listKits().map((k) => k.name),
      envKey: cx.d.envKey,
    }, {
      dir,
      name: kit.name,
      authority: {
        kind: "job",
        job: jobId,
        attempt: attempt.id,
        split: live.id,
        label,
        session: live.session,
        fork: b.fork,
        view,
      },
    });
    b.socket = opened.socket;
    cap = opened.cap;
  } catch (error) {
    if (b.socket) sockets.close(b.socket);
    b.socket = null;
    releaseSlot(cx, live, b);
    log.info(`split ${live.id}/${label}: /run/marsh not set up: ${error}`);
    const why = error instanceof Error ? error.message : String(error);
    return endUnlaunched(cx, live, b, "failed", `failed: /run/marsh not set up: ${why}`);
  }
  const now = Date.now();
  // Journaled before the worker is asked, in one transaction (one fsync):
  // from here a container may exist.
  journal.immediate(() => {
    // A daemon record, revoked at the job's end (its socket closes with it).
    journal.createCapability({
      id: `${live.id}/${label}`,
      split: live.id,
      label,
      holder: `job:${jobId}`,
      state: "live",
      createdMs: now,
      revokedMs: null,
    });
    moveBranch(journal, live.id, label, "start", { attempt: attempt.id, startedMs: now });
    journal.updateJob(jobId, {
      state: "running",
      cleanup: "live",
      attempt: attempt.id,
      startedMs: now,
    });
  });
  b.move({ kind: "launching", attempt });
  const argv = (b.spec as { argv: readonly string[] }).argv;
  await worker.kitLaunch(
    {
      job: jobId,
      attempt: attempt.id,
      split: live.id,
      label,
      kit: kitSpec(kit, kit.wallS),
      argv,
      env,
      fork: b.fork,
      cwd: split.cwd === "" ? b.fork : `${b.fork}/${split.cwd}`,
      admin: view.admin,
      objectDirs: view.objectDirs,
      stdin: spool,
      stdout: `${dir}/stdout`,
      stderr: `${dir}/stderr`,
      outputLimit: OUTPUT_LIMIT,
      // The forks' owner: the fork is writable and what the job writes is ours.
      user: `${Deno.uid()}:${Deno.gid()}`,
      cap,
    },
    settings.graceMs,
    {
      launched: (container) => {
        b.move({ kind: "running", attempt, container });
        if (live.stopped.has(label)) void worker.cancel(attempt.id, settings.graceMs);
        journal.updateJob(jobId, { container });
        log.info(
          `split ${live.id}/${label}: job ${jobId} (kit ${kit.name}) container ${container}`,
        );
      },
      exited: (code, signal, wall) => {
        const p = b.phase;
        b.move({
          kind: "exited",
          attempt,
          container: containerOf(p),
          exit: { code, signal },
          wall,
          started: p.kind === "running",
        });
        log.info(
          `split ${live.id}/${label}: job ${jobId} exited (${signal ?? `code ${code}`})`,
        );
        // Its end is now, not once its deletion is verified: what it started goes at once.
        cx.tree.cancel(
          { kind: "branch", split: live.id, label },
          `its creator (job ${jobId}, ${live.id}/${label}) ended`,
          { below: true },
        );
      },
      settled: () => settle(cx, live, b, attempt),
      outputLimit: () => cancel(cx, live.id, OUTPUT_LIMIT_REASON),
      error: (message) => {
        kitFailed(cx, live, b, attempt, message).catch((error) => {
          log.info(`split ${live.id}/${label}: failure not recorded: ${error?.stack ?? error}`);
          b.settled.resolve();
        });
      },
      unreaped: (container, message) => kitUnreaped(cx, live, b, container, message),
    },
  );
}

/**
 * A Kit attempt ended without running to an exit, and nothing of it is
 * left (protocol/worker.ts): the branch failed (or was cancelled before
 * its container started) and its slot frees.
 */
async function kitFailed(
  cx: SplitContext,
  live: LiveSplit,
  b: LiveBranch,
  attempt: AttemptRef,
  message: string,
): Promise<void> {
  const { journal, log } = cx.d;
  const label = b.label;
  const dir = attempt.dir;
  log.info(`split ${live.id}/${label}: kit ${b.kit?.name}: ${message}`);
  const was = b.phase;
  const container = containerOf(was);
  const outputBytes = outputSize(dir);
  b.move({
    kind: "settling",
    attempt,
    container,
    exit: was.kind === "exited" ? was.exit : null,
    wall: was.kind === "exited" && was.wall,
    outputBytes,
  });
  revoke(cx, live, b);
  const stop = live.stopped.get(label) ?? (live.cancelReason !== null ? "cancelled" : undefined);
  const state = stop !== undefined ? stoppedState(stop) : "failed";
  const status = stop ?? `failed: ${message}`;
  const code = branchCode(status) ?? 125;
  const outputs = ["stdout", "stderr"].every((n) => exists(`${dir}/${n}`))
    ? { stdout: `${dir}/stdout`, stderr: `${dir}/stderr` }
    : null;
  const published = await publish(cx, live, label, status, outputs);
  if (published.ok) {
    await Deno.remove(dir, { recursive: true }).catch((error) =>
      log.info(`split ${live.id}/${label}: ${dir} not removed: ${error}`)
    );
  }
  const now = Date.now();
  journal.immediate(() => {
    moveBranch(journal, live.id, label, state === "cancelled" ? "stop" : "fail", {
      status,
      code,
      finishedMs: now,
    });
    journal.updateJob(b.jobId!, {
      state,
      cleanup: container === null ? "none" : "removed",
      status,
      code,
      finishedMs: now,
    });
  });
  b.move({ kind: "ended", state, attempt, end: "settled", outputBytes });
  releaseSlot(cx, live, b);
  b.settled.resolve();
}

/**
 * A container of a Kit attempt may still exist: the branch is uncertain,
 * its fork untrusted and never captured, and its pool slot stays held
 * until `marsh workers reset KIT` verifies the deletion (docs/kits.md).
 */
function kitUnreaped(
  cx: SplitContext,
  live: LiveSplit,
  b: LiveBranch,
  container: string | null,
  message: string,
): void {
  const { journal, log } = cx.d;
  const label = b.label;
  const kit = b.kit!.name;
  const status = `failed: ${message}; its slot is held until: marsh workers reset ${kit}`;
  log.info(`split ${live.id}/${label}: job ${b.jobId}: ${status}`);
  revoke(cx, live, b);
  const now = Date.now();
  moveBranch(journal, live.id, label, "lose", {
    trust: "untrusted",
    status,
    code: 125,
    finishedMs: now,
  });
  const was = b.phase;
  b.move({
    kind: "ended",
    state: "uncertain",
    attempt: was.kind === "queued" ? null : was.attempt,
    end: lostProof(was),
    outputBytes: null,
  });
  journal.updateJob(b.jobId!, {
    state: "uncertain",
    cleanup: "uncertain",
    ...(container !== null ? { container } : {}),
    status,
    code: 125,
    finishedMs: now,
  });
  // b.slot stays true: the slot is released by `marsh workers reset`, not here.
  b.settled.resolve();
}
