/**
 * Job admission (docs/rules.md, "Admission"): every limit just under, at
 * and just over, with the exact message and exit; and a seeded property
 * that no sequence of launches, ends, cancels and resets breaks a cap or
 * widens a spawn set.
 */

import assert from "node:assert/strict";
import fc from "fast-check";
import {
  type Admission,
  type AdmissionState,
  admit,
  applyAdmission,
  cancelTree,
  capacityMessage,
  DEFAULT_ADMISSION_CONFIG,
  endJob,
  type LaunchRequest,
  resetKit,
  sameKitChain,
  slotsInUse,
  type TreeJob,
  treeKits,
} from "./job_admission.ts";
import { admissionConfig } from "./job_admission_config.ts";
import { spawnAttenuates } from "./job_spawn.ts";
import { JOB_DEPTH, JOB_FAN_OUT, JOB_SAME_KIT, JOB_TREE_TOTAL } from "./limits.ts";
import { assertProperty } from "../tests/_property.ts";

const NOW = 1_000_000;
const REGISTERED = ["cdx", "cl", "claude", "codex", "fixture", "pi", "shell"];

function job(id: string, over: Partial<TreeJob> = {}): TreeJob {
  return {
    id,
    name: "fixture",
    kit: "kit-fixture",
    parent: null,
    root: id,
    depth: 1,
    branch: false,
    spawn: REGISTERED,
    deadlineMs: null,
    cap: "live",
    slot: "live",
    ...over,
  };
}

function state(jobs: TreeJob[], over: Partial<AdmissionState> = {}): AdmissionState {
  return { jobs, otherSlots: 0, launches: { r: 1 }, ...over };
}

function child(parent: string, over: Partial<LaunchRequest> = {}): LaunchRequest {
  return {
    id: "new",
    name: "codex",
    kit: "kit-codex",
    kitWallS: 3600,
    parent: { kind: "job", id: parent },
    branch: null,
    via: "link",
    narrow: {},
    registered: REGISTERED,
    tty: false,
    nowMs: NOW,
    ...over,
  };
}

function refused(a: Admission): { limit: string; message: string; exit: number } {
  assert.equal(a.ok, false, `expected a refusal, got ${JSON.stringify(a)}`);
  if (a.ok) throw new Error("unreachable");
  return { limit: a.limit, message: a.message, exit: a.exit };
}

function admitted(a: Admission) {
  if (!a.ok) throw new Error(`expected an admission, got ${a.limit}: ${a.message}`);
  return a;
}

/** `n` live children of `r`, each of its own Kit name so only fan-out counts. */
function withChildren(n: number, extra: TreeJob[] = []): TreeJob[] {
  const kids = Array.from(
    { length: n },
    (_, i) => job(`c${i}`, { parent: "r", root: "r", depth: 2, kit: "kit-codex", name: "codex" }),
  );
  return [job("r"), ...kids, ...extra];
}

Deno.test(
  { name: "admission: a root job starts at depth 1 with its own tree", permissions: {} },
  () => {
    const a = admitted(
      admit(state([]), {
        ...child("x"),
        id: "root1",
        parent: { kind: "session", id: "s1" },
        via: "session",
      }),
    );
    assert.deepEqual(a.lineage, {
      parent: "session:s1",
      root: "root1",
      depth: 1,
      spawn: REGISTERED,
      deadlineMs: NOW + 3_600_000,
      parentDeadline: false,
    });
    assert.equal(a.tree, "root1");
    const b = admitted(
      admit(state([]), {
        ...child("x"),
        id: "b1",
        parent: { kind: "split", split: "sp", label: "a" },
        branch: { split: "sp", label: "a" },
        via: "branch",
      }),
    );
    assert.equal(b.lineage.parent, "split:sp/a");
    assert.equal(b.lineage.split, "sp");
    assert.equal(b.lineage.label, "a");
  },
);

