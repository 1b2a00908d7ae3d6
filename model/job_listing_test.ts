/**
 * `marsh jobs` (docs/rules.md, "Lineage"): golden listings in text, flat
 * and drawn, `marsh.jobs/v1`, `marsh.jobs.tree/v1` with job, split, branch
 * and fanout nodes, the scopes, and `marsh jobs show`. The records are
 * built here, as the journal lists them: trees deeper than a test can
 * cheaply run, fanout jobs (nothing records `lineage.fanout` yet) and
 * records that point at each other.
 */

import assert from "node:assert/strict";
import { buildForest, findJob, type ListedSplit, scopeTrees } from "./job_forest.ts";
import type { ListedJob } from "./job_lineage.ts";
import {
  formatJobShow,
  formatJobsText,
  jobsDocument,
  jobShowJson,
  jobsOf,
  jobsTreeDocument,
} from "./job_listing.ts";

const NOW = 1_700_000_000_000;
const S = 1000;

function listed(id: string, over: Partial<ListedJob> = {}): ListedJob {
  return {
    id,
    sessionId: "sess1",
    command: "fixture",
    args: [],
    state: "finished",
    cleanup: "removed",
    exitCode: 0,
    createdMs: NOW - 100 * S,
    startedMs: NOW - 99 * S,
    finishedMs: NOW - 90 * S,
    lineage: { parent: "session:sess1", root: id, depth: 1, spawn: ["claude", "codex"] },
    ...over,
  };
}

/** A running three-level tree, a split's branch job, and an old tree whose cleanup is uncertain. */
const JOBS: ListedJob[] = [
  listed("c0ffee00aa11", {
    command: "codex",
    args: ["exec", "review the patch"],
    createdMs: NOW - 60 * S,
    startedMs: NOW - 58_700,
    finishedMs: NOW - 10 * S,
    lineage: { parent: "job:a1b2c3d4e5f6", root: "a1b2c3d4e5f6", depth: 2, spawn: ["codex"] },
  }),
  listed("a1b2c3d4e5f6", {
    command: "claude",
    args: ["-p", "fix the failing test"],
    state: "running",
    exitCode: null,
    cleanup: "live",
    createdMs: NOW - 125 * S,
    startedMs: NOW - 123_500,
    finishedMs: null,
  }),
  listed("5eed00bb2222", {
    command: "shell",
    args: ["-c", "echo 'hi' && sleep 1"],
    state: "failed",
    exitCode: 125,
    createdMs: NOW - 50 * S,
    startedMs: null,
    finishedMs: NOW - 49 * S,
    lineage: { parent: "job:c0ffee00aa11", root: "a1b2c3d4e5f6", depth: 3, spawn: [] },
  }),
  listed("bbbb1111cccc", {
    sessionId: "sess2",
    createdMs: NOW - 30 * 60 * S,
    startedMs: NOW - 30 * 60 * S + 1500,
    finishedMs: NOW - 30 * 60 * S + 134_000,
    args: ["make", "test"],
    lineage: {
      parent: "split:5p1i7000aaaa/a",
      root: "bbbb1111cccc",
      depth: 1,
      spawn: ["fixture"],
      split: "5p1i7000aaaa",
      label: "a",
    },
  }),
  listed("99887766aabb", {
    state: "uncertain",
    cleanup: "uncertain",
    exitCode: null,
    createdMs: NOW - 2 * 86_400 * S,
    startedMs: NOW - 2 * 86_400 * S + 1000,
    finishedMs: NOW - 2 * 86_400 * S + 3_725_000,
    args: ["sh", "-c", `for i in $(seq 1 100); do echo "$i"; done > out.txt; cat out.txt`],
  }),
];

const FLAT = buildForest(JOBS, []);

