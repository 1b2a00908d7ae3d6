import assert from "node:assert/strict";
import fc from "fast-check";
import { assertProperty } from "../tests/_property.ts";
import {
  boundMessage,
  MAX_ARGV_BYTES,
  MAX_ENV_BYTES,
  MAX_ENV_ENTRIES,
  MAX_GRACE_MS,
  MAX_MESSAGE,
  MAX_OUTPUT_LIMIT,
  MAX_PATH_BYTES,
  MAX_SCRIPT_BYTES,
  parseWorkerEvent,
  parseWorkerRequest,
  type WorkerEvent,
  WorkerProtocolError,
} from "./worker.ts";

const launch = {
  v: 1,
  t: "launch",
  attempt: "s1.b-2_x",
  script: "echo hi",
  cwd: "/tmp/fork",
  env: { PATH: "/usr/bin" },
  stdin: null,
  stdout: "/ctl/a/stdout",
  stderr: "/ctl/a/stderr",
};

function refused(x: unknown, fragment?: string): void {
  assert.throws(
    () => parseWorkerRequest(x),
    (e: unknown) => e instanceof WorkerProtocolError && (!fragment || e.message.includes(fragment)),
    JSON.stringify(x)?.slice(0, 200),
  );
}

Deno.test(
  { name: "a launch is accepted as sent, with the limit when given", permissions: "none" },
  () => {
    assert.deepEqual(parseWorkerRequest(launch), launch);
    assert.deepEqual(parseWorkerRequest({ ...launch, outputLimit: 0 }), {
      ...launch,
      outputLimit: 0,
    });
    assert.deepEqual(
      parseWorkerRequest({ ...launch, stdin: "/ctl/spool", outputLimit: MAX_OUTPUT_LIMIT }),
      { ...launch, stdin: "/ctl/spool", outputLimit: MAX_OUTPUT_LIMIT },
    );
    assert.deepEqual(parseWorkerRequest({ ...launch, socket: "/ctl/b/00.sock" }), {
      ...launch,
      socket: "/ctl/b/00.sock",
    });
    // Unknown fields are dropped, not passed on.
    assert.deepEqual(parseWorkerRequest({ ...launch, extra: 1 }), launch);
  },
);

Deno.test({
  name: "attempt ids are safe path components of at most 128 characters",
  permissions: "none",
}, () => {
  assert.equal(parseWorkerRequest({ ...launch, attempt: "a".repeat(128) }).t, "launch");
  for (const bad of ["a".repeat(129), "", ".", "..", ".hidden", "a/b", "a b", "é", "-x", 7]) {
    refused({ ...launch, attempt: bad }, "attempt");
  }
});

Deno.test({
  name: "the script is bounded in UTF-8 bytes, as execve counts it",
  permissions: "none",
}, () => {
  const max = "x".repeat(MAX_SCRIPT_BYTES);
  assert.equal(parseWorkerRequest({ ...launch, script: max }).t, "launch");
  refused({ ...launch, script: `${max}x` }, "script");
  // 43 690 three-byte characters are 131 070 bytes; one more is over.
  const wide = "€".repeat(Math.floor(MAX_SCRIPT_BYTES / 3));
  assert.equal(parseWorkerRequest({ ...launch, script: wide }).t, "launch");
  refused({ ...launch, script: `${wide}€` }, "script");
  refused({ ...launch, script: "echo \0" }, "NUL");
});

Deno.test({
  name: "paths are absolute, bounded and without NUL; stdin may be null",
  permissions: "none",
}, () => {
  for (const key of ["cwd", "stdout", "stderr", "stdin"]) {
    refused({ ...launch, [key]: "relative/path" }, "absolute");
    refused({ ...launch, [key]: "/a\0b" }, "NUL");
    refused({ ...launch, [key]: `/${"p".repeat(MAX_PATH_BYTES)}` }, key);
    assert.equal(
      parseWorkerRequest({ ...launch, [key]: `/${"p".repeat(MAX_PATH_BYTES - 1)}` }).t,
      "launch",
    );
  }
  for (const key of ["cwd", "stdout", "stderr"]) refused({ ...launch, [key]: null }, key);
  refused({ ...launch, stdin: undefined }, "stdin");
});