Deno.test({ name: "admission: pool 8 just under, at, just over", permissions: {} }, () => {
  for (const [held, ok] of [[6, true], [7, true], [8, false]] as const) {
    // Shell branches and jobs share the pool: half of each.
    const jobs = [job("r", { slot: "live" })];
    const s = state(jobs, { otherSlots: held - 1 });
    assert.equal(slotsInUse(s), held);
    const a = admit(s, child("r"));
    assert.equal(a.ok, ok, `${held} held`);
    if (!ok) {
      assert.deepEqual(refused(a), { limit: "pool", message: "capacity: 8 jobs", exit: 125 });
    }
  }
  // A root job too: the pool is per daemon.
  const full = state([job("r")], { otherSlots: 7 });
  const root = admit(full, { ...child("x"), id: "n", parent: { kind: "session", id: "s" } });
  assert.equal(refused(root).limit, "pool");
  assert.equal(root.tree, null);
});

Deno.test(
  { name: "admission: the pool message names the uncertain jobs' Kits", permissions: {} },
  () => {
    const jobs = [
      job("r"),
      job("u1", { name: "codex", slot: "uncertain", cap: "revoked" }),
      job("u2", { name: "codex", slot: "uncertain", cap: "revoked" }),
      job("u3", { name: "claude", slot: "uncertain", cap: "revoked" }),
      job("f", { slot: "free", cap: "revoked" }),
    ];
    const s = state(jobs, { otherSlots: 4 });
    assert.equal(
      refused(admit(s, child("r"))).message,
      "capacity: 8 jobs (1 held by uncertain jobs on Kit claude: run marsh workers reset claude; " +
        "2 held by uncertain jobs on Kit codex: run marsh workers reset codex)",
    );
    assert.equal(
      capacityMessage(state([job("a", { name: "codex", slot: "uncertain" })]), 8),
      "capacity: 8 jobs (1 held by uncertain jobs on Kit codex: run marsh workers reset codex)",
    );
    // A reset frees them: the same launch is admitted.
    admitted(admit(resetKit(resetKit(s, "codex"), "claude"), child("r")));
  },
);

Deno.test({ name: "admission: depth 4 just under, at, just over", permissions: {} }, () => {
  for (const [parentDepth, ok] of [[2, true], [3, true], [4, false]] as const) {
    const s = state([job("r", { depth: parentDepth })]);
    const a = admit(s, child("r"));
    assert.equal(a.ok, ok, `parent at depth ${parentDepth}`);
    if (a.ok) assert.equal(a.lineage.depth, parentDepth + 1);
    else assert.deepEqual(refused(a), { limit: "depth", message: "depth limit 4", exit: 125 });
  }
  assert.equal(JOB_DEPTH, 4);
});

Deno.test(
  { name: "admission: same-Kit chain 2 just under, at, just over", permissions: {} },
  () => {
    const claude = { name: "claude", kit: "kit-claude" };
    const req = child("p", { ...claude });
    // Under: the parent is another Kit.
    admitted(admit(state([job("p")]), req));
    // At: claude → claude.
    const two = state([job("p", claude)]);
    admitted(admit(two, req));
    // Over: claude → claude → claude.
    const three = state([
      job("g", claude),
      job("p", { ...claude, parent: "g", root: "g", depth: 2 }),
    ]);
    assert.deepEqual(refused(admit(three, req)), {
      limit: "same-kit",
      message:
        "claude → claude → claude refused: same-Kit chain limit 2 (see /run/marsh/context.md)",
      exit: 125,
    });
    assert.equal(JOB_SAME_KIT, 2);
    // The identity counts, not the name: an alias of claude's Kit continues the chain.
    const alias = refused(admit(three, child("p", { name: "cl", kit: "kit-claude" })));
    assert.equal(alias.message.split(" refused")[0], "claude → claude → cl");
    // Another Kit in between breaks the chain.
    const broken = state([
      job("g", claude),
      job("m", { parent: "g", root: "g", depth: 2 }),
      job("p", { ...claude, parent: "m", root: "g", depth: 3 }),
    ]);
    admitted(admit(broken, req));
  },
);

