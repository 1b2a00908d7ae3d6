/**
 * `marsh join` through the real launcher and CLI, against the stand-in
 * daemon of `_fake_daemon.ts` (the real daemon is built in parallel; the
 * end-to-end tests through it live in `tests/`).
 */
import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import {
  cliTestPermissions as permissions,
  enc,
  FakeConn,
  FakeDaemon,
  manifest,
  marsh,
  spawnMarsh,
  tempHome,
} from "./_fake_daemon.ts";
import { NO_HANDLE, parseHandle, readHandle } from "./join_command.ts";

const HANDLE = '{"marsh_split":1,"id":"S1"}\n';
const SPLIT_ENV = {
  SPLIT_ID: "S1",
  SPLIT_DIR: "/work/p/.marsh/split/S1/out",
  SPLIT_MANIFEST: "/work/p/.marsh/split/S1/out/manifest.json",
  SPLIT_OBJECTS: "/work/p/.marsh/split/S1/store.git/objects",
};
/** A rendering with bytes a text path would mangle. */
const RENDERING = new Uint8Array([
  ...enc.encode("== a: exited 0\n--- a/x\n+++ b/x\n"),
  0,
  0xff,
  0x1b,
  0x0a,
]);

Deno.test({ name: "parseHandle accepts only handle lines", permissions: {} }, () => {
  assert.equal(parseHandle('{"marsh_split":1,"id":"S1"}'), "S1");
  assert.equal(parseHandle('  {"marsh_split":1,"id":"S1"}\r'), "S1");
  assert.equal(parseHandle('{"marsh_split":2,"id":"S1"}'), undefined);
  assert.equal(parseHandle('{"marsh_split":1,"id":""}'), undefined);
  assert.equal(parseHandle('{"marsh_split":1,"id":7}'), undefined);
  assert.equal(parseHandle('{"marsh_split":1,'), undefined);
  assert.equal(parseHandle("S1"), undefined);
  assert.equal(parseHandle("[1]"), undefined);
});

Deno.test({ name: "readHandle takes the last handle line", permissions: {} }, async () => {
  const text = `noise\n{"marsh_split":1,"id":"A"}\n\n{"marsh_split":1,"id":"B"}\n` +
    `${"x".repeat(10_000)}\n{"not":"a handle"}\n`;
  const bytes = enc.encode(text);
  // Delivered in small pieces, so lines cross chunk boundaries.
  const stream = new ReadableStream<Uint8Array>({
    start(c) {
      for (let i = 0; i < bytes.length; i += 7) c.enqueue(bytes.subarray(i, i + 7));
      c.close();
    },
  });
  assert.equal(await readHandle(stream), "B");
  assert.equal(
    await readHandle(ReadableStream.from([enc.encode('{"marsh_split":1,"id":"C"}')])),
    "C",
  );
  assert.equal(await readHandle(ReadableStream.from([enc.encode("nothing\n")])), undefined);
});

/** Answers a join: ready, the rendering in two chunks, rendered. */
async function render(conn: FakeConn, env: Record<string, string> = SPLIT_ENV): Promise<void> {
  await conn.send({ v: 1, t: "join.ready", manifest: manifest("S1"), env });
  await conn.send({ v: 1, t: "notice", message: "rendering S1" });
  for (const part of [RENDERING.subarray(0, 10), RENDERING.subarray(10)]) {
    await conn.send({ v: 1, t: "chunk", data: Buffer.from(part).toString("base64") });
  }
  await conn.send({ v: 1, t: "join.rendered" });
}

Deno.test({ name: "join: no handle on stdin exits 2, nothing sent", permissions }, async () => {
  await using home = await tempHome();
  await using daemon = await FakeDaemon.listen(`${home.path}/marshd.sock`);
  for (const input of ["", "hello\n", '{"marsh_split":1}\n', "exited 0\n"]) {
    const r = await marsh(["join"], { home: home.path, stdin: enc.encode(input) });
    assert.equal(r.code, 2);
    assert.equal(r.stderr, `${NO_HANDLE}\n`);
  }
  assert.equal(daemon.connections.length, 0);
});