Deno.test({ name: "marsh jobs --all: the golden listing", permissions: {} }, () => {
  assert.equal(
    formatJobsText(FLAT, { kind: "all" }, NOW),
    [
      "ID        STARTED  STATE      EXIT  RUN    PARENT    COMMAND",
      "a1b2c3d4  2m ago   running    -     2m03s  -         claude -p 'fix the failing test'",
      "c0ffee00  1m ago   finished   0     48.7s  a1b2c3d4  codex exec 'review the patch'",
      "5eed00bb  50s ago  failed     125   -      c0ffee00  shell -c 'echo '\\''hi'\\'' && sleep 1'",
      "bbbb1111  30m ago  finished   0     2m12s  5p1i7000  fixture make test",
      `99887766  2d ago   uncertain  -     1h02m  -         fixture sh -c 'for i in $(seq 1 100); do echo "$i"; done > out.…  cleanup uncertain (run marsh workers reset fixture)`,
      "",
    ].join("\n"),
  );
});

Deno.test({
  name: "marsh jobs: scoped by session and for the host, with the empty and scoped-out lines",
  permissions: {},
}, () => {
  assert.equal(
    formatJobsText(FLAT, { kind: "session", session: "sess2" }, NOW),
    [
      "ID        STARTED  STATE     EXIT  RUN    PARENT    COMMAND",
      "bbbb1111  30m ago  finished  0     2m12s  5p1i7000  fixture make test",
      "",
    ].join("\n"),
  );
  assert.equal(
    formatJobsText(FLAT, { kind: "session", session: "nobody" }, NOW),
    "no jobs in this session\n",
  );
  assert.equal(formatJobsText([], { kind: "host" }, NOW), "no jobs recorded\n");
  assert.equal(formatJobsText([], { kind: "all" }, NOW), "no jobs recorded\n");
  assert.equal(formatJobsText([], { kind: "all" }, NOW, { tree: true }), "no jobs recorded\n");
  // The host sees running trees, the last hour's, and the five newest: six old trees hide one.
  const old = Array.from(
    { length: 6 },
    (_, i) =>
      listed(`old${i}xxxxxx`, {
        createdMs: NOW - (10 + i) * 3_600_000,
        startedMs: null,
        finishedMs: null,
        exitCode: null,
        state: "cancelled",
      }),
  );
  const forest = buildForest([...old, ...JOBS], []);
  const scoped = scopeTrees(forest, { kind: "host" }, NOW);
  assert.deepEqual(jobsOf(scoped.trees).map((j) => j.id.slice(0, 8)), [
    "a1b2c3d4",
    "c0ffee00",
    "5eed00bb",
    "bbbb1111",
    "old0xxxx",
    "old1xxxx",
    "old2xxxx",
  ]);
  assert.equal(scoped.hidden, 4);
  assert.ok(
    formatJobsText(forest, { kind: "host" }, NOW).endsWith(
      "\nold2xxxx  12h ago  cancelled  -     -      -         fixture\n" +
        "(4 older job trees not shown; marsh jobs --all lists every job)\n",
    ),
  );
  const running = listed("zzzz0000", { createdMs: NOW - 9 * 86_400_000, state: "queued" });
  assert.equal(
    jobsOf(scopeTrees(buildForest([...old, running], []), { kind: "host" }, NOW).trees)[0]!.id,
    "zzzz0000",
    "a queued tree first, whatever its age",
  );
  // Everything scoped out: the empty line, then the scoped-out one.
  const hiddenOnly = buildForest(old.map((j) => ({ ...j, sessionId: "other" })), []);
  assert.equal(
    formatJobsText(hiddenOnly, { kind: "session", session: "sess1" }, NOW),
    "no jobs in this session\n",
  );
});

Deno.test({ name: "marsh jobs --json: the marsh.jobs/v1 document", permissions: {} }, () => {
  const doc = jobsDocument(FLAT) as { schema: string; jobs: Record<string, unknown>[] };
  assert.equal(doc.schema, "marsh.jobs/v1");
  assert.deepEqual(doc.jobs.map((j) => j.job_id), [
    "a1b2c3d4e5f6",
    "c0ffee00aa11",
    "5eed00bb2222",
    "bbbb1111cccc",
    "99887766aabb",
  ]);
  assert.equal(
    JSON.stringify(doc.jobs[1]),
    `{"job_id":"c0ffee00aa11","session_id":"sess1","command":"codex","args":["exec","review the patch"],"state":"finished","cleanup":"removed","exit_code":0,"created_unix_ms":${
      NOW - 60_000
    },"started_unix_ms":${NOW - 58_700},"finished_unix_ms":${
      NOW - 10_000
    },"lineage":{"parent":"job:a1b2c3d4e5f6","root":"a1b2c3d4e5f6","depth":2,"spawn":["codex"]}}`,
  );
});