Deno.test({ name: "admission: a split argv branch is no same-Kit step", permissions: {} }, () => {
  const claude = { name: "claude", kit: "kit-claude" };
  const chain = state([
    job("g", claude),
    job("p", { ...claude, parent: "g", root: "g", depth: 2 }),
  ]);
  // A branch job of p's split, though the third claude, is admitted.
  admitted(
    admit(chain, child("p", { ...claude, branch: { split: "s", label: "a" }, via: "branch" })),
  );
  // The walk stops at a branch job: g → [branch] p → child is a chain of 2.
  const viaBranch = state([
    job("g", claude),
    job("p", { ...claude, parent: "g", root: "g", depth: 2, branch: true }),
  ]);
  assert.deepEqual(sameKitChain(viaBranch, viaBranch.jobs[1]!, "kit-claude", "claude"), [
    "claude",
    "claude",
  ]);
  admitted(admit(viaBranch, child("p", claude)));
});

Deno.test({ name: "admission: fan-out 4 just under, at, just over", permissions: {} }, () => {
  for (const [kids, ok] of [[2, true], [3, true], [4, false]] as const) {
    const a = admit(state(withChildren(kids)), child("r"));
    assert.equal(a.ok, ok, `${kids} live children`);
    if (!ok) {
      assert.deepEqual(refused(a), { limit: "fan-out", message: "fan-out limit 4", exit: 125 });
    }
  }
  assert.equal(JOB_FAN_OUT, 4);
  // A split's branch jobs are the job's children too, and count.
  const branches = withChildren(3, [
    job("b", { parent: "r", root: "r", depth: 2, branch: true, name: "codex", kit: "kit-codex" }),
  ]);
  assert.equal(refused(admit(state(branches), child("r"))).limit, "fan-out");
  // A child whose deletion was verified no longer counts; an uncertain one does.
  const ended = endJob(state(withChildren(4)), "c0", true);
  admitted(admit(ended, child("r")));
  const unsure = endJob(state(withChildren(4)), "c0", false);
  assert.equal(refused(admit(unsure, child("r"))).limit, "fan-out");
});

Deno.test({
  name: "admission: total 64 launches per tree just under, at, just over",
  permissions: {},
}, () => {
  for (const [n, ok] of [[62, true], [63, true], [64, false]] as const) {
    const s = state([job("r")], { launches: { r: n } });
    const a = admit(s, child("r"));
    assert.equal(a.ok, ok, `${n} launches`);
    assert.equal(a.tree, "r");
    if (!ok) assert.deepEqual(refused(a), { limit: "total", message: "total limit 64", exit: 125 });
    // Refused or admitted, the launch is counted.
    assert.equal(applyAdmission(s, child("r"), a).launches.r, n + 1);
  }
  assert.equal(JOB_TREE_TOTAL, 64);
  // Capability and usage refusals are no launch of the tree.
  const s = state([job("r", { cap: "cancelling" })], { launches: { r: 5 } });
  const a = admit(s, child("r"));
  assert.equal(a.tree, null);
  assert.equal(applyAdmission(s, child("r"), a).launches.r, 5);
});

Deno.test(
  { name: "admission: Kit VMs per tree just under, at, just over", permissions: {} },
  () => {
    const kits = ["claude", "codex", "fixture", "pi"];
    const tree = (n: number) =>
      kits.slice(0, n).map((k, i) =>
        i === 0 ? job("r", { name: k, kit: `kit-${k}` }) : job(`k${i}`, {
          name: k,
          kit: `kit-${k}`,
          parent: "r",
          root: "r",
          depth: 2,
          // Ended children keep their VM until deletion is verified: not live children.
          cap: "revoked",
          slot: "uncertain",
        })
      );
    const shell = child("r", { name: "shell", kit: "kit-shell" });
    admitted(admit(state(tree(2)), shell));
    admitted(admit(state(tree(3)), shell));
    assert.deepEqual(refused(admit(state(tree(4)), shell)), {
      limit: "kit-vms",
      message:
        "shell refused: tree already uses 4 Kit VMs (claude, codex, fixture, pi) (MARSH_TREE_KIT_VMS)",
      exit: 125,
    });
    // A second call to a live Kit, or an alias of it, costs nothing.
    admitted(admit(state(tree(4)), child("r", { name: "codex", kit: "kit-codex" })));
    admitted(admit(state(tree(4)), child("r", { name: "cdx", kit: "kit-codex" })));
    // Once a VM is verified deleted the tree has room again.
    admitted(admit(endJob(state(tree(4)), "k3", true), shell));
    // Other trees' VMs do not count.
    assert.equal(treeKits(state([...tree(4), job("o", { kit: "kit-x" })]), "o").size, 1);
    // MARSH_TREE_KIT_VMS=1: only the root's own Kit.
    const one = { ...DEFAULT_ADMISSION_CONFIG, treeKitVms: 1 };
    assert.equal(
      refused(admit(state(tree(1)), shell, one)).message,
      "shell refused: tree already uses 1 Kit VMs (claude) (MARSH_TREE_KIT_VMS)",
    );
    admitted(admit(state(tree(1)), child("r", { name: "claude", kit: "kit-claude" }), one));
  },
);