Deno.test({ name: "join: usage errors exit 2 with the fix", permissions }, async () => {
  await using home = await tempHome();
  const cases: [string[], string][] = [
    [["join", "cat"], "marsh join: put `--` before the consumer command: marsh join -- cat\n"],
    [["join", "--"], "marsh join: `--` needs a command after it: marsh join -- CMD ARGS...\n"],
    [["join", "--bogus"], "marsh join: unknown option '--bogus' (see `marsh join --help`)\n"],
  ];
  for (const [args, want] of cases) {
    const r = await marsh(args, { home: home.path, stdin: enc.encode(HANDLE) });
    assert.equal(r.code, 2);
    assert.equal(r.stderr, want);
  }
});

Deno.test(
  { name: "bare join writes the rendering and releases with null", permissions },
  async () => {
    await using home = await tempHome();
    await using daemon = await FakeDaemon.listen(`${home.path}/marshd.sock`);
    const run = spawnMarsh(["join"], {
      home: home.path,
      stdin: enc.encode(`{"marsh_split":1,"id":"OLD"}\nsome output\n${HANDLE}`),
    });
    const conn = await daemon.accept();
    assert.deepEqual(await conn.expect("split.join"), {
      v: 1,
      t: "split.join",
      id: "S1",
      keep: false,
      consumer: false,
      terminal: false,
    });
    await render(conn);
    assert.deepEqual(await conn.expect("join.release"), {
      v: 1,
      t: "join.release",
      consumerStatus: null,
    });
    await conn.send({
      v: 1,
      t: "join.released",
      removed: false,
      message: "split S1 kept: branch b failed; marsh splits rm S1 removes it",
    });
    const r = await run.done;
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(r.stdout, RENDERING);
    assert.equal(
      r.stderr,
      "rendering S1\nsplit S1 kept: branch b failed; marsh splits rm S1 removes it\n",
    );
  },
);

// Issue 11 §3: the line is the manifest after the release, saying what it did (was: before it).
Deno.test({
  name: "join --json --keep prints the released manifest with released and reason",
  permissions,
}, async () => {
  await using home = await tempHome();
  await using daemon = await FakeDaemon.listen(`${home.path}/marshd.sock`);
  const run = spawnMarsh(["join", "--json", "--keep"], {
    home: home.path,
    stdin: enc.encode(HANDLE),
  });
  const conn = await daemon.accept();
  const join = await conn.expect("split.join");
  assert.equal(join.keep, true);
  assert.equal(join.consumer, false);
  await render(conn);
  assert.equal((await conn.expect("join.release")).consumerStatus, null);
  const after = { ...manifest("S1"), state: "kept" as const, reason: "--keep was given" };
  await conn.send({
    v: 1,
    t: "join.released",
    removed: false,
    reason: "--keep was given",
    manifest: after,
    message: "split S1 kept: --keep was given; remove it with: marsh splits rm S1",
  });
  const r = await run.done;
  assert.equal(r.code, 0, r.stderr);
  assert.deepEqual(JSON.parse(r.text), { ...after, released: "kept" });
  assert.match(r.text, /^\{[^\n]*\}\n$/, "one line");
  assert.equal(
    r.stderr,
    "rendering S1\nsplit S1 kept: --keep was given; remove it with: marsh splits rm S1\n",
  );
});

Deno.test({
  name: "join --json against a daemon that sends no manifest or reason: released only",
  permissions,
}, async () => {
  await using home = await tempHome();
  await using daemon = await FakeDaemon.listen(`${home.path}/marshd.sock`);
  const run = spawnMarsh(["join", "--json"], { home: home.path, stdin: enc.encode(HANDLE) });
  const conn = await daemon.accept();
  await conn.expect("split.join");
  await render(conn);
  await conn.expect("join.release");
  await conn.send({ v: 1, t: "join.released", removed: true });
  const r = await run.done;
  assert.equal(r.code, 0, r.stderr);
  assert.deepEqual(JSON.parse(r.text), { ...manifest("S1"), released: "removed" });
});