const SIBLING = listed("d00d00000000", {
  command: "pi",
  args: ["--version"],
  createdMs: NOW - 40 * S,
  startedMs: NOW - 39 * S,
  finishedMs: NOW - 38 * S,
  lineage: { parent: "job:a1b2c3d4e5f6", root: "a1b2c3d4e5f6", depth: 2, spawn: [] },
});

Deno.test(
  { name: "marsh jobs --tree: children under their parent, drawn", permissions: {} },
  () => {
    assert.equal(
      formatJobsText(buildForest([...JOBS, SIBLING], []), { kind: "all" }, NOW, { tree: true }),
      [
        "ID        STARTED  STATE      EXIT  RUN    COMMAND",
        "a1b2c3d4  2m ago   running    -     2m03s  claude -p 'fix the failing test'",
        "c0ffee00  1m ago   finished   0     48.7s  ├─ codex exec 'review the patch'",
        "5eed00bb  50s ago  failed     125   -      │  └─ shell -c 'echo '\\''hi'\\'' && sleep 1'",
        "d00d0000  40s ago  finished   0     1.0s   └─ pi --version",
        // Its split is not among the records: drawn from the job's lineage, its state unknown.
        "5p1i7000  30m ago  unknown    -     -      split (a)",
        "bbbb1111  30m ago  finished   0     2m12s  └─ a: fixture make test",
        `99887766  2d ago   uncertain  -     1h02m  fixture sh -c 'for i in $(seq 1 100); do echo "$i"; done > out.…  cleanup uncertain (run marsh workers reset fixture)`,
        "",
      ].join("\n"),
    );
    const old = Array.from(
      { length: 6 },
      (_, i) => listed(`old${i}xxxxxx`, { createdMs: NOW - (10 + i) * 3_600_000 }),
    );
    assert.ok(
      formatJobsText(buildForest(old, []), { kind: "host" }, NOW, { tree: true }).endsWith(
        "(1 older job trees not shown; marsh jobs --tree --all lists every job)\n",
      ),
    );
  },
);

/** A branch of a split record. */
function branch(
  label: string,
  over: Partial<ListedSplit["branches"][number]> = {},
): ListedSplit["branches"][number] {
  return {
    label,
    kind: "argv",
    command: "fixture",
    state: "captured",
    status: "exited 0",
    exitCode: 0,
    jobId: null,
    files: 0,
    createdMs: NOW - 300 * S,
    startedMs: NOW - 299 * S,
    finishedMs: NOW - 210 * S,
    ...over,
  };
}

/**
 * A session's joined split: a shell branch whose shell ran a Kit command,
 * an argv branch whose job started a child and made its own split (now
 * cancelled); a running fanout of two jobs; a running root with a queued
 * child in another session; and a job whose split was removed.
 */
const SPLITS: ListedSplit[] = [
  {
    id: "sp1aaaaa1111",
    sessionId: "sess1",
    creatorJob: null,
    parent: null,
    state: "joined",
    status: 1,
    createdMs: NOW - 300 * S,
    finishedMs: NOW - 200 * S,
    timing: { snapshot: 12, run: 90_000 },
    branches: [
      branch("fix", {
        kind: "shell",
        command: "claude -p 'fix it'\nmake test",
        files: 2,
      }),
      branch("try", {
        command: "codex exec try",
        status: "exited 1",
        exitCode: 1,
        jobId: "j2try0000000",
      }),
    ],
  },
  {
    id: "sp2bbbbb2222",
    sessionId: "sess1",
    creatorJob: "j2try0000000",
    parent: { split: "sp1aaaaa1111", label: "try" },
    state: "cancelled",
    status: 130,
    createdMs: NOW - 240 * S,
    finishedMs: null,
    timing: {},
    branches: [
      branch("n", {
        state: "cancelled",
        status: "cancelled",
        exitCode: 130,
        jobId: "j4nest000000",
        createdMs: NOW - 240 * S,
        startedMs: NOW - 239 * S,
        finishedMs: NOW - 230 * S,
      }),
    ],
  },
];

