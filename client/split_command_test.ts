/**
 * `marsh split` through the real launcher and CLI, against the stand-in
 * daemon of `_fake_daemon.ts` (the real daemon is built in parallel; the
 * end-to-end tests through it live in `tests/`).
 */
import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import { SPOOL_CHUNK, type SpoolFrame } from "../protocol/daemon.ts";
import {
  cliTestPermissions as permissions,
  enc,
  FakeDaemon,
  manifest,
  marsh,
  root,
  spawnMarsh,
  tempHome,
} from "./_fake_daemon.ts";
import { parseArgvBranches, parseShellBranch, splitAtArgvBranches } from "./split_command.ts";
import { CliError } from "./cli_error.ts";

const HANDLE = '{"marsh_split":1,"id":"S1"}\n';

Deno.test({ name: "parseShellBranch splits at the first =", permissions: {} }, () => {
  assert.deepEqual(parseShellBranch("a=echo x=y"), {
    kind: "shell",
    label: "a",
    script: "echo x=y",
  });
  assert.deepEqual(parseShellBranch("a="), { kind: "shell", label: "a", script: "" });
  assert.throws(() => parseShellBranch("nolabel"), CliError);
  assert.throws(() => parseShellBranch("=make"), CliError);
});

Deno.test(
  { name: "splitAtArgvBranches keeps argv words away from options", permissions: {} },
  () => {
    assert.deepEqual(splitAtArgvBranches(["split", "-b", "a=1", ":::", "x", "cmd", "-x", ":::"]), {
      head: ["split", "-b", "a=1"],
      argvParts: [":::", "x", "cmd", "-x", ":::"],
    });
    assert.deepEqual(splitAtArgvBranches(["split", "-n"]), {
      head: ["split", "-n"],
      argvParts: [],
    });
  },
);

Deno.test(
  { name: "split sends -b branches, cwd and env; prints the handle", permissions },
  async () => {
    await using home = await tempHome();
    await using daemon = await FakeDaemon.listen(`${home.path}/marshd.sock`);
    const cwd = await Deno.makeTempDir({ prefix: "marsh-cwd-" });
    try {
      const run = spawnMarsh(
        ["split", "-b", "a=echo 'x = y'", "-bb=true", "--branch=c=", "--branch", "d=exit 3"],
        { home: home.path, cwd, stdin: "null", env: { MARSH_TEST_MARKER: "m1" } },
      );
      const conn = await daemon.accept();
      const create = await conn.expect("split.create");
      assert.deepEqual(create.branches, [
        { kind: "shell", label: "a", script: "echo 'x = y'" },
        { kind: "shell", label: "b", script: "true" },
        { kind: "shell", label: "c", script: "" },
        { kind: "shell", label: "d", script: "exit 3" },
      ]);
      assert.equal(create.cwd, await Deno.realPath(cwd));
      assert.equal(create.env.MARSH_TEST_MARKER, "m1");
      // /dev/null is not a terminal: read to its (immediate) end.
      assert.equal(create.spool, true);
      await conn.expect("spool.end");
      await conn.send({ v: 1, t: "split.accepted", id: "S1" });
      await conn.send({ v: 1, t: "notice", message: "d: exited 3" });
      await conn.send({
        v: 1,
        t: "split.done",
        id: "S1",
        code: 3,
        message: "split S1: branch d exited 3",
        manifest: manifest("S1"),
      });
      const r = await run.done;
      assert.equal(r.code, 3, r.stderr);
      assert.equal(r.text, HANDLE);
      assert.equal(r.stderr, "d: exited 3\nsplit S1: branch d exited 3\n");
      assert.deepEqual(conn.bad, []);
    } finally {
      await Deno.remove(cwd, { recursive: true });
    }
  },
);

