/**
 * Branch launch, shared part and shell placement: admission to the pool, a
 * fresh attempt, and a shell branch's launch on the worker with its events
 * (docs/engine.md, "Processes"). The Kit placement is `split_launch_kit.ts`.
 *
 * @module
 */

import type { AttemptRef } from "../model/branch_phase.ts";
import { lostProof, started } from "../model/branch_phase.ts";
import type { SplitRecord } from "../journal/records.ts";
import { ATTEMPTS_DIR } from "../protocol/control_dir.ts";
import { timeLimitStatus } from "./branch_controls.ts";
import { withBranchLinks } from "./branch_links.ts";
import { heldByUncertainJobs } from "./jobs.ts";
import { OUTPUT_LIMIT } from "../model/limits.ts";
import { shellPlace } from "./shell_view.ts";
import { type LiveBranch, type LiveSplit, newId, type SplitContext } from "./split_context.ts";
import { cancel, stopBranch } from "./split_lease.ts";
import { moveBranch } from "./split_moves.ts";
import { OUTPUT_LIMIT_REASON } from "./split_settings.ts";
import { endUnlaunched, releaseSlot, revoke, settled } from "./split_settle.ts";

/**
 * Takes a pool slot for `b`; when the pool is full, the branch fails with
 * `failed: capacity` and the creator hears which Kits hold slots.
 */
export async function admit(cx: SplitContext, live: LiveSplit, b: LiveBranch): Promise<boolean> {
  const { pool, journal } = cx.d;
  const label = b.label;
  if (pool.admit(live.session, `${live.id}/${label}`)) {
    b.slot = true;
    return true;
  }
  const held = heldByUncertainJobs(journal, live.session);
  if (held !== "" && live.creatorConn && !live.creatorConn.isClosed) {
    await live.creatorConn.send({
      v: 1,
      t: "notice",
      message: `marsh split: branch ${label}: failed: capacity: ${pool.size} branches (${held})`,
    });
  }
  await endUnlaunched(cx, live, b, "failed", "failed: capacity");
  return false;
}

/** A fresh attempt of an admitted branch: its id and its directory in the control dir. */
export function newAttempt(cx: SplitContext, live: LiveSplit, b: LiveBranch): AttemptRef {
  const id = `${live.id}-${b.label}-${newId().slice(0, 4)}`;
  const dir = `${cx.d.home}/${ATTEMPTS_DIR}/${id}`;
  Deno.mkdirSync(dir, { recursive: true, mode: 0o700 });
  const attempt = { id, dir };
  b.move({ kind: "admitted", attempt });
  return attempt;
}

/**
 * Settles `b` on the worker's `settled` event; a settlement that throws is
 * logged and the branch still counts as ended, so the split can end.
 */
export function settle(cx: SplitContext, live: LiveSplit, b: LiveBranch, attempt: AttemptRef) {
  settled(cx, live, b, attempt).catch((error) => {
    cx.d.log.info(`split ${live.id}/${b.label}: settle failed: ${error?.stack ?? error}`);
    b.settled.resolve();
  });
}