Deno.test({
  name: "join --json releases without waiting for the rendering it does not print",
  permissions,
}, async () => {
  await using home = await tempHome();
  await using daemon = await FakeDaemon.listen(`${home.path}/marshd.sock`);
  const run = spawnMarsh(["join", "--json"], { home: home.path, stdin: enc.encode(HANDLE) });
  const conn = await daemon.accept();
  await conn.expect("split.join");
  await conn.send({ v: 1, t: "join.ready", manifest: manifest("S1"), env: SPLIT_ENV });
  // No rendering yet: the release comes anyway (the daemon reads it after join.rendered).
  let timer: ReturnType<typeof setTimeout> | undefined;
  const release = await Promise.race([
    conn.expect("join.release"),
    new Promise<null>((resolve) => timer = setTimeout(() => resolve(null), 10_000)),
  ]);
  clearTimeout(timer);
  await conn.send({ v: 1, t: "chunk", data: Buffer.from(RENDERING).toString("base64") });
  await conn.send({ v: 1, t: "join.rendered" });
  await conn.send({ v: 1, t: "join.released", removed: true, reason: "every branch exited 0" });
  const r = await run.done;
  assert.equal(release?.consumerStatus, null, "released before the rendering");
  assert.equal(r.code, 0, r.stderr);
  assert.deepEqual(JSON.parse(r.text), {
    ...manifest("S1"),
    released: "removed",
    reason: "every branch exited 0",
  });
});

Deno.test({
  name: "join -- CMD: the rendering on stdin, SPLIT_* set, its status released and returned",
  permissions,
}, async () => {
  await using home = await tempHome();
  await using daemon = await FakeDaemon.listen(`${home.path}/marshd.sock`);
  const script = 'cat; printf "%s|%s|%s|%s|%s\\n" "$SPLIT_ID" "$SPLIT_DIR" ' +
    '"$SPLIT_MANIFEST" "$SPLIT_OBJECTS" "$MARSH_TEST_MARKER" >&2; exit 7';
  const run = spawnMarsh(["join", "--", "bash", "-c", script, "-x"], {
    home: home.path,
    stdin: enc.encode(HANDLE),
    env: { MARSH_TEST_MARKER: "kept" },
  });
  const conn = await daemon.accept();
  const join = await conn.expect("split.join");
  assert.equal(join.consumer, true);
  assert.equal(join.terminal, false);
  await render(conn);
  assert.equal((await conn.expect("join.release")).consumerStatus, 7);
  await conn.send({
    v: 1,
    t: "join.released",
    removed: false,
    message: "split S1 kept: the consumer exited 7; marsh splits rm S1 removes it",
  });
  const r = await run.done;
  assert.equal(r.code, 7, r.stderr);
  assert.deepEqual(r.stdout, RENDERING);
  assert.equal(
    r.stderr,
    "rendering S1\n" +
      `${Object.values(SPLIT_ENV).join("|")}|kept\n` +
      "split S1 kept: the consumer exited 7; marsh splits rm S1 removes it\n",
  );
});

Deno.test(
  { name: "join --json -- CMD: the manifest on stdin; 0 releases", permissions },
  async () => {
    await using home = await tempHome();
    await using daemon = await FakeDaemon.listen(`${home.path}/marshd.sock`);
    const run = spawnMarsh(["join", "--json", "--", "cat"], {
      home: home.path,
      stdin: enc.encode(HANDLE),
    });
    const conn = await daemon.accept();
    await conn.expect("split.join");
    await render(conn);
    assert.equal((await conn.expect("join.release")).consumerStatus, 0);
    await conn.send({ v: 1, t: "join.released", removed: true });
    const r = await run.done;
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.text, `${JSON.stringify(manifest("S1"))}\n`);
  },
);

