/**
 * Creation: a `marsh split` request validated, the split and every branch
 * (and an argv branch's job) journaled before anything runs, the spool
 * received, the snapshot and the forks made, every branch launched, and the
 * split settled (docs/guide.md, "Life of a split").
 *
 * @module
 */

import { Buffer } from "node:buffer";
import type { KitRecord } from "../model/kit_rules.ts";
import type { BranchRecord, SplitRecord } from "../journal/records.ts";
import { labelProblem } from "../model/layout.ts";
import { shellBranchRefusal } from "../model/shell_branch.ts";
import { SPOOL_DIR } from "../protocol/control_dir.ts";
import type { SplitCreateRequest } from "../protocol/daemon.ts";
import { isWithin } from "../protocol/kit_launch.ts";
import type { CreatedReply, ForkedReply, LocatedReply } from "../protocol/splitfs.ts";
import { SplitfsError } from "../protocol/splitfs_client.ts";
import { filterEnv } from "../model/env_filter.ts";
import { timeLimitProblem } from "./branch_controls.ts";
import type { Authority } from "./conn.ts";
import { creatorOf } from "./creator.ts";
import { checkArgvBranches } from "./kit_names.ts";
import { MAX_BRANCHES, MAX_DEPTH, SPOOL_LIMIT } from "../model/limits.ts";
import { RequestError } from "./request_error.ts";
import { branchCwd } from "./shell_view.ts";
import {
  LiveBranch,
  LiveSplit,
  newId,
  type SplitConn,
  type SplitContext,
} from "./split_context.ts";
import { launchShell } from "./split_launch.ts";
import { launchKit } from "./split_launch_kit.ts";
import { envSourceOf } from "./job_env_forward.ts";
import { cancel, checkOutput } from "./split_lease.ts";
import { OUTPUT_POLL_MS } from "./split_settings.ts";
import { finishAwait, finishCancelled, setupFailed } from "./split_settle.ts";

// A job or a split branch splits with argv branches only (docs/guide.md, "What a shell branch sees").
export { shellBranchRefusal };

/** Validates a create request; throws {@linkcode RequestError} with status 2. */
function validate(cx: SplitContext, req: SplitCreateRequest, auth: Authority): void {
  if (req.branches.length === 0) throw new RequestError(2, "a split needs at least one branch");
  if (req.branches.length > MAX_BRANCHES) {
    throw new RequestError(
      2,
      `too many branches: ${req.branches.length} (at most ${MAX_BRANCHES} per split)`,
    );
  }
  const seen = new Set<string>();
  for (const b of req.branches) {
    const problem = labelProblem(b.label);
    if (problem) throw new RequestError(2, problem);
    if (seen.has(b.label)) throw new RequestError(2, `duplicate label "${b.label}"`);
    seen.add(b.label);
    const limit = timeLimitProblem(b);
    if (limit) throw new RequestError(2, limit);
  }
  if (auth.kind === "branch" || auth.kind === "job") {
    const shell = req.branches.find((b) => b.kind === "shell");
    if (shell) throw new RequestError(2, shellBranchRefusal(shell.label));
  }
  const source = sourceOf(auth);
  if (source !== null) {
    const parent = cx.d.journal.getSplit(source.split);
    if ((parent?.depth ?? 1) + 1 > MAX_DEPTH) {
      throw new RequestError(2, `depth limit ${MAX_DEPTH} reached`);
    }
  }
  if (auth.kind === "job" && !isWithin(req.cwd, auth.fork)) {
    // The job's view root (its fork, or a host run's project): a split of anything else is not its to make.
    throw new RequestError(
      2,
      `a job splits its own view: run marsh split in ${auth.fork} or below (not ${req.cwd})`,
    );
  }
  const unknown = checkArgvBranches(req.branches, cx.d.journal);
  if (unknown !== null) throw new RequestError(2, unknown);
}

/**
 * The branch whose fork a caller's split is taken of, and which the split
 * records as its parent (docs/rules.md "Nested splits"): a shell branch's
 * or a branch job's own; a `marsh run` job's view's (the branch it runs
 * from, or its parent job's); null for the project (the host, and a host
 * `marsh run` job and its children, which see the project itself).
 */
export function sourceOf(auth: Authority): { split: string; label: string } | null {
  if (auth.kind === "host") return null;
  // A run job belongs to no split (its record's split is ""): its view says what it sees.
  if (auth.kind === "job" && auth.split === "") return auth.view?.branch ?? null;
  return { split: auth.split, label: auth.label };
}