Deno.test({
  name: "the environment is bounded and holds only names and string values",
  permissions: "none",
}, () => {
  refused({ ...launch, env: [] }, "env");
  refused({ ...launch, env: { A: 1 } }, "env value");
  refused({ ...launch, env: { "A=B": "x" } }, "not a variable name");
  refused({ ...launch, env: { "": "x" } }, "not a variable name");
  refused({ ...launch, env: { A: "x\0y" } }, "NUL");
  const many = Object.fromEntries(
    Array.from({ length: MAX_ENV_ENTRIES }, (_, i) => [`V${i}`, ""]),
  );
  assert.equal(parseWorkerRequest({ ...launch, env: many }).t, "launch");
  refused({ ...launch, env: { ...many, EXTRA: "" } }, "entries");
  // "A=" + value + NUL: exactly the byte budget, then one over.
  const value = "v".repeat(MAX_ENV_BYTES - 3);
  assert.equal(parseWorkerRequest({ ...launch, env: { A: value } }).t, "launch");
  refused({ ...launch, env: { A: `${value}v` } }, "larger");
});

Deno.test({ name: "limits and graces are integers in range", permissions: "none" }, () => {
  refused({ ...launch, outputLimit: -1 }, "outputLimit");
  refused({ ...launch, socket: "b/00.sock" }, "socket");
  refused({ ...launch, socket: 1 }, "socket");
  refused({ ...launch, outputLimit: 1.5 }, "outputLimit");
  refused({ ...launch, outputLimit: MAX_OUTPUT_LIMIT + 1 }, "outputLimit");
  refused({ ...launch, outputLimit: "16" }, "outputLimit");
  assert.deepEqual(parseWorkerRequest({ v: 1, t: "cancel", attempt: "a" }), {
    v: 1,
    t: "cancel",
    attempt: "a",
  });
  assert.deepEqual(parseWorkerRequest({ v: 1, t: "cancel", attempt: "a", graceMs: 0 }), {
    v: 1,
    t: "cancel",
    attempt: "a",
    graceMs: 0,
  });
  refused({ v: 1, t: "cancel", attempt: "a", graceMs: MAX_GRACE_MS + 1 }, "graceMs");
  refused({ v: 1, t: "cancel" }, "attempt");
  assert.deepEqual(parseWorkerRequest({ v: 1, t: "shutdown" }), { v: 1, t: "shutdown" });
  assert.deepEqual(parseWorkerRequest({ v: 1, t: "shutdown", graceMs: 5 }), {
    v: 1,
    t: "shutdown",
    graceMs: 5,
  });
});

Deno.test({ name: "other versions, types and shapes are refused", permissions: "none" }, (t) => {
  for (const bad of [null, [], "launch", 1, { ...launch, v: 2 }, { ...launch, v: "1" }]) {
    refused(bad, "version");
  }
  refused({ v: 1, t: "exec" }, "unknown request type");
  refused({ v: 1 }, "unknown request type");
  assertProperty(
    t,
    fc.property(fc.jsonValue(), (x) => {
      try {
        parseWorkerRequest(x);
      } catch (error) {
        assert.ok(error instanceof WorkerProtocolError, String(error));
      }
      try {
        parseWorkerEvent(x);
      } catch (error) {
        assert.ok(error instanceof WorkerProtocolError, String(error));
      }
    }),
    { numRuns: 1000 },
  );
  assertProperty(
    t,
    fc.property(
      fc.record({
        v: fc.constant(1),
        t: fc.constantFrom("launch", "cancel", "shutdown"),
        attempt: fc.string(),
        script: fc.string(),
        cwd: fc.string(),
        env: fc.dictionary(fc.string(), fc.jsonValue()),
        stdin: fc.option(fc.string()),
        stdout: fc.string(),
        stderr: fc.string(),
        graceMs: fc.integer(),
        outputLimit: fc.double(),
      }, { requiredKeys: ["v", "t"] }),
      (x) => {
        try {
          parseWorkerRequest(x);
        } catch (error) {
          assert.ok(error instanceof WorkerProtocolError, String(error));
        }
      },
    ),
    { numRuns: 1000 },
  );
});

