/**
 * The split state machine's test world, for its unit tests only
 * (`split_machine_test.ts`, `split_discard_test.ts`): the links are the
 * fakes of `daemon/_fakes.ts`; the journal, the pool and the attempt
 * directories are real (a temp control dir).
 *
 * @module
 */

import { newEnvKey } from "../protocol/job_env_digest.ts";
import { Journal } from "../journal/journal.ts";
import type { BranchSpec, SplitCreateRequest } from "../protocol/daemon.ts";
import { type FakeConn, FakeService, FakeSockets, FakeWorker } from "./_fakes.ts";
import { Log } from "./log.ts";
import { BranchPool } from "./pool.ts";
import { Splits } from "./splits.ts";

/** The state machine over fakes, removed when disposed. */
export interface World extends Disposable {
  readonly home: string;
  readonly journal: Journal;
  readonly service: FakeService;
  readonly worker: FakeWorker;
  readonly sockets: FakeSockets;
  readonly pool: BranchPool;
  readonly splits: Splits;
}

/** A fresh world; `engine` is what the fake worker reports for Kit launches. */
export function world(engine: string | null = null): World {
  const home = Deno.makeTempDirSync({ prefix: "marsh-split-machine-" });
  const journal = Journal.open(`${home}/journal.db`);
  const log = new Log(`${home}/marshd.log`);
  const service = new FakeService(`${home}/project`);
  const worker = new FakeWorker(engine);
  const sockets = new FakeSockets();
  const pool = new BranchPool();
  const splits = new Splits({
    journal,
    splitfs: service,
    worker,
    pool,
    sockets,
    log,
    home,
    settings: { leaseMs: 60_000, deadlineMs: 3_600_000, graceMs: 10, pauseAt: null, forks: "copy" },
    shellView: { view: "fork", reason: "unit test" },
    jobClient: { ensure: () => Promise.resolve("/fake/marsh-job.js") },
    deno: "/fake/deno",
    envKey: newEnvKey(),
  });
  return {
    home,
    journal,
    service,
    worker,
    sockets,
    pool,
    splits,
    [Symbol.dispose]() {
      journal.close();
      log.close();
      Deno.removeSync(home, { recursive: true });
    },
  };
}

/** A shell branch. */
export function shell(label: string, script = "true"): BranchSpec {
  return { kind: "shell", label, script };
}

/** A `split.create` request. */
export function request(branches: readonly BranchSpec[], spool = false): SplitCreateRequest {
  return {
    v: 1,
    t: "split.create",
    cwd: "/project",
    branches,
    env: { HOME: "/home/u", PATH: "/usr/bin" },
    spool,
    withIgnored: false,
  };
}

/** Waits (a macrotask at a time) until `cond` holds; fails after 2 s. */
export async function until(cond: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 2000;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 1));
  }
}

/** The id the daemon gave the split, from its `split.accepted` frame. */
export async function accepted(conn: FakeConn): Promise<string> {
  await until(() => conn.frame("split.accepted") !== undefined, "split.accepted");
  return conn.frame("split.accepted")!.id;
}