/**
 * Whether the caller may still make a split: a branch's or a branch job's
 * branch capability, a run job's own capability, is live (docs/rules.md
 * "Budgets and capabilities"); the host always may.
 */
function callerLive(cx: SplitContext, auth: Authority): boolean {
  if (auth.kind === "host") return true;
  if (auth.kind === "job" && auth.split === "") {
    return cx.d.journal.jobTree.lineage(auth.job)?.cap === "live";
  }
  return cx.d.journal.getCapability(`${auth.split}/${auth.label}`)?.state === "live";
}

/**
 * The registration of every argv branch's Kit, resolved once at create:
 * a later `kits rm` or `--replace` does not change a running split.
 */
function resolveKits(cx: SplitContext, req: SplitCreateRequest): Map<string, KitRecord> {
  const kits = new Map<string, KitRecord>();
  for (const b of req.branches) {
    if (b.kind !== "argv" || kits.has(b.argv[0]!)) continue;
    const kit = cx.d.journal.getKit(b.argv[0]!);
    if (kit === null) {
      // Removed since the check: refuse the same way.
      throw new RequestError(2, checkArgvBranches([b], cx.d.journal) ?? `unknown Kit command`);
    }
    kits.set(kit.name, kit);
  }
  return kits;
}

/** Where a branch's CLI is, as the split-filesystem service sees it (`branchCwd`). */
function callerCwd(cx: SplitContext, auth: Authority, cwd: string): string {
  if (auth.kind !== "branch") return cwd;
  const branch = cx.d.journal.getBranch(auth.split, auth.label);
  const parent = cx.d.journal.getSplit(auth.split);
  return branch && parent ? branchCwd(cwd, branch, parent.root) : cwd;
}

/** The records of a new split, every branch and every argv branch's job, all before anything runs. */
function record(
  cx: SplitContext,
  req: SplitCreateRequest,
  auth: Authority,
  id: string,
  located: LocatedReply,
): { split: SplitRecord; session: string; jobIds: Map<string, string> } {
  const { journal } = cx.d;
  const session = auth.kind === "host" ? "host" : auth.session;
  const source = sourceOf(auth);
  const parentSplit = source !== null ? journal.getSplit(source.split) : null;
  const now = Date.now();
  const split: SplitRecord = {
    id,
    creator: creatorOf(auth),
    session,
    parent: source,
    depth: parentSplit ? parentSplit.depth + 1 : 1,
    root: located.root,
    dir: `${located.root}/.marsh/split/${id}`,
    cwd: located.cwd,
    cap: `${id}/cap`,
    state: "run",
    status: null,
    reason: null,
    identity: null,
    git: null,
    createdMs: now,
    finishedMs: null,
    timing: {},
    withIgnored: req.withIgnored,
    rootId: null,
  };
  // Every requested branch is on record before anything runs: a restart
  // reports the ones that never started as cancelled. An argv branch's job
  // gets its id now and its record at its admission (`split_launch_admit.ts`).
  const jobIds = new Map<string, string>();
  for (const b of req.branches) if (b.kind === "argv") jobIds.set(b.label, newId());
  const branchRecords = req.branches.map((b, index): BranchRecord => ({
    split: id,
    label: b.label,
    index,
    kind: b.kind,
    placement: b.kind === "shell" ? "shell-vm" : `kit:${b.argv[0]}`,
    run: b.kind === "shell" ? b.script : b.argv,
    state: "pending",
    status: null,
    code: null,
    jobId: jobIds.get(b.label) ?? null,
    files: 0,
    trust: null,
    fork: `${split.dir}/${b.label}`,
    forkIdentity: null,
    forkStrategy: null,
    attempt: null,
    startedMs: null,
    finishedMs: null,
    result: null,
    mechanism: null,
    view: null,
    viewReason: null,
    discard: null,
  }));
  // One transaction, one fsync: nothing happens between these records.
  journal.immediate(() => {
    journal.createSplit(split);
    journal.createCapability({
      id: split.cap,
      split: id,
      label: null,
      holder: auth.kind === "host"
        ? "host"
        : auth.kind === "job"
        ? `job:${auth.job}`
        : `session:${auth.session}`,
      state: "live",
      createdMs: now,
      revokedMs: null,
    });
    journal.addBranches(id, branchRecords);
  });
  return { split, session, jobIds };
}