Deno.test(
  { name: "every event the worker sends parses back to itself", permissions: "none" },
  () => {
    const events: WorkerEvent[] = [
      {
        v: 1,
        t: "launched",
        attempt: "a",
        pid: 10,
        supervisor: 9,
        mechanism: "cgroup",
        cgroup: "/sys/fs/cgroup/marsh/a",
      },
      { v: 1, t: "launched", attempt: "a", pid: 10, supervisor: 9, mechanism: "subreaper" },
      { v: 1, t: "exited", attempt: "a", code: 3, signal: null },
      { v: 1, t: "exited", attempt: "a", code: null, signal: "SIGKILL" },
      { v: 1, t: "settled", attempt: "a", stdoutBytes: 0, stderrBytes: 16 },
      {
        v: 1,
        t: "lingering",
        attempt: "a",
        since: 1_700_000_000_000,
        processes: [{ pid: 4242, command: "sleep 1000" }, { pid: 4243, command: "[kworker]" }],
        more: 3,
      },
      { v: 1, t: "output-limit", attempt: "a", bytes: 1001 },
      { v: 1, t: "error", attempt: "a", message: "cannot enter /x: No such file or directory" },
      { v: 1, t: "error", message: "dropped a frame: frame is not UTF-8 JSON" },
    ];
    for (const e of events) assert.deepEqual(parseWorkerEvent(JSON.parse(JSON.stringify(e))), e);
    const bad: unknown[] = [
      { v: 1, t: "launched", attempt: "a", pid: 10, supervisor: 9, mechanism: "cgroup" },
      { v: 1, t: "launched", attempt: "a", pid: 0, supervisor: 9, mechanism: "subreaper" },
      { v: 1, t: "launched", attempt: "a", pid: 1, supervisor: 9, mechanism: "vm" },
      { v: 1, t: "exited", attempt: "a", code: null, signal: null },
      { v: 1, t: "exited", attempt: "a", code: 1, signal: "SIGINT" },
      { v: 1, t: "exited", attempt: "a", code: 256, signal: null },
      { v: 1, t: "exited", attempt: "a", code: null, signal: "kill" },
      { v: 1, t: "settled", attempt: "a", stdoutBytes: -1, stderrBytes: 0 },
      {
        v: 1,
        t: "lingering",
        attempt: "a",
        since: 1,
        processes: [{ pid: 0, command: "x" }],
        more: 0,
      },
      { v: 1, t: "lingering", attempt: "a", since: 1, processes: [{ pid: 5 }], more: 0 },
      { v: 1, t: "lingering", attempt: "a", since: 1, processes: "5", more: 0 },
      {
        v: 1,
        t: "lingering",
        attempt: "a",
        since: 1,
        processes: Array.from({ length: 17 }, (_, i) => ({ pid: i + 1, command: "x" })),
        more: 0,
      },
      {
        v: 1,
        t: "lingering",
        attempt: "a",
        since: 1,
        processes: [{ pid: 5, command: "x".repeat(257) }],
        more: 0,
      },
      { v: 1, t: "lingering", attempt: "a", since: 1, processes: [], more: -1 },
      { v: 1, t: "output-limit", attempt: "a", bytes: 0 },
      { v: 1, t: "error", attempt: "../x", message: "m" },
      { v: 1, t: "ready" },
    ];
    for (const x of bad) assert.throws(() => parseWorkerEvent(x), WorkerProtocolError);
  },
);

Deno.test({ name: "error messages are cut to the bound", permissions: "none" }, () => {
  assert.equal(boundMessage("short"), "short");
  assert.equal(boundMessage("x".repeat(MAX_MESSAGE)), "x".repeat(MAX_MESSAGE));
  const cut = boundMessage("x".repeat(MAX_MESSAGE + 1));
  assert.equal(cut.length, MAX_MESSAGE);
  assert.ok(cut.endsWith("…"));
  assert.equal(parseWorkerEvent({ v: 1, t: "error", message: cut }).t, "error");
});

