/**
 * Lineage and `marsh jobs` (docs/rules.md, "Lineage"): the lineage JSON,
 * argument cutting, and golden listings in text and `marsh.jobs/v1`.
 */

import assert from "node:assert/strict";
import {
  commandText,
  cutArgs,
  formatJobsText,
  jobsDocument,
  jobsTreeDocument,
  lineageJson,
  type ListedJob,
  runTime,
  scopedJobs,
  shellQuote,
  startedAgo,
} from "./job_lineage.ts";

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

Deno.test(
  { name: "lineage: JSON with its optional fields only where they apply", permissions: {} },
  () => {
    assert.deepEqual(lineageJson({ parent: "session:s", root: "r", depth: 1, spawn: ["a"] }), {
      parent: "session:s",
      root: "r",
      depth: 1,
      spawn: ["a"],
    });
    assert.deepEqual(
      JSON.stringify(lineageJson({
        parent: "job:p",
        root: "r",
        depth: 2,
        spawn: [],
        split: "sp",
        label: "a",
        deadlineMs: 5,
        parentDeadline: true,
        consumes: "sp0",
        fanout: "f/a",
      }, ["c1", "c2"])),
      `{"parent":"job:p","root":"r","depth":2,"spawn":[],"split":"sp","label":"a","deadline_unix_ms":5,"parent_deadline":true,"consumes":"sp0","fanout":"f/a","children":["c1","c2"]}`,
    );
    assert.equal(
      "parent_deadline" in
        lineageJson({ parent: "session:s", root: "r", depth: 1, spawn: [], parentDeadline: false }),
      false,
    );
  },
);

Deno.test(
  { name: "lineage: the first 16 arguments, each cut to 200 characters", permissions: {} },
  () => {
    const many = Array.from({ length: 20 }, (_, i) => `a${i}`);
    assert.deepEqual(cutArgs(many), many.slice(0, 16));
    assert.deepEqual(
      cutArgs(["x".repeat(199), "y".repeat(200), "z".repeat(201)]).map((a) => a.length),
      [199, 200, 200],
    );
    // Characters, not UTF-16 units: an emoji is never cut in half.
    const emoji = "😀".repeat(201);
    assert.equal([...cutArgs([emoji])[0]!].length, 200);
    // Not UTF-8 (a lone surrogate): replaced, as a lossy decoding would.
    assert.deepEqual(cutArgs(["a\ud800b"]), ["a\ufffdb"]);
    assert.deepEqual(cutArgs([]), []);
  },
);

Deno.test(
  { name: "lineage: STARTED, RUN and COMMAND as the listing writes them", permissions: {} },
  () => {
    assert.deepEqual(
      [0, 59_999, 60_000, 3_599_999, 3_600_000, 86_399_999, 86_400_000].map((d) =>
        startedAgo(NOW - d, NOW)
      ),
      ["0s ago", "59s ago", "1m ago", "59m ago", "1h ago", "23h ago", "1d ago"],
    );
    assert.deepEqual(
      [0, 12_345, 59_999, 60_000, 133_000, 3_599_999, 3_600_000, 3_900_000, 93_600_000].map(
        runTime,
      ),
      ["0.0s", "12.3s", "59.9s", "1m00s", "2m13s", "59m59s", "1h00m", "1h05m", "26h00m"],
    );
    assert.deepEqual(["a", "a b", "", "it's", "x=1", "$HOME", "-p"].map(shellQuote), [
      "a",
      "'a b'",
      "''",
      `'it'\\''s'`,
      "x=1",
      "'$HOME'",
      "-p",
    ]);
    assert.equal(commandText("codex", ["exec", "review it"]), "codex exec 'review it'");
    const long = commandText("fixture", ["x".repeat(100)]);
    assert.equal([...long].length, 64);
    assert.equal(long, `fixture ${"x".repeat(55)}…`);
    assert.equal(
      commandText("f", ["x".repeat(62)]),
      `f ${"x".repeat(62)}`,
      "64 exactly is not cut",
    );
  },
);