/** `marsh split`: runs a split over the creator's connection. */
export async function create(
  cx: SplitContext,
  conn: SplitConn,
  req: SplitCreateRequest,
): Promise<void> {
  const { journal, splitfs, log } = cx.d;
  if (cx.stopping) throw new RequestError(2, "the daemon is stopping");
  validate(cx, req, conn.authority);
  const kits = resolveKits(cx, req);
  // A branch's or a job's split is taken of its own view (docs/guide.md, "Life of a split").
  const source = sourceOf(conn.authority);
  // A branch with the project view reports its cwd under the project root.
  const cwd = callerCwd(cx, conn.authority, req.cwd);
  let located: LocatedReply;
  try {
    located = await splitfs.request<LocatedReply>({
      v: 1,
      t: "locate",
      cwd,
      ...(source ? { parent: source } : {}),
    });
  } catch (error) {
    throw new RequestError(2, error instanceof SplitfsError ? error.message : String(error));
  }
  const id = newId();
  const auth = conn.authority;
  // The creator may have ended while the project was located: a branch's or
  // a job's split is recorded only under a live capability (docs/kits.md).
  if (!callerLive(cx, auth)) {
    throw new RequestError(
      125,
      "the capability of this caller was revoked: its branch or job ended",
    );
  }
  const { split, session, jobIds } = record(cx, req, auth, id, located);
  const live = new LiveSplit(id, session, { kind: "running" });
  cx.live.set(id, live);
  // A run job's end, and so its creator branch's capture, waits for this (docs/rules.md "Running
  // a registered command as a job"): whatever way it returns, nothing of it runs any more.
  try {
    live.creatorConn = conn;
    log.info(`split ${id}: created in ${located.root} (${req.branches.length} branches)`);
    await conn.send({ v: 1, t: "split.accepted", id });
    live.deadlineTimer = setTimeout(
      () => cancel(cx, id, `deadline of ${Math.round(cx.d.settings.deadlineMs / 1000)} s reached`),
      cx.d.settings.deadlineMs,
    );

    // The spool is read to EOF before the snapshot.
    const spool = req.spool ? await receiveSpool(cx, conn, live) : null;
    if (spool === undefined || live.cancelReason) {
      return await finishCancelled(cx, live, spool ?? null);
    }
    watchCreator(cx, conn, live);

    await cx.pause("before-snapshot");
    let created: CreatedReply;
    try {
      created = await splitfs.request<CreatedReply>(
        {
          v: 1,
          t: "create",
          id,
          cwd,
          env: { HOME: req.env.HOME, XDG_CONFIG_HOME: req.env.XDG_CONFIG_HOME },
          withIgnored: req.withIgnored,
          // A fork mounted in the service's own namespace is invisible to the
          // engine: a split with argv branches takes copies there.
          forks: splitfs.namespace !== null && kits.size > 0 ? "copy" : cx.d.settings.forks,
          ...(source ? { parent: source } : {}),
        },
        undefined,
        (p) => {
          void conn.send({
            v: 1,
            t: "notice",
            progress: true,
            message: `snapshot: ${p.files} files, ${(p.bytes / 1048576).toFixed(1)} MiB`,
          });
        },
      );
    } catch (error) {
      return await setupFailed(cx, live, spool, error, false);
    }
    live.open = true;
    if (created.root !== located.root) {
      // The tree moved between locate and snapshot: the journaled root is wrong.
      return await setupFailed(
        cx,
        live,
        spool,
        new Error(`the project root changed while splitting: ${located.root} -> ${created.root}`),
        true,
      );
    }
    live.timing.snapshot = created.snapshot.ms;
    if (created.snapshot.untrusted) {
      // A layer changed after its seal is never a base again (docs/engine.md).
      const message = `marsh split: ${created.snapshot.untrusted}; ` +
        "it was not used: this split's base is a fresh copy of the tree";
      log.info(`split ${id}: ${message}`);
      void conn.send({ v: 1, t: "notice", message });
    }
    journal.updateSplit(id, {
      identity: created.identity,
      git: created.git,
      timing: { ...live.timing },
      rootId: created.snapshot.rootId,
    });
    await cx.pause("after-snapshot");

    const t0 = performance.now();
    for (const [index, spec] of req.branches.entries()) {
      if (live.cancelReason) break;
      let f: ForkedReply;
      try {
        f = await splitfs.request<ForkedReply>(
          { v: 1, t: "fork", id, label: spec.label },
          undefined,
          (p) => {
            void conn.send({
              v: 1,
              t: "notice",
              progress: true,
              message: `fork ${spec.label}: ${p.files} files, ${
                (p.bytes / 1048576).toFixed(1)
              } MiB`,
            });
          },
        );
        // The last fork's record carries the forks' time: one commit (one fsync), not two.
        const last = index === req.branches.length - 1;
        if (last) live.timing.forks = Math.round(performance.now() - t0);
        journal.immediate(() => {
          journal.updateBranch(id, spec.label, {
            forkIdentity: f.identity,
            forkStrategy: f.strategy,
          });
          if (last) journal.updateSplit(id, { timing: { ...live.timing } });
        });
      } catch (error) {
        return await setupFailed(cx, live, spool, error, true);
      }
      live.branches.set(
        spec.label,
        new LiveBranch(
          spec,
          index,
          `${split.dir}/${spec.label}`,
          f.strategy,
          spec.kind === "argv" ? kits.get(spec.argv[0]!) ?? null : null,
          jobIds.get(spec.label) ?? null,
        ),
      );
    }
    if (live.timing.forks === undefined) {
      // Cancelled before the last fork.
      live.timing.forks = Math.round(performance.now() - t0);
      journal.updateSplit(id, { timing: { ...live.timing } });
    }

    const runStart = performance.now();
    const env = filterEnv(req.env);
    // A job's variables are its offer (docs/rules.md, "Environment forwarding").
    const jobEnv = envSourceOf(auth.kind === "job", req.env, req.envDigests);
    live.outputTimer = setInterval(() => checkOutput(cx, live), OUTPUT_POLL_MS);
    for (const b of live.branches.values()) {
      if (b.spec.kind === "argv") await launchKit(cx, live, split, b, jobEnv, spool);
      else await launchShell(cx, live, split, b, env, spool);
    }
    await cx.pause("mid-run");
    await Promise.all([...live.branches.values()].map((b) => b.settled.promise));
    live.timing.run = Math.round(performance.now() - runStart);
    await cx.pause("after-capture");
    if (live.cancelReason) return await finishCancelled(cx, live, spool);
    await finishAwait(cx, live, spool);
  } finally {
    live.quiet.resolve();
  }
}

