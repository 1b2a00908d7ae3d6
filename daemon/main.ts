/**
 * `marshd`: the daemon. Owns the journal, the split state machine, the branch
 * pool and the capabilities; starts the split-filesystem service (the only
 * process with FFI) and the worker (which runs branches), and serves callers
 * on the host socket and on per-branch sockets.
 *
 * Run in the foreground with `deno task daemon`; the CLI starts it detached
 * when none answers. Flags: the `daemon` entrypoint of protocol/entrypoints.ts.
 *
 * Settings (environment): `MARSH_HOME`, `MARSH_LEASE_MS`,
 * `MARSH_SPLIT_DEADLINE_MS`, `MARSH_CANCEL_GRACE_MS` (see docs/guide.md, "Settings").
 * It may read no other variable than `DAEMON_ENV` of protocol/entrypoints.ts.
 *
 * @module
 */

// engine_socket.ts, not private_engine.ts: the daemon never talks to Docker,
// and dockerode would want all of the environment (protocol/entrypoints.ts).
import { EngineError, engineSocket } from "../docker/engine_socket.ts";
import { sweepAttempts } from "./attempts.ts";
import { Journal } from "../journal/journal.ts";
import {
  ControlDirError,
  controlDirPath,
  ensureControlDir,
  JOURNAL_NAME,
  LOCK_NAME,
  LOG_NAME,
  PID_NAME,
  SOCKET_NAME,
} from "../protocol/control_dir.ts";
import type { CollectedReply, ForkPolicy, ProbedReply } from "../protocol/splitfs.ts";
import {
  denoPath,
  probeUserNamespace,
  SplitfsError,
  SplitfsService,
} from "../protocol/splitfs_client.ts";
import {
  type ChildRecord,
  describeFate,
  END_DEFAULTS,
  endChildren,
  type ProcessLink,
  readChildren,
  removeChildren,
  serviceLink,
  writeChildren,
} from "./children.ts";
import { makeEnvKey } from "./env_key.ts";
import { JobClientBundle } from "./job_capability.ts";
import { JobAdmitter, readAdmissionConfig } from "./job_admit.ts";
import { JobTreeCancel } from "./job_cancel.ts";
import { HeldShellSlots } from "./split_launch_held.ts";
import type { AdmissionConfig } from "../model/job_admission.ts";
import { ProcessRuns } from "./process_run.ts";
import { BranchRuns } from "./branch_links.ts";
import { Housekeeping } from "./housekeeping.ts";
import { KitJobs } from "./jobs.ts";
import { KitRegistry } from "./kits.ts";
import { Log } from "./log.ts";
import { streamLogs } from "./branch_logs.ts";
import { BranchPool } from "./pool.ts";
import { Server } from "./server.ts";
import { Resolutions } from "./resolutions.ts";
import { Sessions } from "./sessions.ts";
import { SessionFs } from "../protocol/splitfs_session_client.ts";
import { Compactor } from "./session_compact.ts";
import type { LocatedReply } from "../protocol/splitfs.ts";
import { runGitPlanner } from "./git_planner.ts";
import { RequestError } from "./request_error.ts";
import { type Settings, settingsFromEnv, Splits } from "./splits.ts";
import { WorkerLink } from "./worker_link.ts";
import { chooseShellView } from "./shell_view.ts";

async function answers(path: string): Promise<boolean> {
  try {
    const c = await Deno.connect({ transport: "unix", path });
    c.close();
    return true;
  } catch {
    return false;
  }
}

/**
 * Whether the split-filesystem service should run in a user and mount
 * namespace of its own: only for a daemon that is not root (root mounts in
 * the host's), whose fork policy lets it use overlay forks, and where
 * `unshare -Urm` works. `note` goes in front of the fork probe's reason;
 * `why` says why there is none.
 */
