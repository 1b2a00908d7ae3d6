import assert from "node:assert/strict";
import { DaemonProtocolError, parseClientFrame, parseDaemonFrame } from "./daemon.ts";

const op = {
  v: 1,
  t: "op.run",
  cwd: "/p/sub",
  session: null,
  argv: ["bash", "-c", "echo 'a b'"],
  io: "/home/me/.local/state/marsh/io/ab12",
  onCancel: "seal",
  env: { PATH: "/usr/bin" },
};

Deno.test("session frames: each request parses to itself", () => {
  const frames = [
    { v: 1, t: "session.start", cwd: "/p", name: null, from: null, withIgnored: false },
    { v: 1, t: "session.start", cwd: "/p", name: "fix", from: "ab12cd34", withIgnored: true },
    { v: 1, t: "sessions.list", cwd: "/p" },
    { v: 1, t: "session.rm", cwd: "/p", name: "fix" },
    { v: 1, t: "session.log", cwd: "/p", session: "fix", all: true },
    { v: 1, t: "session.rollback", cwd: "/p", session: null, checkpoint: "ab12cd34" },
    { v: 1, t: "session.fork", cwd: "/p", session: null, from: null, name: "try2" },
    op,
    { v: 1, t: "op.cancel" },
  ];
  for (const f of frames) assert.deepEqual(parseClientFrame(f), f);
});

Deno.test("session frames: malformed ones are refused, naming the field", () => {
  const bad: [Record<string, unknown>, RegExp][] = [
    [{ ...op, cwd: "relative" }, /op\.run frame: cwd/],
    [{ ...op, argv: [] }, /op\.run frame: argv/],
    [{ ...op, argv: ["a", 1] }, /op\.run frame: argv/],
    [{ ...op, onCancel: "keep" }, /op\.run frame: onCancel/],
    [{ ...op, io: "io/x" }, /op\.run frame: io/],
    [{ ...op, env: { A: 1 } }, /op\.run frame: env/],
    [{ ...op, session: 7 }, /op\.run frame: session/],
    [{ v: 1, t: "session.log", cwd: "/p", session: null }, /session\.log frame: all/],
    [{ v: 1, t: "session.rm", cwd: "/p", name: "" }, /session\.rm frame: name/],
    [
      { v: 1, t: "session.rollback", cwd: "/p", session: null, checkpoint: "x".repeat(4097) },
      /session\.rollback frame: checkpoint/,
    ],
  ];
  for (const [f, why] of bad) {
    assert.throws(() => parseClientFrame(f), (e: unknown) => {
      assert.ok(e instanceof DaemonProtocolError, String(e));
      assert.match(e.message, why);
      return true;
    });
  }
});

Deno.test("session replies: the shapes the CLI relies on are checked", () => {
  const done = {
    v: 1,
    t: "op.done",
    operation: "o-1",
    session: "fix",
    state: "bound",
    status: 3,
    message: "marsh: checkpoint ...",
  };
  assert.equal(parseDaemonFrame(done).t, "op.done");
  assert.throws(() => parseDaemonFrame({ ...done, status: "3" }), /malformed op\.done frame/);
  assert.throws(
    () => parseDaemonFrame({ v: 1, t: "checkpoints", session: "fix", head: "h" }),
    /malformed checkpoints frame/,
  );
  assert.throws(() => parseDaemonFrame({ v: 1, t: "sessions", root: "/p" }), /malformed sessions/);
});