/**
 * Reads the spool (the creator's stdin) to its end into the control dir.
 * Returns its path, or undefined when the split was cancelled meanwhile
 * (the stream dropped, a cancel, the spool limit).
 */
async function receiveSpool(
  cx: SplitContext,
  conn: SplitConn,
  live: LiveSplit,
): Promise<string | undefined> {
  Deno.mkdirSync(`${cx.d.home}/${SPOOL_DIR}`, { recursive: true, mode: 0o700 });
  const path = `${cx.d.home}/${SPOOL_DIR}/${live.id}`;
  using file = Deno.openSync(path, { write: true, createNew: true, mode: 0o600 });
  let size = 0;
  let reason: string;
  for (;;) {
    const frame = await conn.next();
    if (frame === null) {
      reason = "the creator's stream was dropped";
      break;
    }
    if (frame.t === "split.cancel") {
      reason = "cancelled by the creator";
      break;
    }
    if (frame.t === "spool.end") return path;
    if (frame.t !== "spool") continue;
    const bytes = Buffer.from(frame.data, "base64");
    size += bytes.length;
    if (size > SPOOL_LIMIT) {
      reason = "spool limit of 64 MiB exceeded";
      break;
    }
    file.writeSync(bytes);
  }
  // The first reason wins: a cancel may have come in while the spool was read.
  if (!live.cancelReason) live.move({ kind: "cancelling", reason });
  // No branch will read a cancelled spool: it must not stay in the control dir.
  Deno.removeSync(path);
  return undefined;
}

/**
 * Reads the create stream after the spool: `split.cancel` (Ctrl-C) cancels
 * the split, and so does a dropped stream while it runs. Its end also
 * starts the lease of a split that finished (see `finishAwait`).
 */
function watchCreator(cx: SplitContext, conn: SplitConn, live: LiveSplit): void {
  void (async () => {
    for (;;) {
      const frame = await conn.next();
      if (frame === null) {
        cancel(cx, live.id, "the creator's stream was dropped");
        return;
      }
      if (frame.t === "split.cancel") cancel(cx, live.id, "cancelled by the creator");
    }
  })();
}