async function serviceNamespace(
  policy: ForkPolicy,
): Promise<{ use: boolean; note: string; why?: string }> {
  if (policy !== "auto" || Deno.uid() === 0) {
    return { use: false, note: "", why: `MARSH_FORKS=${policy}` };
  }
  const probe = await probeUserNamespace();
  if (probe.ok) {
    return {
      use: true,
      note: "not root: the split-filesystem service runs in its own user and mount namespace; ",
    };
  }
  return {
    use: false,
    note:
      `not root, and no user and mount namespace for the split-filesystem service: ${probe.reason}; `,
    why: probe.reason,
  };
}

/** Which fork strategy new splits will use here, for `marsh status` (a real tiny mount is tried). */
async function probeForks(
  splitfs: SplitfsService,
  home: string,
  policy: ForkPolicy,
  note: string,
): Promise<{ strategy: string; reason: string; policy: string }> {
  try {
    const r = await splitfs.request<ProbedReply>({ v: 1, t: "probe", dir: home, forks: policy });
    return { strategy: r.strategy, reason: `${note}${r.reason}`, policy };
  } catch (error) {
    return { strategy: "copy", reason: `${note}the probe failed: ${error}`, policy };
  }
}

/** Writes `children.json`; a child that is already gone is left out (and reported). */
async function recordChildren(
  link: ProcessLink,
  home: string,
  splitfs: number,
  worker: number,
  log: Log,
): Promise<void> {
  const pids = [["splitfs", splitfs], ["worker", worker]] as const;
  let starts: readonly (number | null)[];
  try {
    starts = await link.starts(pids.map(([, pid]) => pid));
  } catch (error) {
    log.info(`children: error: cannot learn the start times of ${splitfs} and ${worker}: ${error}`);
    return;
  }
  const children: ChildRecord[] = [];
  pids.forEach(([role, pid], i) => {
    const start = starts[i];
    if (start === null || start === undefined) {
      log.info(`children: the ${role} (pid ${pid}) is already gone`);
    } else children.push({ role, pid, start });
  });
  writeChildren(home, children);
}