Deno.test({ name: "parseArgvBranches takes each ::: group verbatim", permissions: {} }, () => {
  assert.deepEqual(parseArgvBranches([]), []);
  assert.deepEqual(
    parseArgvBranches([":::", "a", "codex", "exec", "-x", "--model=y", ":::", "b", "pi", "", "-b"]),
    [
      { kind: "argv", label: "a", argv: ["codex", "exec", "-x", "--model=y"] },
      { kind: "argv", label: "b", argv: ["pi", "", "-b"] },
    ],
  );
  for (
    const bad of [[":::"], [":::", "a"], [":::", "a", "x", ":::"], [":::", "", "x"], [
      ":::",
      ":::",
      "a",
      "x",
    ]]
  ) {
    assert.throws(
      () => parseArgvBranches(bad),
      (e: unknown) =>
        e instanceof CliError && e.code === 2 &&
        /needs a label and a command after :::/.test(e.message),
      JSON.stringify(bad),
    );
  }
});

Deno.test(
  { name: "split sends -b and ::: branches in declaration order, argv verbatim", permissions },
  async () => {
    await using home = await tempHome();
    await using daemon = await FakeDaemon.listen(`${home.path}/marshd.sock`);
    const run = spawnMarsh(
      ["split", "-n", "-b", "t=make test", ":::", "r", "codex", "exec", "-b", "nope", "--", "x y"],
      { home: home.path, stdin: "null" },
    );
    const conn = await daemon.accept();
    const create = await conn.expect("split.create");
    assert.deepEqual(create.branches, [
      { kind: "shell", label: "t", script: "make test" },
      { kind: "argv", label: "r", argv: ["codex", "exec", "-b", "nope", "--", "x y"] },
    ]);
    assert.equal(create.spool, false);
    await conn.send({ v: 1, t: "split.accepted", id: "S1" });
    await conn.send({ v: 1, t: "split.done", id: "S1", code: 0, manifest: manifest("S1") });
    const r = await run.done;
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.text, HANDLE);
  },
);

Deno.test(
  { name: "split: a ::: without LABEL CMD is refused, nothing sent", permissions },
  async () => {
    await using home = await tempHome();
    await using daemon = await FakeDaemon.listen(`${home.path}/marshd.sock`);
    for (
      const args of [
        ["split", "-n", ":::"],
        ["split", ":::", "a"],
        ["split", "-b", "t=make test", ":::", "r", "cmd", ":::", "x"],
      ]
    ) {
      const r = await marsh(args, { home: home.path, stdin: "null" });
      assert.equal(r.code, 2, r.stderr);
      assert.match(r.stderr, /^marsh split: argv branch \d needs a label and a command after :::/);
      assert.equal(r.text, "");
    }
    assert.equal(daemon.connections.length, 0);
  },
);

Deno.test(
  { name: "split: usage errors exit 2 with the fix, nothing sent", permissions },
  async () => {
    await using home = await tempHome();
    await using daemon = await FakeDaemon.listen(`${home.path}/marshd.sock`);
    const cases: [string[], RegExp][] = [
      [["split"], /^marsh split: no branches; usage: marsh split \[-n\] \[-b LABEL='command'\]/],
      [["split", "-n"], /no branches/],
      [["split", "-b", "noequals"], /^marsh split: -b needs LABEL=STRING, got "noequals"; e\.g\./],
      [["split", "-b", "=make"], /^marsh split: -b needs a label before "="/],
      [["split", "-b"], /^marsh split: option .* argument missing \(see `marsh split --help`\)\n$/],
      [["split", "-x", "-b", "a=1"], /^marsh split: unknown option '-x'/],
      [
        ["split", "make", "test"],
        /^marsh split: unexpected argument "make"; give each branch as -b/,
      ],
    ];
    for (const [args, want] of cases) {
      const r = await marsh(args, { home: home.path, stdin: "null" });
      assert.equal(r.code, 2, `${args.join(" ")}: ${r.stderr}`);
      assert.match(r.stderr, want);
      assert.equal(r.stderr.trimEnd().split("\n").length, 1, r.stderr);
    }
    assert.equal(daemon.connections.length, 0);
  },
);