Deno.test(
  { name: "join -- CMD that does not read its stdin still counts", permissions },
  async () => {
    await using home = await tempHome();
    await using daemon = await FakeDaemon.listen(`${home.path}/marshd.sock`);
    const run = spawnMarsh(["join", "--", "sh", "-c", "exec 0<&-; exit 4"], {
      home: home.path,
      stdin: enc.encode(HANDLE),
    });
    const conn = await daemon.accept();
    await conn.expect("split.join");
    await conn.send({ v: 1, t: "join.ready", manifest: manifest("S1"), env: SPLIT_ENV });
    // More than a pipe holds, so writing to the consumer meets a closed pipe.
    const big = Buffer.alloc(512 * 1024, 0x61).toString("base64");
    for (let i = 0; i < 4; i++) await conn.send({ v: 1, t: "chunk", data: big });
    await conn.send({ v: 1, t: "join.rendered" });
    assert.equal((await conn.expect("join.release")).consumerStatus, 4);
    await conn.send({ v: 1, t: "join.released", removed: false });
    const r = await run.done;
    assert.equal(r.code, 4, r.stderr);
  },
);

Deno.test(
  { name: "join -- CMD not found exits 127 and releases with 127", permissions },
  async () => {
    await using home = await tempHome();
    await using daemon = await FakeDaemon.listen(`${home.path}/marshd.sock`);
    const run = spawnMarsh(["join", "--", "marsh-no-such-command-xyz", "arg"], {
      home: home.path,
      stdin: enc.encode(HANDLE),
    });
    const conn = await daemon.accept();
    await conn.expect("split.join");
    await render(conn);
    assert.equal((await conn.expect("join.release")).consumerStatus, 127);
    await conn.send({ v: 1, t: "join.released", removed: false, message: "split S1 kept" });
    const r = await run.done;
    assert.equal(r.code, 127);
    assert.equal(r.text, "");
    assert.equal(
      r.stderr,
      "rendering S1\nmarsh join: marsh-no-such-command-xyz: command not found; check its name or PATH\nsplit S1 kept\n",
    );
  },
);

Deno.test(
  { name: "join: the daemon's refusal is the message and status", permissions },
  async () => {
    await using home = await tempHome();
    await using daemon = await FakeDaemon.listen(`${home.path}/marshd.sock`);
    const run = spawnMarsh(["join", "--", "true"], { home: home.path, stdin: enc.encode(HANDLE) });
    const conn = await daemon.accept();
    await conn.expect("split.join");
    await conn.send({
      v: 1,
      t: "error",
      code: 2,
      message: "split S1 was not created by this caller",
    });
    await conn.close();
    const r = await run.done;
    assert.equal(r.code, 2);
    assert.equal(r.stderr, "marsh join: split S1 was not created by this caller\n");
  },
);

Deno.test(
  { name: "join -- CMD: a Ctrl-C to join waits for CMD's status", permissions },
  async () => {
    await using home = await tempHome();
    await using daemon = await FakeDaemon.listen(`${home.path}/marshd.sock`);
    const marker = `${home.path}/consumer-started`;
    const run = spawnMarsh(
      ["join", "--", "sh", "-c", `cat >/dev/null; : > '${marker}'; sleep 0.5; exit 3`],
      { home: home.path, stdin: enc.encode(HANDLE) },
    );
    const conn = await daemon.accept();
    await conn.expect("split.join");
    await render(conn);
    for (;;) {
      try {
        await Deno.lstat(marker);
        break;
      } catch (error) {
        if (!(error instanceof Deno.errors.NotFound)) throw error;
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    }
    // Only join gets it here; at a terminal the consumer would get its own.
    run.child.kill("SIGINT");
    assert.equal((await conn.expect("join.release")).consumerStatus, 3);
    await conn.send({ v: 1, t: "join.released", removed: false });
    const r = await run.done;
    assert.equal(r.code, 3, r.stderr);
  },
);