async function main(): Promise<number> {
  let home: string;
  try {
    home = controlDirPath();
    ensureControlDir(home);
  } catch (error) {
    if (error instanceof ControlDirError) {
      console.error(`marshd: ${error.message}`);
      return 2;
    }
    throw error;
  }
  // One daemon per control dir. Two CLIs may start one at the same moment;
  // the loser must not take the socket (and the journal) from the winner.
  // The lock goes with this process, however it ends.
  const lock = Deno.openSync(`${home}/${LOCK_NAME}`, {
    read: true,
    write: true,
    create: true,
    mode: 0o600,
  });
  if (!lock.tryLockSync(true)) {
    lock.close();
    console.error(`marshd: already running for ${home}`);
    return 1;
  }
  const socket = `${home}/${SOCKET_NAME}`;
  if (await answers(socket)) {
    console.error(`marshd: already running on ${socket}`);
    return 1;
  }
  const foreground = Deno.stderr.isTerminal();
  const log = new Log(foreground ? null : `${home}/${LOG_NAME}`);
  let settings: Settings;
  try {
    settings = settingsFromEnv((n) => Deno.env.get(n));
  } catch (error) {
    // The log is stderr in the foreground, and the file the CLI points to when detached.
    log.info(`marshd: ${error instanceof Error ? error.message : error}`);
    log.close();
    return 2;
  }
  let admission: AdmissionConfig;
  try {
    // Read once: a changed MARSH_TREE_KIT_VMS or MARSH_JOB_WALL_SECONDS takes a restart.
    admission = readAdmissionConfig((n) => Deno.env.get(n));
  } catch (error) {
    log.info(`marshd: ${error instanceof Error ? error.message : error}`);
    log.close();
    return 2;
  }
  const journal = Journal.open(`${home}/${JOURNAL_NAME}`);

  // The engine argv branches run on: the one the CLI user who started this
  // daemon means (DOCKER_HOST, else the control dir's private engine when it
  // runs, else the default socket), chosen once at start.
  let engine: string | null = null;
  let engineProblem: string | undefined;
  try {
    engine = engineSocket(Deno.env, home).path;
    if (engine.includes(",")) {
      engineProblem = `the engine socket ${engine} holds a comma`;
      engine = null;
    }
  } catch (error) {
    if (!(error instanceof EngineError)) throw error;
    engineProblem = error.message;
  }
  log.info(engine === null ? `kit engine: none (${engineProblem})` : `kit engine: ${engine}`);

  const namespace = await serviceNamespace(settings.forks);
  const splitfs = SplitfsService.start({ userNamespace: namespace.use, home });
  const shellView = await chooseShellView({
    root: Deno.uid() === 0,
    serviceNamespace: splitfs.namespace !== null,
    ...(namespace.why ? { why: namespace.why } : {}),
    ...(settings.shellView === "fork" ? { refused: "MARSH_SHELL_VIEW=fork" } : {}),
  });
  const processes = serviceLink(splitfs);
  // What a killed daemon left running must be gone before its splits are
  // marked: its service could still be writing out/ and holding mounts.
  const last = readChildren(home);
  if (last.problem !== null) {
    log.info(`restart: error: ${last.problem}; no process of the last daemon was ended`);
  }
  for (const { child, fate } of await endChildren(processes, last.children)) {
    log.info(describeFate(child, fate, END_DEFAULTS.killWaitMs));
  }
  const report = journal.recoverAfterRestart(Date.now());
  for (const s of report.splits) log.info(`restart: split ${s.id} ${s.from} -> ${s.to}`);
  for (const b of report.branches) {
    log.info(`restart: branch ${b.split}/${b.label} ${b.from} -> ${b.to} (fork kept: ${b.fork})`);
  }
  sweepAttempts(home, journal, log);
  let stopping = false;
  const stopped = Promise.withResolvers<number>();
  const worker = WorkerLink.start(home, (why) => {
    if (stopping) return;
    // Without the worker no branch end can be confirmed: stop, and let the
    // next start's recovery mark what was running uncertain.
    log.info(`worker lost: ${why}; stopping`);
    stopped.resolve(1);
  }, engine);
  await recordChildren(processes, home, splitfs.pid, worker.pid, log);
  const server = new Server(home, log);
  const pool = new BranchPool();
  const jobs = new KitJobs({
    journal,
    pool,
    log,
    reset: engine === null ? null : (kit) => worker.resetKit(kit),
    ...(engineProblem === undefined ? {} : { engineProblem }),
  });
  // Uncertain jobs of the last daemon keep their slots until `marsh workers reset`.
  jobs.adopt(report);
  // So do shell branches whose end is unknown, until their supervisors are seen gone.
  const heldShells = new HeldShellSlots({ journal, pool, log, starts: processes.starts });
  heldShells.adopt();
  // One bundle of the in-job client for every Kit launch, split branch or `marsh run`.
  const jobClient = new JobClientBundle(home, denoPath());
  // One tree cancel and one admission for the split path and the run path alike.
  const tree = new JobTreeCancel({ journal, log });
  const admitter = new JobAdmitter(journal, admission);
  // The environment digests' key, once per daemon (docs/rules.md "Environment forwarding").
  const envKey = makeEnvKey(home);
  const branchRuns = new BranchRuns();
  const splits = new Splits({
    tree,
    admitter,
    journal,
    splitfs,
    worker,
    pool,
    sockets: server,
    log,
    home,
    settings,
    shellView,
    jobClient,
    deno: denoPath(),
    envKey,
    branchRuns,
    ...(engineProblem === undefined ? {} : { engineProblem }),
  });
  const startedMs = Date.now();
  const forks = await probeForks(splitfs, home, settings.forks, namespace.note);
  if (splitfs.namespace) {
    log.info(`split-filesystem service ${splitfs.pid}: its own user and mount namespace`);
  }
  log.info(`forks: ${forks.strategy} (${forks.reason})`);
  log.info(`shell view: ${shellView.view} (${shellView.reason})`);
  server.attach(splits, {
    status: () => ({
      daemon: { pid: Deno.pid, home, started_unix_ms: startedMs },
      splits: journal.counts(),
      forks,
      view: shellView,
      processes: journal.jobTree.processes(),
    }),
    gc: async (cwd, dryRun) => {
      if (!dryRun) sweepAttempts(home, journal, log);
      try {
        // The checkpoint stacks the journal still needs (marsh rollback, marsh fork).
        const keep = await sessions.gcKeep(cwd);
        const r = await splitfs.request<CollectedReply>({
          v: 1,
          t: "gc",
          cwd,
          dryRun,
          keepExact: keep,
        });
        return { root: r.root, dry_run: dryRun, removed: r.removed, bytes: r.bytes, kept: r.kept };
      } catch (error) {
        if (error instanceof SplitfsError) throw new RequestError(2, error.message);
        throw error;
      }
    },
    logs: (conn, req) => streamLogs(conn, req, { journal, splits, home }),
    stop: () => stopped.resolve(0),
  });
  server.attachKits(new KitRegistry({ journal, home, log }));
  server.attachJobs(jobs);
  server.attachHousekeeping(new Housekeeping({ splits, splitfs, journal, home, log }));
  const resolutions = new Resolutions({
    journal,
    splitfs,
    log,
    open: (s) => splits.openHeld(s),
    // Git runs in its own short-lived entrypoint; its temp dir is in the control dir.
    planner: (inputs) => runGitPlanner(inputs, { tmpDir: home }),
    runTests: (s, labels, spec) => splits.compareTests(s, labels, spec),
    pause: (step) => splits.pause(step),
    discard: async (id, labels, reason, who) => {
      await splits.discardBranches(id, labels, reason, who);
    },
    now: () => Date.now(),
  });
  // Before any request: what a crash left applying is finished or rolled back.
  const settled = await resolutions.recover();
  if (settled > 0) log.info(`restart: ${settled} interrupted resolutions settled`);
  server.attachResolutions(resolutions);
  server.attachCheckpoints({ checkpoints: journal.checkpoints, splitfs });
  const sessionFs = new SessionFs(splitfs);
  const sessions = new Sessions({
    journal,
    store: sessionFs,
    compactor: new Compactor({
      journal,
      store: sessionFs,
      log,
      pause: (step) => splits.pause(step),
    }),
    locate: (cwd) => splitfs.request<LocatedReply>({ v: 1, t: "locate", cwd }),
    log,
    now: () => Date.now(),
    op: {
      worker,
      home: Deno.realPathSync(home),
      namespace: splitfs.namespace,
      view: shellView,
      graceMs: settings.graceMs,
      pause: (step) => splits.pause(step),
    },
  });
  // Before any request: operations a crash left live are settled, views remounted.
  await sessions.recover();
  server.attachSessions(sessions);
  server.attachProcesses(
    new ProcessRuns({
      journal,
      admitter,
      tree,
      worker,
      sockets: server,
      jobClient,
      deno: denoPath(),
      envKey,
      home,
      graceMs: settings.graceMs,
      log,
      locate: (cwd) => splitfs.request<LocatedReply>({ v: 1, t: "locate", cwd }),
      branchRuns,
      ...(engineProblem === undefined ? {} : { engineProblem }),
    }),
  );
  server.listenHost(socket);
  splits.adoptAwaiting();
  Deno.writeTextFileSync(`${home}/${PID_NAME}`, `${Deno.pid}\n`, { mode: 0o600 });
  log.info(`marshd ${Deno.pid} serving ${socket}`);
  for (const sig of ["SIGTERM", "SIGINT", "SIGHUP"] as const) {
    Deno.addSignalListener(sig, () => stopped.resolve(0));
  }

  const code = await stopped.promise;
  stopping = true;
  heldShells.stop();
  log.info("marshd stopping");
  await splits.stop();
  server.shutdown();
  await worker.shutdown().catch((e) => log.info(`worker shutdown: ${e}`));
  await splitfs.close().catch((e) => log.info(`splitfs shutdown: ${e}`));
  removeChildren(home);
  journal.close();
  try {
    Deno.removeSync(`${home}/${PID_NAME}`);
  } catch {
    // Already gone.
  }
  log.info("marshd stopped");
  log.close();
  return code;
}

if (import.meta.main) Deno.exit(await main());