/** Launches a shell branch on the worker, in the view `daemon/shell_view.ts` chose. */
export async function launchShell(
  cx: SplitContext,
  live: LiveSplit,
  split: SplitRecord,
  b: LiveBranch,
  env: Record<string, string>,
  spool: string | null,
): Promise<void> {
  const { journal, worker, sockets, home, splitfs } = cx.d;
  const label = b.label;
  if (live.cancelReason || live.stopped.has(label)) {
    return endUnlaunched(cx, live, b, "cancelled", "cancelled");
  }
  // A userns-overlay fork is mounted in the service's namespace only: the
  // branch joins it there, or its cwd would be the bare mount point. An
  // unprivileged daemon's view is made there too (docs/engine.md, "Containment").
  const shellView = cx.d.shellView;
  const namespace = b.strategy === "userns-overlay" || shellView.view === "project"
    ? splitfs.namespace
    : null;
  if (b.strategy === "userns-overlay" && namespace === null) {
    return endUnlaunched(
      cx,
      live,
      b,
      "failed",
      "failed: its fork is mounted in a namespace the split-filesystem service does not have",
    );
  }
  if (!(await admit(cx, live, b))) return;
  const attempt = newAttempt(cx, live, b);
  const { dir } = attempt;
  b.socket = sockets.open({
    kind: "branch",
    split: live.id,
    label,
    session: `${live.id}/${label}`,
  });
  journal.createCapability({
    id: `${live.id}/${label}`,
    split: live.id,
    label,
    holder: `session:${live.id}/${label}`,
    state: "live",
    createdMs: Date.now(),
    revokedMs: null,
  });
  moveBranch(journal, live.id, label, "start", {
    attempt: attempt.id,
    startedMs: Date.now(),
    view: shellView.view,
    viewReason: shellView.reason,
  });
  b.move({ kind: "launching", attempt });
  cx.control ??= Deno.realPathSync(home);
  const place = shellPlace(
    shellView,
    split,
    journal.getSplit(live.id)?.git ?? null,
    label,
    cx.control,
  );
  await worker.launch({
    attempt: attempt.id,
    script: (b.spec as { script: string }).script,
    ...place,
    // Registered names run as Kit jobs of this branch (docs/rules.md "Links").
    env: withBranchLinks(dir, journal.listKits().map((k) => k.name), cx.d.deno, env),
    socket: b.socket,
    stdin: spool,
    stdout: `${dir}/stdout`,
    stderr: `${dir}/stderr`,
    outputLimit: OUTPUT_LIMIT,
    ...(namespace ? { namespace: { pid: namespace.pid } } : {}),
  }, {
    launched: (_pid, mechanism) => {
      b.move({ kind: "running", attempt, container: null });
      journal.updateBranch(live.id, label, { mechanism });
      // Stopped while it was being launched: the cancel could not be sent before.
      if (live.stopped.has(label)) void worker.cancel(attempt.id, cx.d.settings.graceMs);
      const limit = b.spec.kind === "shell" ? b.spec.timeLimitS : undefined;
      if (limit === undefined) return;
      cx.controls.startLimit(live.id, label, limit, () => {
        stopBranch(cx, live, label, timeLimitStatus(limit));
      });
    },
    exited: (code, signal) => {
      const p = b.phase;
      b.move({
        kind: "exited",
        attempt,
        container: null,
        exit: { code, signal },
        wall: false,
        started: started(p),
      });
    },
    lingering: (ev) => cx.controls.lingering(live.id, label, ev),
    settled: () => settle(cx, live, b, attempt),
    outputLimit: () => cancel(cx, live.id, OUTPUT_LIMIT_REASON),
    error: (message) => attemptLost(cx, live, b, message),
  });
}

/**
 * The worker gave up on an attempt. Before `launched` nothing ran: the
 * branch failed and its slot frees. After it, processes may still live: the
 * branch is uncertain, its fork untrusted, its slot held until reset.
 */
function attemptLost(cx: SplitContext, live: LiveSplit, b: LiveBranch, message: string) {
  const { journal, log } = cx.d;
  const label = b.label;
  log.info(`split ${live.id}/${label}: worker: ${message}`);
  cx.controls.ended(live.id, label);
  revoke(cx, live, b);
  const was = b.phase;
  const attempt = was.kind === "queued" ? null : was.attempt;
  const end = { attempt, end: lostProof(was), outputBytes: null } as const;
  if (started(was)) {
    moveBranch(journal, live.id, label, "lose", {
      trust: "untrusted",
      status: `failed: ${message}`,
      code: 125,
      finishedMs: Date.now(),
    });
    b.move({ kind: "ended", state: "uncertain", ...end });
  } else {
    moveBranch(journal, live.id, label, "fail", {
      status: `failed: ${message}`,
      code: 125,
      finishedMs: Date.now(),
    });
    b.move({ kind: "ended", state: "failed", ...end });
    releaseSlot(cx, live, b);
  }
  b.settled.resolve();
}