const TREE_JOBS: ListedJob[] = [
  listed("j1shell00000", {
    command: "claude",
    args: ["-p", "fix it"],
    createdMs: NOW - 290 * S,
    startedMs: NOW - 289 * S,
    finishedMs: NOW - 280 * S,
    lineage: { parent: "split:sp1aaaaa1111/fix", root: "j1shell00000", depth: 1, spawn: ["codex"] },
  }),
  listed("j2try0000000", {
    command: "codex",
    args: ["exec", "try"],
    exitCode: 1,
    createdMs: NOW - 300 * S,
    startedMs: NOW - 298 * S,
    finishedMs: NOW - 215 * S,
    lineage: {
      parent: "split:sp1aaaaa1111/try",
      root: "j2try0000000",
      depth: 1,
      spawn: ["codex", "pi"],
      split: "sp1aaaaa1111",
      label: "try",
    },
  }),
  listed("j3child00000", {
    command: "pi",
    args: ["-p", "check"],
    createdMs: NOW - 250 * S,
    startedMs: NOW - 249 * S,
    finishedMs: NOW - 245 * S,
    lineage: { parent: "job:j2try0000000", root: "j2try0000000", depth: 2, spawn: [] },
  }),
  listed("j4nest000000", {
    state: "cancelled",
    exitCode: 130,
    createdMs: NOW - 240 * S,
    startedMs: NOW - 239 * S,
    finishedMs: NOW - 230 * S,
    lineage: {
      parent: "job:j2try0000000",
      root: "j2try0000000",
      depth: 2,
      spawn: [],
      split: "sp2bbbbb2222",
      label: "n",
    },
  }),
  listed("f1a000000000", {
    command: "codex",
    args: ["exec", "a"],
    state: "running",
    exitCode: null,
    cleanup: "live",
    createdMs: NOW - 20 * S,
    startedMs: NOW - 19 * S,
    finishedMs: null,
    lineage: {
      parent: "session:sess1",
      root: "f1a000000000",
      depth: 1,
      spawn: [],
      fanout: "fan0000011/a",
    },
  }),
  listed("f1b000000000", {
    command: "codex",
    args: ["exec", "b"],
    exitCode: 2,
    createdMs: NOW - 20 * S,
    startedMs: NOW - 19 * S,
    finishedMs: NOW - 15 * S,
    lineage: {
      parent: "session:sess1",
      root: "f1b000000000",
      depth: 1,
      spawn: [],
      fanout: "fan0000011/b",
    },
  }),
  listed("r1root000000", {
    sessionId: "sess2",
    command: "claude",
    state: "running",
    exitCode: null,
    cleanup: "live",
    createdMs: NOW - 5 * S,
    startedMs: NOW - 4 * S,
    finishedMs: null,
    lineage: { parent: "session:sess2", root: "r1root000000", depth: 1, spawn: ["codex"] },
  }),
  listed("r2kid0000000", {
    sessionId: "sess2",
    command: "codex",
    state: "queued",
    exitCode: null,
    cleanup: "none",
    createdMs: NOW - 2 * S,
    startedMs: null,
    finishedMs: null,
    lineage: { parent: "job:r1root000000", root: "r1root000000", depth: 2, spawn: [] },
  }),
  listed("g1old0000000", {
    state: "uncertain",
    cleanup: "uncertain",
    exitCode: null,
    createdMs: NOW - 2 * 86_400 * S,
    startedMs: NOW - 2 * 86_400 * S + 1000,
    finishedMs: null,
    lineage: {
      parent: "split:gone0000zzzz/x",
      root: "g1old0000000",
      depth: 1,
      spawn: [],
      split: "gone0000zzzz",
      label: "x",
    },
  }),
];