Deno.test({ name: "split --help explains with examples", permissions }, async () => {
  await using home = await tempHome();
  const r = await marsh(["split", "--help"], { home: home.path, stdin: "null" });
  assert.equal(r.code, 0);
  assert.match(r.text, /Usage: marsh split \[-n\] \[-b LABEL=STRING\]/);
  assert.match(r.text, /Examples:\n {2}git diff \| marsh split -b tests=/);
});

async function spoolOf(conn: Awaited<ReturnType<FakeDaemon["accept"]>>): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  for (;;) {
    const frame = await conn.next();
    if (frame?.t === "spool.end") break;
    assert.equal(frame?.t, "spool", JSON.stringify(frame)?.slice(0, 100));
    const bytes = Buffer.from((frame as SpoolFrame).data, "base64");
    assert.ok(bytes.length > 0 && bytes.length <= SPOOL_CHUNK, `chunk of ${bytes.length}`);
    parts.push(new Uint8Array(bytes));
  }
  return new Uint8Array(Buffer.concat(parts));
}

Deno.test({ name: "split streams piped stdin intact, binary included", permissions }, async () => {
  await using home = await tempHome();
  await using daemon = await FakeDaemon.listen(`${home.path}/marshd.sock`);
  const input = new Uint8Array(SPOOL_CHUNK * 2 + 12345);
  for (let i = 0; i < input.length; i++) input[i] = (i * 7919 + (i >> 9)) & 0xff;
  input.set([0, 0xff, 0x0a, 0x0d, 0xc3], 0);
  const run = spawnMarsh(["split", "-b", "a=cat"], { home: home.path, stdin: input });
  const conn = await daemon.accept();
  assert.equal((await conn.expect("split.create")).spool, true);
  assert.deepEqual(await spoolOf(conn), input);
  await conn.send({ v: 1, t: "split.done", id: "S1", code: 0, manifest: manifest("S1") });
  const r = await run.done;
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.text, HANDLE);
});

Deno.test({ name: "split -n sends no spool even with piped stdin", permissions }, async () => {
  await using home = await tempHome();
  await using daemon = await FakeDaemon.listen(`${home.path}/marshd.sock`);
  const run = spawnMarsh(["split", "-n", "-b", "a=true"], {
    home: home.path,
    stdin: enc.encode("not for the branches\n"),
  });
  const conn = await daemon.accept();
  assert.equal((await conn.expect("split.create")).spool, false);
  await conn.send({ v: 1, t: "split.done", id: "S1", code: 0, manifest: manifest("S1") });
  const r = await run.done;
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.text, HANDLE);
  await conn.ended;
  assert.deepEqual(conn.received.map((f) => f.t), ["split.create"]);
});