Deno.test(
  { name: "admission: MARSH_TREE_KIT_VMS and MARSH_JOB_WALL_SECONDS", permissions: {} },
  () => {
    assert.deepEqual(admissionConfig({}), { ok: true, config: DEFAULT_ADMISSION_CONFIG });
    assert.deepEqual(admissionConfig({ treeKitVms: "", wallS: "" }), {
      ok: true,
      config: DEFAULT_ADMISSION_CONFIG,
    });
    for (const v of ["1", "64", " 7 "]) {
      const c = admissionConfig({ treeKitVms: v });
      assert.ok(c.ok && c.config.treeKitVms === Number(v), v);
    }
    for (const v of ["0", "65", "-1", "2.5", "four", "1e1"]) {
      const c = admissionConfig({ treeKitVms: v });
      assert.ok(!c.ok, v);
      if (!c.ok) {
        assert.equal(
          c.message,
          `MARSH_TREE_KIT_VMS=${v}: expected a whole number from 1 to 64 (Kit VMs one job tree may use at once); unset it for 4`,
        );
      }
    }
    const w = admissionConfig({ wallS: "86400" });
    assert.ok(w.ok && w.config.wallS === 86_400);
    for (const v of ["0", "86401", "x"]) {
      const c = admissionConfig({ wallS: v });
      assert.ok(!c.ok && c.message.startsWith(`MARSH_JOB_WALL_SECONDS=${v}: expected`), v);
    }
  },
);

Deno.test({
  name: "admission: wall time is the least of the Kit's, the daemon's and the parent's",
  permissions: {},
}, () => {
  const at = (left: number) => state([job("r", { deadlineMs: NOW + left })]);
  // Just under the 1 s minimum, at it, just over.
  assert.deepEqual(refused(admit(at(999), child("r", { name: "fixture", kit: "kit-fixture" }))), {
    limit: "wall",
    message:
      "fixture refused: deadline: parent job r has 999 ms of wall time left (MARSH_JOB_WALL_SECONDS)",
    exit: 125,
  });
  const exact = admitted(admit(at(1000), child("r")));
  assert.deepEqual([exact.lineage.deadlineMs, exact.lineage.parentDeadline], [NOW + 1000, true]);
  admitted(admit(at(1001), child("r")));
  // A parent already past its deadline says 0 ms and shows 8 characters of its id.
  const late = state([job("1a2b3c4d5e6f", { deadlineMs: NOW - 50 })]);
  assert.match(refused(admit(late, child("1a2b3c4d5e6f"))).message, /parent job 1a2b3c4d has 0 ms/);
  // The Kit's own limit, when it is the least.
  const kit = admitted(admit(at(60_000), child("r", { kitWallS: 10 })));
  assert.deepEqual([kit.lineage.deadlineMs, kit.lineage.parentDeadline], [NOW + 10_000, false]);
  // MARSH_JOB_WALL_SECONDS, when it is.
  const cfg = { ...DEFAULT_ADMISSION_CONFIG, wallS: 5 };
  const env = admitted(admit(at(60_000), child("r"), cfg));
  assert.deepEqual([env.lineage.deadlineMs, env.lineage.parentDeadline], [NOW + 5_000, false]);
  // A parent with no deadline fixed yet bounds nothing.
  const none = admitted(admit(state([job("r")]), child("r", { kitWallS: 7 })));
  assert.equal(none.lineage.deadlineMs, NOW + 7_000);
});