const FOREST = buildForest(TREE_JOBS, SPLITS);
Deno.test(
  { name: "marsh jobs --tree: splits, branches and fanouts drawn", permissions: {} },
  () => {
    assert.equal(
      formatJobsText(FOREST, { kind: "all" }, NOW, { tree: true }),
      [
        "ID            STARTED  STATE      EXIT  RUN    COMMAND",
        "r1root00      5s ago   running    -     4.0s   claude",
        "r2kid000      2s ago   queued     -     -      └─ codex",
        "fan00000      20s ago  running    -     20.0s  fanout (a, b)",
        "f1a00000      20s ago  running    -     19.0s  ├─ a: codex exec a",
        "f1b00000      20s ago  finished   2     4.0s   └─ b: codex exec b",
        "sp1aaaaa      5m ago   joined     1     1m40s  split (fix, try)",
        "sp1aaaaa/fix  4m ago   finished   0     1m29s  ├─ fix: claude -p 'fix it'; make test",
        "j1shell0      4m ago   finished   0     9.0s   │  └─ claude -p 'fix it'",
        "j2try000      5m ago   finished   1     1m23s  └─ try: codex exec try",
        "j3child0      4m ago   finished   0     4.0s      ├─ pi -p check",
        "sp2bbbbb      4m ago   cancelled  130   -         └─ split (n)",
        "j4nest00      4m ago   cancelled  130   9.0s         └─ n: fixture",
        "gone0000      2d ago   unknown    -     -      split (x)",
        "g1old000      2d ago   uncertain  -     -      └─ x: fixture  cleanup uncertain (run marsh workers reset fixture)",
        "",
      ].join("\n"),
    );
    // The flat form: jobs only, in the same order; a branch's job names its split as PARENT.
    assert.equal(
      formatJobsText(FOREST, { kind: "all" }, NOW),
      [
        "ID        STARTED  STATE      EXIT  RUN    PARENT    COMMAND",
        "r1root00  5s ago   running    -     4.0s   -         claude",
        "r2kid000  2s ago   queued     -     -      r1root00  codex",
        "f1a00000  20s ago  running    -     19.0s  -         codex exec a",
        "f1b00000  20s ago  finished   2     4.0s   -         codex exec b",
        "j1shell0  4m ago   finished   0     9.0s   sp1aaaaa  claude -p 'fix it'",
        "j2try000  5m ago   finished   1     1m23s  sp1aaaaa  codex exec try",
        "j3child0  4m ago   finished   0     4.0s   j2try000  pi -p check",
        "j4nest00  4m ago   cancelled  130   9.0s   sp2bbbbb  fixture",
        "g1old000  2d ago   uncertain  -     -      gone0000  fixture  cleanup uncertain (run marsh workers reset fixture)",
        "",
      ].join("\n"),
    );
    // A session's listing: the trees rooted in it.
    assert.deepEqual(
      formatJobsText(FOREST, { kind: "session", session: "sess2" }, NOW, { tree: true }).split("\n")
        .map((l) => l.slice(0, 8)),
      ["ID      ", "r1root00", "r2kid000", ""],
    );
    // A shell-only split is a tree of the drawn form but holds no job for the flat one.
    const shellOnly: ListedSplit = {
      ...SPLITS[0]!,
      id: "sp3ccccc3333",
      sessionId: "sess3",
      state: "run",
      status: null,
      finishedMs: null,
      createdMs: NOW - 10 * S,
      branches: [
        branch("s", {
          kind: "shell",
          command: "make",
          state: "pending",
          status: null,
          exitCode: null,
          startedMs: null,
          finishedMs: null,
        }),
      ],
    };
    const lone = buildForest([], [shellOnly]);
    assert.equal(
      formatJobsText(lone, { kind: "session", session: "sess3" }, NOW, { tree: true }),
      [
        "ID          STARTED  STATE    EXIT  RUN    COMMAND",
        "sp3ccccc    10s ago  running  -     10.0s  split (s)",
        "sp3ccccc/s  10s ago  queued   -     -      └─ s: make",
        "",
      ].join("\n"),
    );
    assert.equal(
      formatJobsText(lone, { kind: "session", session: "sess3" }, NOW),
      "no jobs in this session\n",
    );
  },
);