Deno.test({
  name: "a launch may name the namespace to run in, by a plausible pid only",
  permissions: "none",
}, () => {
  assert.deepEqual(parseWorkerRequest({ ...launch, namespace: { pid: 4242 } }), {
    ...launch,
    namespace: { pid: 4242 },
  });
  // Unknown fields inside are dropped too.
  assert.deepEqual(parseWorkerRequest({ ...launch, namespace: { pid: 2, user: 0 } }), {
    ...launch,
    namespace: { pid: 2 },
  });
  for (const bad of [null, 7, "7", [7], {}, { pid: 1 }, { pid: 0 }, { pid: -3 }, { pid: 1.5 }]) {
    refused({ ...launch, namespace: bad }, "namespace");
  }
  refused({ ...launch, namespace: { pid: 2 ** 22 + 1 } }, "namespace.pid");
  refused({ ...launch, namespace: { pid: "12" } }, "namespace.pid");
});

const kitLaunch = {
  v: 1,
  t: "kit-launch",
  job: "j1",
  attempt: "s1-a-x1",
  split: "s1",
  label: "a",
  kit: {
    name: "fixture",
    image: "sha256:" + "0".repeat(64),
    entrypoint: ["env"],
    network: "none",
    env: ["FOO"],
    wallS: 60,
    home: "/ctl/kits/fixture/home",
  },
  argv: ["fixture", "sh", "-c", "true"],
  env: { FOO: "1" },
  fork: "/p/.marsh/split/s1/a",
  cwd: "/p/.marsh/split/s1/a/sub",
  admin: "/p/.marsh/split/s1/.admin/a",
  objectDirs: ["/p/.marsh/split/s1/store.git/objects", "/p/.git/objects"],
  stdin: null,
  stdout: "/ctl/attempts/s1-a-x1/stdout",
  stderr: "/ctl/attempts/s1-a-x1/stderr",
  outputLimit: 16 * 1024 * 1024,
  user: null,
  cap: null,
};

Deno.test({
  name: "a kit launch is a KitLaunch in an envelope; parseKitLaunch's refusals are the frame's",
  permissions: "none",
}, () => {
  assert.deepEqual(parseWorkerRequest(kitLaunch), kitLaunch);
  assert.deepEqual(parseWorkerRequest({ ...kitLaunch, graceMs: 250 }), {
    ...kitLaunch,
    graceMs: 250,
  });
  refused({ ...kitLaunch, argv: ["other", "x"] }, "argv[0] must be the kit name");
  refused({ ...kitLaunch, cwd: "/elsewhere" }, "cwd must be the fork");
  refused({ ...kitLaunch, attempt: "../x" }, "attempt");
  refused({ ...kitLaunch, graceMs: MAX_GRACE_MS + 1 }, "graceMs");
  assert.deepEqual(parseWorkerRequest({ v: 1, t: "kit-reset", id: "r1", kit: "fixture" }), {
    v: 1,
    t: "kit-reset",
    id: "r1",
    kit: "fixture",
  });
  refused({ v: 1, t: "kit-reset", id: "r1", kit: "Bad Name" }, "kit must match");
  refused({ v: 1, t: "kit-reset", kit: "fixture" }, "id");
});

Deno.test({
  name: "kit events: launched with a container, exited by the wall clock, unreaped, reset done",
  permissions: "none",
}, () => {
  const c = "a".repeat(64);
  const events: WorkerEvent[] = [
    { v: 1, t: "launched", attempt: "a", container: c },
    { v: 1, t: "exited", attempt: "a", code: null, signal: "SIGINT", wall: true },
    { v: 1, t: "unreaped", attempt: "a", container: c, message: "container may still exist" },
    { v: 1, t: "unreaped", attempt: "a", container: null, message: "create's outcome unknown" },
    {
      v: 1,
      t: "kit-reset-done",
      id: "r1",
      removed: [{ container: c, attempt: "a", job: "j", split: "s", label: "l" }],
      live: [],
      failed: [{
        container: "b".repeat(64),
        attempt: null,
        job: null,
        split: null,
        label: null,
        message: "busy",
      }],
    },
    { v: 1, t: "kit-reset-done", id: "r2", removed: [], live: [], failed: [], error: "no engine" },
  ];
  for (const e of events) assert.deepEqual(parseWorkerEvent(JSON.parse(JSON.stringify(e))), e);
  const bad: unknown[] = [
    { v: 1, t: "launched", attempt: "a", container: "not-hex" },
    { v: 1, t: "exited", attempt: "a", code: 0, signal: null, wall: false },
    { v: 1, t: "unreaped", attempt: "a", container: "x", message: "m" },
    { v: 1, t: "unreaped", attempt: "a", container: c },
    { v: 1, t: "kit-reset-done", id: "r", removed: [{ container: c }], live: [], failed: [] },
    { v: 1, t: "kit-reset-done", id: "r", removed: [], live: [] },
  ];
  for (const x of bad) assert.throws(() => parseWorkerEvent(x), WorkerProtocolError);
});