Deno.test(
  { name: "admission: the spawn set, 126 from a link and 125 otherwise", permissions: {} },
  () => {
    const s = state([job("r", { spawn: ["claude"] })]);
    const message = "spawn refused: codex not in this job's spawn set (MARSH_SPAWN)";
    assert.deepEqual(refused(admit(s, child("r"))), { limit: "spawn", message, exit: 126 });
    assert.deepEqual(refused(admit(s, child("r", { via: "run" }))), {
      limit: "spawn",
      message,
      exit: 125,
    });
    assert.equal(
      refused(admit(s, child("r", { via: "branch", branch: { split: "x", label: "a" } }))).exit,
      125,
    );
    // An empty set (--no-spawn): every spawn refused, the job itself admitted.
    const empty = state([job("r", { spawn: [] })]);
    assert.equal(refused(admit(empty, child("r", { name: "claude" }))).limit, "spawn");
    // The child's set narrows, with a warning for what was asked beyond the parent's.
    const a = admitted(
      admit(
        state([job("r", { spawn: ["claude", "codex"] })]),
        child("r", { narrow: { flag: "codex,pi" } }),
      ),
    );
    assert.deepEqual(a.lineage.spawn, ["codex"]);
    assert.deepEqual(a.warnings, [
      "--spawn: pi left out: a spawn set only narrows (it was: claude, codex)",
    ]);
    // A root job's set is the registered names, narrowed by the session's MARSH_SPAWN.
    const root = admitted(
      admit(state([]), {
        ...child("x"),
        parent: { kind: "session", id: "s" },
        via: "session",
        narrow: { env: "claude" },
      }),
    );
    assert.deepEqual(root.lineage.spawn, ["claude"]);
    // A malformed narrowing is a usage error, no launch.
    const bad = admit(state([job("r")]), child("r", { narrow: { env: "Claude" } }));
    assert.equal(refused(bad).exit, 2);
    assert.equal(bad.tree, null);
  },
);

Deno.test({ name: "admission: no TTY children; a root job may have one", permissions: {} }, () => {
  assert.deepEqual(refused(admit(state([job("r")]), child("r", { tty: true }))), {
    limit: "tty",
    message:
      "interactive child jobs are not supported yet: codex has a terminal on stdin or stdout; run it non-interactively with neither attached, e.g. `codex ... </dev/null | cat`",
    exit: 125,
  });
  admitted(
    admit(state([]), { ...child("x"), parent: { kind: "session", id: "s" }, tty: true }),
  );
});

Deno.test({
  name: "admission: a parent whose capability is not live starts nothing",
  permissions: {},
}, () => {
  for (const cap of ["cancelling", "revoked"] as const) {
    assert.deepEqual(refused(admit(state([job("1a2b3c4d99", { cap })]), child("1a2b3c4d99"))), {
      limit: "capability",
      message: "parent job 1a2b3c4d is ending: nothing new starts under it",
      exit: 125,
    });
  }
  assert.equal(refused(admit(state([]), child("gone"))).limit, "capability");
  // A cancel of the tree reaches every descendant at once.
  const s = state([
    job("r"),
    job("c", { parent: "r", root: "r", depth: 2 }),
    job("g", { parent: "c", root: "r", depth: 3 }),
    job("o"),
  ]);
  const cancelled = cancelTree(s, "r");
  assert.deepEqual(cancelled.jobs.map((j) => j.cap), [
    "cancelling",
    "cancelling",
    "cancelling",
    "live",
  ]);
  assert.equal(refused(admit(cancelled, child("g"))).limit, "capability");
});

// ---- property: no sequence breaks a cap or widens a spawn set ----

const NAMES = ["claude", "cl", "codex", "fixture", "pi", "shell"];
/** `cl` is an alias of claude's Kit. */
const KIT_OF: Record<string, string> = {
  claude: "k-claude",
  cl: "k-claude",
  codex: "k-codex",
  fixture: "k-fixture",
  pi: "k-pi",
  shell: "k-shell",
};

type Step =
  | {
    t: "launch";
    parent: number;
    name: number;
    branch: boolean;
    flag: number[] | null;
    none: boolean;
  }
  | { t: "end"; job: number; verified: boolean }
  | { t: "cancel"; job: number }
  | { t: "reset"; name: number }
  | { t: "tick"; ms: number };