Deno.test({
  name: "marsh jobs --tree --json: marsh.jobs.tree/v1 with job, split, branch and fanout nodes",
  permissions: {},
}, () => {
  type Node = Record<string, unknown> & { node: string; children: Node[] };
  const doc = jobsTreeDocument(FOREST) as { schema: string; jobs: Node[] };
  assert.equal(doc.schema, "marsh.jobs.tree/v1");
  // Roots newest first, whether or not they run.
  assert.deepEqual(doc.jobs.map((n) => [n.node, n.job_id ?? n.split_id ?? n.fanout_id]), [
    ["job", "r1root000000"],
    ["fanout", "fan0000011"],
    ["split", "sp1aaaaa1111"],
    ["split", "gone0000zzzz"],
  ]);
  const [, fanout, split, gone] = doc.jobs as [Node, Node, Node, Node];
  const { children: fanoutBranches, ...fanoutFields } = fanout;
  assert.deepEqual(fanoutFields, {
    node: "fanout",
    fanout_id: "fan0000011",
    session_id: "sess1",
    state: "running",
    status: null,
    created_unix_ms: NOW - 20 * S,
    finished_unix_ms: null,
  });
  assert.deepEqual(
    fanoutBranches.map(({ children, ...b }) => ({ ...b, job: children.map((c) => c.job_id) })),
    [
      {
        node: "branch",
        fanout_id: "fan0000011",
        label: "a",
        kind: "argv",
        job_id: "f1a000000000",
        state: "running",
        job: ["f1a000000000"],
      },
      {
        node: "branch",
        fanout_id: "fan0000011",
        label: "b",
        kind: "argv",
        job_id: "f1b000000000",
        state: "finished",
        job: ["f1b000000000"],
      },
    ],
  );
  const { children: branches, ...splitFields } = split;
  assert.deepEqual(splitFields, {
    node: "split",
    split_id: "sp1aaaaa1111",
    session_id: "sess1",
    state: "joined",
    status: 1,
    created_unix_ms: NOW - 300 * S,
    finished_unix_ms: NOW - 200 * S,
    parent: null,
    timing_ms: { snapshot: 12, run: 90_000 },
  });
  const [fix, tryB] = branches as [Node, Node];
  assert.deepEqual({ ...fix, children: fix.children.map((c) => c.job_id) }, {
    node: "branch",
    split_id: "sp1aaaaa1111",
    label: "fix",
    kind: "shell",
    command: "claude -p 'fix it'\nmake test",
    state: "captured",
    status: "exited 0",
    exit_code: 0,
    job_id: null,
    files: 2,
    created_unix_ms: NOW - 300 * S,
    finished_unix_ms: NOW - 210 * S,
    children: ["j1shell00000"],
  });
  // An argv branch's child is its job; the job's children are its child and its own split.
  const tryJob = tryB.children[0]!;
  assert.equal(tryB.job_id, "j2try0000000");
  assert.equal(tryJob.job_id, "j2try0000000");
  assert.deepEqual(tryJob.children.map((c) => [c.node, c.job_id ?? c.split_id]), [
    ["job", "j3child00000"],
    ["split", "sp2bbbbb2222"],
  ]);
  const nested = tryJob.children[1]!;
  assert.deepEqual(nested.parent, { split: "sp1aaaaa1111", label: "try" });
  assert.deepEqual(nested.children[0]!.children.map((c) => c.job_id), ["j4nest000000"]);
  // A split the journal forgot: drawn from its job's lineage with state null.
  assert.equal(gone.state, null);
  assert.equal(gone.status, null);
  assert.deepEqual(gone.children.map((b) => [b.node, b.label, b.kind, b.state, b.job_id]), [
    ["branch", "x", "argv", null, "g1old0000000"],
  ]);
  // Every job appears once.
  const ids: string[] = [];
  const walk = (n: Node) => {
    if (n.node === "job") ids.push(n.job_id as string);
    n.children.forEach(walk);
  };
  doc.jobs.forEach(walk);
  assert.deepEqual(ids.sort(), TREE_JOBS.map((j) => j.id).sort());
});