Deno.test({
  name: "a launch's view: clean paths, the fork and marsh's dirs in .marsh/split, cwd in the root",
  permissions: "none",
}, () => {
  const view = {
    root: "/p",
    fork: "/p/.marsh/split/s1/a",
    admin: "/p/.marsh/split/s1/.admin/a",
    objectDirs: ["/p/.marsh/split/s1/store.git/objects", "/p/.git/objects"],
    control: "/state/marsh",
  };
  const viewed = { ...launch, cwd: "/p/sub", view };
  assert.deepEqual(parseWorkerRequest(viewed), viewed);
  assert.deepEqual(parseWorkerRequest({ ...viewed, cwd: "/p", view: { ...view, admin: null } }), {
    ...viewed,
    cwd: "/p",
    view: { ...view, admin: null },
  });
  const bad = (over: Record<string, unknown>, fragment: string, cwd = "/p/sub") =>
    refused({ ...launch, cwd, view: { ...view, ...over } }, fragment);
  bad({ root: "p" }, "view.root");
  bad({ root: "/" }, "view.root");
  bad({ root: "/p/../q" }, "view.root");
  bad({ fork: "/q/.marsh/split/s1/a" }, "view.fork must lie in /p/.marsh/split");
  bad({ fork: "/p/.marsh/split" }, "view.fork must lie in /p/.marsh/split");
  bad({ admin: "/p/.marsh/layers/x" }, "view.admin");
  bad({ objectDirs: ["/elsewhere/objects"] }, "view.objectDirs must lie in");
  bad({ objectDirs: "/p/.git/objects" }, "view.objectDirs must be a list");
  bad({ objectDirs: Array(17).fill("/p/.git/objects") }, "view.objectDirs must be a list");
  bad({ control: "/p/state" }, "view.control must lie outside view.root");
  bad({ control: "/" }, "view.control");
  bad({}, "cwd must lie in view.root", "/q");
  bad({}, "cwd must lie in view.root", "/p/.marsh/split");
  bad({}, "cwd must be an absolute path without", "/p/sub/../..");
  refused({ ...launch, cwd: "/p", view: "/p" }, "view must be an object");
});

const op = {
  v: 1,
  t: "launch",
  attempt: "op-1",
  argv: ["sh", "-c", 'echo "$1"', "a b", "'q'\n$(x)"],
  cwd: "/p/sub",
  env: { PATH: "/usr/bin" },
  stdio: {
    stdin: "/state/marsh/io/r1/in",
    stdout: "/state/marsh/io/r1/out",
    stderr: "/state/marsh/io/r1/err",
  },
  view: {
    root: "/p",
    fork: "/p/.marsh/session/fix/op/op-1/merged",
    admin: null,
    objectDirs: [],
    control: "/state/marsh",
  },
};