const step: fc.Arbitrary<Step> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({
      t: fc.constant("launch" as const),
      parent: fc.integer({ min: -2, max: 40 }),
      name: fc.nat(NAMES.length - 1),
      branch: fc.boolean(),
      flag: fc.option(fc.array(fc.nat(NAMES.length - 1), { maxLength: 4 }), {
        nil: null,
        freq: 4,
      }),
      none: fc.nat(4).map((n) => n === 0),
    }),
  },
  {
    weight: 3,
    arbitrary: fc.record({
      t: fc.constant("end" as const),
      job: fc.nat(40),
      verified: fc.nat(3).map((n) => n !== 0),
    }),
  },
  { weight: 1, arbitrary: fc.record({ t: fc.constant("cancel" as const), job: fc.nat(40) }) },
  {
    weight: 1,
    arbitrary: fc.record({ t: fc.constant("reset" as const), name: fc.nat(NAMES.length - 1) }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      t: fc.constant("tick" as const),
      ms: fc.integer({ min: 0, max: 1500 }),
    }),
  },
);

function checkInvariants(s: AdmissionState, pool: number, kitCap: number, now: number): void {
  assert.ok(slotsInUse(s) <= pool, `pool: ${slotsInUse(s)} > ${pool}`);
  const byId = new Map(s.jobs.map((j) => [j.id, j]));
  for (const j of s.jobs) {
    assert.ok(j.depth >= 1 && j.depth <= JOB_DEPTH, `depth ${j.depth}`);
    const live = s.jobs.filter((c) => c.parent === j.id && c.slot !== "free").length;
    assert.ok(live <= JOB_FAN_OUT, `fan-out ${live}`);
    if (j.parent === null) {
      assert.equal(j.root, j.id);
      assert.ok(treeKits(s, j.id).size <= kitCap, `Kit VMs of ${j.id}`);
      const launched = s.jobs.filter((x) => x.root === j.id).length;
      assert.ok(launched <= JOB_TREE_TOTAL && launched <= (s.launches[j.id] ?? 0));
      continue;
    }
    const p = byId.get(j.parent)!;
    assert.equal(j.depth, p.depth + 1);
    assert.equal(j.root, p.root);
    assert.ok(spawnAttenuates(p.spawn, j.spawn), `spawn ${j.spawn} ⊄ ${p.spawn}`);
    assert.ok(p.spawn.includes(j.name), `${j.name} outside its parent's set`);
    assert.ok(j.deadlineMs! <= p.deadlineMs!, "a child outlives its parent's deadline");
    if (!j.branch) {
      assert.ok(sameKitChain(s, p, j.kit, j.name).length <= JOB_SAME_KIT, "same-Kit chain");
    }
  }
  assert.ok(now >= 0);
}