Deno.test({ name: "marsh jobs inside a job: only its own subtree", permissions: {} }, () => {
  const own = findJob(FOREST, "j2try0000000");
  assert.ok(own);
  assert.equal(
    formatJobsText([own], { kind: "all" }, NOW, { tree: true }),
    [
      "ID        STARTED  STATE      EXIT  RUN    COMMAND",
      "j2try000  5m ago   finished   1     1m23s  codex exec try",
      "j3child0  4m ago   finished   0     4.0s   ├─ pi -p check",
      "sp2bbbbb  4m ago   cancelled  130   -      └─ split (n)",
      "j4nest00  4m ago   cancelled  130   9.0s      └─ n: fixture",
      "",
    ].join("\n"),
  );
  assert.deepEqual(
    (jobsDocument([own]) as { jobs: { job_id: string }[] }).jobs.map((j) => j.job_id),
    ["j2try0000000", "j3child00000", "j4nest000000"],
  );
  assert.equal(findJob(FOREST, "nope"), null);
});

Deno.test({ name: "marsh jobs show: lineage and children, text and JSON", permissions: {} }, () => {
  const n = findJob(FOREST, "j2try0000000")!;
  const shown = { status: "exited 1", container: "c".repeat(64) };
  assert.equal(
    formatJobShow(n, shown, NOW),
    [
      "job:       j2try0000000",
      "command:   codex exec try",
      "state:     finished",
      "status:    exited 1",
      "exit:      1",
      "cleanup:   removed",
      "started:   5m ago",
      "run:       1m23s",
      "parent:    split:sp1aaaaa1111/try",
      "root:      j2try0000000",
      "depth:     1",
      "spawn:     codex pi",
      "split:     sp1aaaaa1111/try",
      // Its own child and its split's branch job, in launch order.
      "children:  j3child00000 j4nest000000",
      "",
    ].join("\n"),
  );
  const doc = jobShowJson(n, shown);
  assert.deepEqual(doc.lineage, {
    parent: "split:sp1aaaaa1111/try",
    root: "j2try0000000",
    depth: 1,
    spawn: ["codex", "pi"],
    split: "sp1aaaaa1111",
    label: "try",
    children: ["j3child00000", "j4nest000000"],
  });
  assert.equal(doc.status, "exited 1");
  assert.equal(doc.container, "c".repeat(64));
  assert.equal(doc.job_id, "j2try0000000");
  const kid = findJob(FOREST, "r2kid0000000")!;
  const text = formatJobShow(kid, { status: null, container: null }, NOW);
  assert.match(text, /\nspawn: {5}-\n/);
  assert.match(text, /\nchildren: {2}-\n$/);
});

Deno.test({
  name: "marsh jobs: a root job after a join says which split it consumes",
  permissions: {},
}, () => {
  const j = listed("cons0000", {
    command: "codex",
    args: ["exec", "apply it"],
    lineage: {
      parent: "session:sess1",
      root: "cons0000",
      depth: 1,
      spawn: [],
      consumes: "sp1aaaaa1111",
    },
  });
  assert.equal(
    formatJobsText(buildForest([j], []), { kind: "all" }, NOW, { tree: true }).split("\n")[1],
    "cons0000  1m ago   finished  0     9.0s  codex exec 'apply it'  (consumes split sp1aaaaa1111)",
  );
});

Deno.test({
  name: "marsh jobs: records that point at each other are each listed once",
  permissions: {},
}, () => {
  // Admission never writes these; a damaged journal must still list, and end.
  const a = listed("aaaa00000000", {
    lineage: { parent: "job:bbbb00000000", root: "aaaa00000000", depth: 2, spawn: [] },
  });
  const b = listed("bbbb00000000", {
    createdMs: NOW - 50 * S,
    lineage: { parent: "job:aaaa00000000", root: "aaaa00000000", depth: 2, spawn: [] },
  });
  const self = listed("cccc00000000", {
    lineage: { parent: "job:cccc00000000", root: "cccc00000000", depth: 1, spawn: [] },
  });
  const forest = buildForest([a, b, self], []);
  assert.deepEqual(jobsOf(forest).map((j) => j.id).sort(), [a.id, b.id, self.id]);
  const text = formatJobsText(forest, { kind: "all" }, NOW, { tree: true });
  assert.equal(text.split("\n").length, 5, text);
});