Deno.test({
  name:
    "an operation's launch: argv instead of script, FIFOs in <control>/io/<id>/ instead of files",
  permissions: "none",
}, () => {
  assert.deepEqual(parseWorkerRequest(op), op);
  const { stdio: _, ...noStdio } = op;
  const withFiles = { ...noStdio, stdin: null, stdout: "/ctl/a/out", stderr: "/ctl/a/err" };
  assert.deepEqual(parseWorkerRequest(withFiles), withFiles);
  const { argv: __, ...noArgv } = op;
  assert.deepEqual(parseWorkerRequest({ ...noArgv, script: "cat" }), { ...noArgv, script: "cat" });
  // Exactly one program, exactly one kind of stdio.
  refused({ ...op, script: "true" }, "exactly one of script and argv");
  refused(noArgv, "exactly one of script and argv");
  refused({ ...op, stdout: "/ctl/a/out" }, "stdout is not used with stdio");
  refused({ ...op, stdin: null }, "stdin is not used with stdio");
  refused({ ...op, outputLimit: 1 }, "outputLimit is not used with stdio");
  // argv: model/checkpoint.ts argvProblem, at the boundary.
  refused({ ...op, argv: [] }, "argv: an operation needs a command");
  refused({ ...op, argv: "true" }, "argv must be a list of strings");
  refused({ ...op, argv: ["true", 1] }, "argv must be a list of strings");
  refused({ ...op, argv: ["a\0b"] }, "NUL");
  // JSON.stringify(["x…"]) is the string plus 4 bytes.
  const max = "x".repeat(MAX_ARGV_BYTES - 4);
  assert.deepEqual(parseWorkerRequest({ ...op, argv: [max] }), { ...op, argv: [max] });
  refused({ ...op, argv: [`${max}x`] }, "the command is too long");
  // The FIFOs.
  const fifos = (over: Record<string, unknown>, fragment: string) =>
    refused({ ...op, stdio: { ...op.stdio, ...over } }, fragment);
  fifos({ stdout: "/state/marsh/io/r2/out" }, "one directory <control dir>/io/<id>/");
  fifos({
    stdin: "/state/marsh/io/in",
    stdout: "/state/marsh/io/out",
    stderr: "/state/marsh/io/err",
  }, "one directory");
  fifos({ stderr: "/state/marsh/io/r1/out" }, "three distinct paths");
  fifos({ stdin: "io/r1/in" }, "stdio.stdin must be an absolute path");
  fifos({ stdout: "/state/marsh/io/r1/../r1/out" }, "stdio.stdout must be an absolute path");
  fifos({ stderr: undefined }, "stdio.stderr");
  refused({ ...op, stdio: "/state/marsh/io/r1" }, "stdio must be an object");
  refused({ ...op, view: { ...op.view, control: "/other" } }, "must lie in /other/io/");
  // Without a view, any <dir>/io/<id>/ will do.
  const bare = { ...op, cwd: "/p/.marsh/session/fix/op/op-1/merged" };
  delete (bare as Record<string, unknown>).view;
  assert.deepEqual(parseWorkerRequest(bare), bare);
});

Deno.test({
  name: "a view's fork is a split's or an operation's merged dir, nothing else of .marsh",
  permissions: "none",
}, () => {
  const bad = (fork: string) =>
    refused({ ...op, view: { ...op.view, fork } }, "view.fork must lie in /p/.marsh/split or be");
  for (
    const fork of [
      "/p/.marsh/session/fix/op/op-1",
      "/p/.marsh/session/fix/op/op-1/upper",
      "/p/.marsh/session/fix/view",
      "/p/.marsh/session/fix/op/op-1/merged/x",
      "/p/.marsh/session/-x/op/op-1/merged",
      "/p/.marsh/session/fix/op/Op_1/merged",
      "/p/.marsh/session/fix/ops/op-1/merged",
      "/p/.marsh/layers/x",
      "/q/.marsh/session/fix/op/op-1/merged",
    ]
  ) bad(fork);
  const other = { ...op, view: { ...op.view, fork: "/p/.marsh/session/a.b_c/op/0/merged" } };
  assert.deepEqual(parseWorkerRequest(other), other);
  // An operation's admin is still only a split's.
  refused(
    { ...op, view: { ...op.view, admin: "/p/.marsh/session/fix/op/op-1/merged" } },
    "view.admin",
  );
});

Deno.test({ name: "settled counts past the output limit for FIFOs", permissions: "none" }, () => {
  const ev = { v: 1, t: "settled", attempt: "a", stdoutBytes: 2 ** 41, stderrBytes: 0 };
  assert.deepEqual(parseWorkerEvent(ev), ev);
  assert.throws(() => parseWorkerEvent({ ...ev, stdoutBytes: -1 }), WorkerProtocolError);
});
