/**
 * Test helpers: sample records and a per-file scratch directory.
 *
 * @module
 */

import type { BranchRecord, CapabilityRecord, SplitRecord } from "./records.ts";

/**
 * Makes a scratch directory when the test module loads (with the runner's
 * permissions) and removes it when the module unloads, so each test can ask
 * for read and write on this directory only.
 */
export function scratchDir(name: string): string {
  const dir = Deno.makeTempDirSync({ prefix: `marsh-journal-${name}-` });
  globalThis.addEventListener("unload", () => Deno.removeSync(dir, { recursive: true }));
  return dir;
}

/** A fresh journal path under `dir`. */
export function freshPath(dir: string): string {
  return `${Deno.makeTempDirSync({ dir })}/journal.db`;
}

/** A root split in `run`, host-created, with every field set to something plain. */
export function sampleSplit(id: string, over: Partial<SplitRecord> = {}): SplitRecord {
  return {
    id,
    creator: { kind: "host" },
    session: "host",
    parent: null,
    depth: 1,
    root: "/p",
    dir: `/p/.marsh/split/${id}`,
    cwd: ".",
    cap: `cap-${id}`,
    state: "run",
    status: null,
    reason: null,
    identity: null,
    git: null,
    createdMs: 1_000,
    finishedMs: null,
    timing: {},
    withIgnored: false,
    rootId: null,
    ...over,
  };
}

/** A pending shell branch of `split`. */
export function sampleBranch(
  split: string,
  label: string,
  index: number,
  over: Partial<BranchRecord> = {},
): BranchRecord {
  return {
    split,
    label,
    index,
    kind: "shell",
    placement: "shell-vm",
    run: `echo ${label}`,
    state: "pending",
    status: null,
    code: null,
    jobId: null,
    files: 0,
    trust: null,
    fork: `/p/.marsh/split/${split}/${label}`,
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
    ...over,
  };
}

/** A live capability. */
export function sampleCapability(
  id: string,
  split: string,
  label: string | null,
  over: Partial<CapabilityRecord> = {},
): CapabilityRecord {
  return {
    id,
    split,
    label,
    holder: label === null ? "host" : `branch:${split}/${label}`,
    state: "live",
    createdMs: 1_000,
    revokedMs: null,
    ...over,
  };
}

/** The moment of the mid-run scenario; every record is older. */
export const CRASH_MS = 50_000;

/**
 * A daemon's journal mid-run, as `kill -9` would leave it:
 *
 * - `r` (run): `a` running, `b` pending (never launched), `c` captured;
 *   live capabilities for the split and for `a`; `c`'s already revoked.
 * - `n` (run, nested under `r/a`): argv branch `x` running, live capability.
 * - `w` (await): `a` captured; its own capability live.
 * - `k` kept, `j` joined, `x` cancelled, `u` uncertain (an earlier restart):
 *   settled, no live capability.
 */
export function writeMidRunScenario(
  j: {
    createSplit(rec: SplitRecord): void;
    addBranches(split: string, branches: readonly BranchRecord[]): void;
    createCapability(rec: CapabilityRecord): void;
  },
): void {
  const running = {
    state: "running",
    startedMs: 1_100,
    attempt: "att",
    mechanism: "cgroup",
  } as const;
  const captured = {
    state: "captured",
    status: "exited 0",
    code: 0,
    startedMs: 1_100,
    finishedMs: 1_500,
    files: 1,
    result: "r",
  } as const;
  j.createSplit(sampleSplit("r", { createdMs: 1_000 }));
  j.addBranches("r", [
    sampleBranch("r", "a", 0, running),
    sampleBranch("r", "b", 1),
    sampleBranch("r", "c", 2, captured),
  ]);
  j.createCapability(sampleCapability("cap-r", "r", null, { createdMs: 1_000 }));
  j.createCapability(sampleCapability("cap-r-a", "r", "a", { createdMs: 1_001 }));
  j.createCapability(
    sampleCapability("cap-r-c", "r", "c", { createdMs: 1_002, state: "revoked", revokedMs: 1_500 }),
  );

  j.createSplit(sampleSplit("n", {
    createdMs: 1_200,
    creator: { kind: "session", id: "branch-r-a" },
    parent: { split: "r", label: "a" },
    depth: 2,
  }));
  j.addBranches("n", [
    sampleBranch("n", "x", 0, {
      ...running,
      kind: "argv",
      placement: "kit:codex",
      run: ["codex", "exec", "x"],
      jobId: "job-1",
      mechanism: null,
    }),
  ]);
  j.createCapability(sampleCapability("cap-n", "n", null, { createdMs: 1_200 }));

  j.createSplit(sampleSplit("w", { createdMs: 900, state: "await", finishedMs: 1_600 }));
  j.addBranches("w", [sampleBranch("w", "a", 0, captured)]);
  j.createCapability(sampleCapability("cap-w", "w", null, { createdMs: 900 }));

  const settled = [
    ["k", "kept", "lease expired"],
    ["j", "joined", null],
    ["x", "cancelled", "cancelled"],
    ["u", "uncertain", "daemon restarted"],
  ] as const;
  for (const [id, state, reason] of settled) {
    j.createSplit(sampleSplit(id, { createdMs: 100, state, reason }));
    j.addBranches(id, [sampleBranch(id, "a", 0, captured)]);
  }
}