Deno.test({ name: "marsh jobs --all: the golden listing", permissions: {} }, () => {
  assert.equal(
    formatJobsText(JOBS, { kind: "all" }, NOW),
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
    formatJobsText(JOBS, { kind: "session", session: "sess2" }, NOW),
    [
      "ID        STARTED  STATE     EXIT  RUN    PARENT    COMMAND",
      "bbbb1111  30m ago  finished  0     2m12s  5p1i7000  fixture make test",
      "",
    ].join("\n"),
  );
  assert.equal(
    formatJobsText(JOBS, { kind: "session", session: "nobody" }, NOW),
    "no jobs in this session\n",
  );
  assert.equal(formatJobsText([], { kind: "host" }, NOW), "no jobs recorded\n");
  assert.equal(formatJobsText([], { kind: "all" }, NOW), "no jobs recorded\n");
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
  const scoped = scopedJobs([...old, ...JOBS], { kind: "host" }, NOW);
  assert.deepEqual(scoped.jobs.map((j) => j.id.slice(0, 8)), [
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
    formatJobsText([...old, ...JOBS], { kind: "host" }, NOW).endsWith(
      "\nold2xxxx  12h ago  cancelled  -     -      -         fixture\n" +
        "(4 older job trees not shown; marsh jobs --all lists every job)\n",
    ),
  );
  const running = listed("zzzz0000", { createdMs: NOW - 9 * 86_400_000, state: "queued" });
  assert.equal(
    scopedJobs([...old, running], { kind: "host" }, NOW).jobs[0]!.id,
    "zzzz0000",
    "a queued tree first, whatever its age",
  );
});

Deno.test({ name: "marsh jobs --json: the marsh.jobs/v1 document", permissions: {} }, () => {
  const doc = jobsDocument(JOBS) as { schema: string; jobs: Record<string, unknown>[] };
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
      formatJobsText([...JOBS, SIBLING], { kind: "all" }, NOW, { tree: true }),
      [
        "ID        STARTED  STATE      EXIT  RUN    COMMAND",
        "a1b2c3d4  2m ago   running    -     2m03s  claude -p 'fix the failing test'",
        "c0ffee00  1m ago   finished   0     48.7s  ├─ codex exec 'review the patch'",
        "5eed00bb  50s ago  failed     125   -      │  └─ shell -c 'echo '\\''hi'\\'' && sleep 1'",
        "d00d0000  40s ago  finished   0     1.0s   └─ pi --version",
        "bbbb1111  30m ago  finished   0     2m12s  fixture make test",
        `99887766  2d ago   uncertain  -     1h02m  fixture sh -c 'for i in $(seq 1 100); do echo "$i"; done > out.…  cleanup uncertain (run marsh workers reset fixture)`,
        "",
      ].join("\n"),
    );
    const old = Array.from(
      { length: 6 },
      (_, i) => listed(`old${i}xxxxxx`, { createdMs: NOW - (10 + i) * 3_600_000 }),
    );
    assert.ok(
      formatJobsText(old, { kind: "host" }, NOW, { tree: true }).endsWith(
        "(1 older job trees not shown; marsh jobs --tree --all lists every job)\n",
      ),
    );
  },
);

Deno.test({
  name: "marsh jobs --tree --json: marsh.jobs.tree/v1 job nodes, roots newest first",
  permissions: {},
}, () => {
  const doc = jobsTreeDocument([...JOBS, SIBLING]) as {
    schema: string;
    jobs: { job_id: string; node: string; children: { job_id: string; children: unknown[] }[] }[];
  };
  assert.equal(doc.schema, "marsh.jobs.tree/v1");
  // Newest root first, whether or not it runs.
  assert.deepEqual(doc.jobs.map((n) => n.job_id), ["a1b2c3d4e5f6", "bbbb1111cccc", "99887766aabb"]);
  const root = doc.jobs[0]!;
  assert.equal(root.node, "job");
  assert.deepEqual(root.children.map((c) => c.job_id), ["c0ffee00aa11", "d00d00000000"]);
  assert.deepEqual(
    JSON.stringify(root.children[0]!.children),
    `[{"node":"job","job_id":"5eed00bb2222","session_id":"sess1","command":"shell","args":["-c","echo 'hi' && sleep 1"],"state":"failed","cleanup":"removed","exit_code":125,"created_unix_ms":${
      NOW - 50_000
    },"finished_unix_ms":${
      NOW - 49_000
    },"lineage":{"parent":"job:c0ffee00aa11","root":"a1b2c3d4e5f6","depth":3,"spawn":[]},"children":[]}]`,
  );
});
