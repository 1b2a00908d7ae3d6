import assert from "node:assert/strict";
import { encodeConfig, parseSupervisorLine, signalName, SupervisorError } from "./supervisor.ts";

Deno.test({ name: "supervisor lines parse to messages", permissions: "none" }, () => {
  assert.deepEqual(parseSupervisorLine("launched 12 subreaper"), {
    kind: "launched",
    pid: 12,
    mechanism: "subreaper",
    cgroup: null,
  });
  assert.deepEqual(parseSupervisorLine("launched 12 cgroup /sys/fs/cgroup/my dir/marsh/a"), {
    kind: "launched",
    pid: 12,
    mechanism: "cgroup",
    cgroup: "/sys/fs/cgroup/my dir/marsh/a",
  });
  assert.deepEqual(parseSupervisorLine("exited code 3"), { kind: "exited", code: 3, signal: null });
  assert.deepEqual(parseSupervisorLine("exited signal 9"), {
    kind: "exited",
    code: null,
    signal: "SIGKILL",
  });
  assert.deepEqual(parseSupervisorLine("settled 0"), { kind: "settled", cgroupRemoved: false });
  assert.deepEqual(parseSupervisorLine("settled 1 2097152 0"), {
    kind: "settled",
    cgroupRemoved: true,
    relayed: [2097152, 0],
  });
  // "sleep 1000", and a command line with a newline and a tab in it.
  assert.deepEqual(parseSupervisorLine("lingering 3 41 736c6565702031303030 7 610a0962"), {
    kind: "lingering",
    total: 3,
    processes: [{ pid: 41, command: "sleep 1000" }, { pid: 7, command: "a??b" }],
  });
  assert.deepEqual(parseSupervisorLine("fail cannot enter /x: No such file or directory"), {
    kind: "fail",
    message: "cannot enter /x: No such file or directory",
  });
  for (
    const bad of [
      "",
      "launched",
      "launched x subreaper",
      "launched 1 cgroup",
      "launched 1 subreaper /x",
      "exited code",
      "exited code 1000",
      "settled 2",
      "settled 1 5",
      "settled 1 5 x",
      "lingering",
      "lingering 0",
      "lingering 1",
      "lingering 1 41",
      "lingering 1 41 7",
      "lingering 1 41 73 42 73",
      "lingering 2 0 73",
      "lingering 1 41 73 ",
      `lingering 20 ${Array.from({ length: 17 }, (_, i) => `${i + 1} 73`).join(" ")}`,
      "hello",
    ]
  ) {
    assert.throws(() => parseSupervisorLine(bad), SupervisorError, bad);
  }
});

Deno.test({ name: "signal numbers get their names", permissions: "none" }, () => {
  assert.equal(signalName(2), "SIGINT");
  assert.equal(signalName(9), "SIGKILL");
  assert.equal(signalName(15), "SIGTERM");
  assert.equal(signalName(99), "SIG99");
});

Deno.test({
  name: "the config is a length, then NUL-terminated fields; NUL refused",
  permissions: "none",
}, () => {
  const text = new TextDecoder().decode(encodeConfig({
    mode: "auto",
    attempt: "a",
    cwd: "/f",
    stdin: null,
    script: "echo 'x=y'",
    env: { A: "1=2", B: "" },
  }));
  const nl = text.indexOf("\n");
  const body = text.slice(nl + 1);
  assert.equal(Number(text.slice(0, nl)), new TextEncoder().encode(body).length);
  const fields = body.split("\0");
  assert.equal(fields.pop(), "");
  assert.deepEqual(fields.slice(0, 8), [
    "marsh-supervisor/4",
    "auto",
    "a",
    "",
    "/f",
    "",
    "",
    "echo 'x=y'",
  ]);
  assert.deepEqual(fields.slice(9, 14), ["", "", "", "0", "0"], "no FIFOs, no argv");
  assert.equal(fields[14], "0", "no view steps");
  assert.deepEqual(fields.slice(15), ["A=1=2", "B="]);
  const inNs = new TextDecoder().decode(encodeConfig({
    mode: "auto",
    attempt: "a",
    cwd: "/f",
    namespace: 4242,
    stdin: null,
    script: "true",
    env: {},
  }));
  assert.equal(inNs.slice(inNs.indexOf("\n") + 1).split("\0")[5], "4242");
  // A view: its step count, then (step, source, target) triples, then the env.
  const viewed = new TextDecoder().decode(encodeConfig({
    mode: "auto",
    attempt: "a",
    cwd: "/p",
    stdin: null,
    script: "true",
    env: { A: "1" },
    view: [
      { step: "bind", source: "/p/.marsh/split/s/a", target: "/p" },
      { step: "tmpfs", source: "", target: "/p/.marsh" },
    ],
  }));
  assert.deepEqual(viewed.slice(viewed.indexOf("\n") + 1).split("\0").slice(14, -1), [
    "2",
    "bind",
    "/p/.marsh/split/s/a",
    "/p",
    "tmpfs",
    "",
    "/p/.marsh",
    "A=1",
  ]);
  // An operation: its FIFOs and their wait, then argv's count and elements, before the view.
  const op = new TextDecoder().decode(encodeConfig({
    mode: "auto",
    attempt: "a",
    cwd: "/p",
    stdin: null,
    script: "",
    argv: ["printf", "%s\n", "a b", ""],
    fifos: { stdin: "/c/io/1/in", stdout: "/c/io/1/out", stderr: "/c/io/1/err", waitMs: 10_000 },
    env: { A: "1" },
  }));
  assert.deepEqual(op.slice(op.indexOf("\n") + 1).split("\0").slice(9, -1), [
    "/c/io/1/in",
    "/c/io/1/out",
    "/c/io/1/err",
    "10000",
    "4",
    "printf",
    "%s\n",
    "a b",
    "",
    "0",
    "A=1",
  ]);
  assert.throws(
    () =>
      encodeConfig({ mode: "auto", attempt: "a", cwd: "/f", stdin: null, script: "\0", env: {} }),
    SupervisorError,
  );
  assert.throws(
    () =>
      encodeConfig({
        mode: "auto",
        attempt: "a",
        cwd: "/f",
        stdin: null,
        script: "",
        argv: ["a\0"],
        env: {},
      }),
    SupervisorError,
  );
});