Deno.test({
  name: "split on a terminal: no spool, and the handle is printed to the terminal",
  permissions,
}, async () => {
  await using home = await tempHome();
  await using daemon = await FakeDaemon.listen(`${home.path}/marshd.sock`);
  // script(1) gives the CLI a pty for stdin and stdout.
  const script = new Deno.Command("script", {
    args: ["-qec", `${root}marsh split -b a=true`, "/dev/null"],
    clearEnv: true,
    env: { PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin", MARSH_HOME: home.path, TERM: "dumb" },
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const conn = await daemon.accept();
  assert.equal((await conn.expect("split.create")).spool, false);
  await conn.send({ v: 1, t: "split.done", id: "S1", code: 0, manifest: manifest("S1") });
  const out = await script.output();
  assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
  assert.equal(new TextDecoder().decode(out.stdout), HANDLE.replace("\n", "\r\n"));
  await conn.ended;
  assert.deepEqual(conn.received.map((f) => f.t), ["split.create"]);
});

Deno.test(
  { name: "split: an error reply is the status, with no handle", permissions },
  async () => {
    await using home = await tempHome();
    await using daemon = await FakeDaemon.listen(`${home.path}/marshd.sock`);
    const run = spawnMarsh(["split", "-n", "-b", "bad label=true"], {
      home: home.path,
      stdin: "null",
    });
    const conn = await daemon.accept();
    await conn.expect("split.create");
    await conn.send({ v: 1, t: "error", code: 2, message: 'invalid label "bad label"' });
    await conn.close();
    const r = await run.done;
    assert.equal(r.code, 2);
    assert.equal(r.text, "");
    assert.equal(r.stderr, 'marsh split: invalid label "bad label"\n');
  },
);

Deno.test({ name: "split: a daemon that disappears is reported", permissions }, async () => {
  await using home = await tempHome();
  await using daemon = await FakeDaemon.listen(`${home.path}/marshd.sock`);
  const run = spawnMarsh(["split", "-n", "-b", "a=true"], { home: home.path, stdin: "null" });
  const conn = await daemon.accept();
  await conn.expect("split.create");
  await conn.send({ v: 1, t: "split.accepted", id: "S9" });
  await conn.close();
  const r = await run.done;
  assert.equal(r.code, 125);
  assert.equal(r.text, "");
  assert.equal(
    r.stderr,
    // Issue 15: the root client of a tree whose end is unknown says `job uncertain`.
    "marsh split: job uncertain: the daemon closed the connection before split S9 finished; see marsh splits S9\n",
  );
});

Deno.test(
  { name: "split: Ctrl-C sends one cancel and waits for the end", permissions },
  async () => {
    await using home = await tempHome();
    await using daemon = await FakeDaemon.listen(`${home.path}/marshd.sock`);
    const run = spawnMarsh(["split", "-b", "a=sleep 100"], { home: home.path, stdin: "null" });
    const conn = await daemon.accept();
    await conn.expect("split.create");
    await conn.expect("spool.end");
    run.child.kill("SIGINT");
    await conn.expect("split.cancel");
    await conn.send({ v: 1, t: "notice", message: "a: cancelled" });
    await conn.send({
      v: 1,
      t: "split.done",
      id: "S1",
      code: 130,
      message: "split S1 cancelled; removed",
      manifest: manifest("S1", [{ label: "a", state: "cancelled", status: "cancelled" }]),
    });
    const r = await run.done;
    assert.equal(r.code, 130, r.stderr);
    assert.equal(r.text, HANDLE);
    assert.equal(
      r.stderr,
      "marsh split: cancelling; Ctrl-C again to stop waiting\na: cancelled\nsplit S1 cancelled; removed\n",
    );
    await conn.ended;
    assert.deepEqual(conn.received.map((f) => f.t), ["split.create", "spool.end", "split.cancel"]);
  },
);

Deno.test({
  name: "split: a second Ctrl-C stops waiting with 130 and drops the stream",
  permissions,
}, async () => {
  await using home = await tempHome();
  await using daemon = await FakeDaemon.listen(`${home.path}/marshd.sock`);
  // A spool that never ends: the first Ctrl-C ends it early, then cancels.
  const { child, done } = spawnMarsh(["split", "-b", "a=true"], {
    home: home.path,
    stdin: "piped",
  });
  const writer = child.stdin.getWriter();
  const chunk = new Uint8Array(SPOOL_CHUNK).fill(0x61);
  await writer.write(chunk);
  const conn = await daemon.accept();
  await conn.expect("split.create");
  const first = await conn.expect("spool");
  assert.deepEqual(new Uint8Array(Buffer.from(first.data, "base64")), chunk);
  child.kill("SIGINT");
  await conn.expect("spool.end");
  await conn.expect("split.cancel");
  child.kill("SIGINT");
  const r = await done;
  assert.equal(r.code, 130, r.stderr);
  assert.equal(r.text, "");
  await conn.ended;
  assert.deepEqual(conn.received.map((f) => f.t), [
    "split.create",
    "spool",
    "spool.end",
    "split.cancel",
  ]);
  await writer.close().catch((error) => {
    if (!(error instanceof Deno.errors.BrokenPipe)) throw error;
  });
});