Deno.test({
  name:
    "admission property: no launches, ends, cancels or resets exceed a cap; spawn sets only narrow",
  permissions: {},
}, (t) => {
  assertProperty(
    t,
    fc.property(
      fc.array(step, { minLength: 40, maxLength: 240, size: "max" }),
      fc.constantFrom(8, 8, 5),
      fc.integer({ min: 1, max: 6 }),
      fc.nat(1),
      fc.option(fc.subarray(NAMES, { minLength: 1 }), { nil: null, freq: 3 }),
      (steps, pool, treeKitVms, otherSlots, sessionSpawn) => {
        const config = { pool, treeKitVms, wallS: 60 };
        let s: AdmissionState = { jobs: [], otherSlots, launches: {} };
        let now = NOW;
        let n = 0;
        for (const st of steps) {
          if (st.t === "launch") {
            // Mostly live parents, the deepest often: a revoked one only tests one refusal.
            // Mostly live parents: the deepest, the oldest (to fan out), or any.
            const live = s.jobs.filter((j) => j.cap === "live");
            const deepest = [...live].sort((a, b) => b.depth - a.depth)[0];
            const parent = st.parent < 0 || live.length === 0
              ? (st.parent < -1 ? s.jobs[0] : undefined)
              : st.parent % 4 < 2
              ? deepest
              : st.parent % 4 === 2
              ? live[0]
              : live[st.parent % live.length];
            const name = NAMES[st.name]!;
            const req: LaunchRequest = {
              id: `j${n++}`,
              name,
              kit: KIT_OF[name]!,
              kitWallS: 2 + (st.name * 3) % 10,
              parent: parent === undefined
                ? { kind: "session", id: "s" }
                : { kind: "job", id: parent.id },
              branch: st.branch ? { split: `sp${n}`, label: "a" } : null,
              via: st.branch ? "branch" : "link",
              narrow: parent === undefined
                ? (sessionSpawn === null ? {} : { env: sessionSpawn.join(",") })
                : st.none
                ? { none: true }
                : st.flag === null
                ? {}
                : { flag: st.flag.map((i) => NAMES[i]).join(",") || "none" },
              registered: NAMES,
              tty: false,
              nowMs: now,
            };
            const before = s;
            const d = admit(s, req, config);
            s = applyAdmission(s, req, d);
            if (d.ok) {
              // What the narrowing named bounds the child's set, whatever the parent had.
              for (const v of [req.narrow.env, req.narrow.flag]) {
                if (v === undefined) continue;
                const named = v === "none" ? [] : v.split(",");
                assert.ok(spawnAttenuates(named, d.lineage.spawn), `spawn widened past ${v}`);
              }
              if (req.narrow.none) assert.deepEqual(d.lineage.spawn, []);
            }
            if (d.ok && parent !== undefined) {
              assert.equal(before.jobs.find((j) => j.id === parent.id)!.cap, "live");
              assert.ok(parent.deadlineMs! - now >= 1000, "admitted with under 1 s left");
            }
          } else if (st.t === "end") {
            const running = s.jobs.filter((j) => j.slot === "live");
            const j = running[st.job % Math.max(1, running.length)];
            if (j !== undefined) s = endJob(s, j.id, st.verified);
          } else if (st.t === "cancel" && s.jobs.length > 0) {
            s = cancelTree(s, s.jobs[st.job % s.jobs.length]!.id);
          } else if (st.t === "reset") {
            s = resetKit(s, NAMES[st.name]!);
          } else if (st.t === "tick") {
            now += st.ms;
          }
          checkInvariants(s, pool, treeKitVms, now);
        }
      },
    ),
    { numRuns: 150 },
  );
});

Deno.test({
  name: "admission property: a self-replicating tree stops at its caps, never above",
  permissions: {},
}, () => {
  // Every live job spawns shell until nothing is admitted: the caps, not luck, stop it.
  let s: AdmissionState = { jobs: [], otherSlots: 0, launches: {} };
  const shell = { name: "shell", kit: "k-shell", kitWallS: 3600, registered: NAMES };
  const root = { ...shell, id: "root", parent: { kind: "session", id: "s" } as const };
  const base = { branch: null, via: "run" as const, narrow: {}, tty: false, nowMs: NOW };
  s = applyAdmission(s, { ...root, ...base }, admit(s, { ...root, ...base }));
  const limits = new Set<string>();
  for (let round = 0, id = 0; round < 400; round++) {
    let any = false;
    for (const p of s.jobs.filter((j) => j.cap === "live")) {
      const req: LaunchRequest = {
        ...shell,
        ...base,
        id: `x${id++}`,
        parent: { kind: "job", id: p.id },
      };
      const d = admit(s, req);
      s = applyAdmission(s, req, d);
      if (d.ok) any = true;
      else limits.add(d.limit);
    }
    if (any) continue;
    // Stuck at a cap: one leaf ends, verified, and the tree goes on until its total.
    const leaf = s.jobs.find((j) => j.id !== "root" && j.slot === "live");
    if (leaf === undefined) break;
    s = endJob(s, leaf.id, true);
  }
  assert.ok(s.jobs.length <= JOB_TREE_TOTAL);
  assert.ok((s.launches.root ?? 0) >= JOB_TREE_TOTAL);
  for (const l of ["same-kit", "fan-out", "total"]) {
    assert.ok(limits.has(l), `${l} reached: ${[...limits]}`);
  }
});
