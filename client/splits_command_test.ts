/**
 * `marsh splits`, `marsh status` and `marsh daemon` through the real
 * launcher and CLI, against the stand-in daemon of `_fake_daemon.ts` (the
 * real daemon is built in parallel; the end-to-end tests through it live in
 * `tests/`).
 */
import assert from "node:assert/strict";
import type { StatusReply } from "../protocol/daemon.ts";
import {
  cliTestPermissions as permissions,
  FakeDaemon,
  manifest,
  marsh,
  spawnMarsh,
  tempHome,
} from "./_fake_daemon.ts";
import { formatSplits } from "./splits_command.ts";

const kept = manifest("S1", [
  { label: "a", files: 2 },
  { label: "b", state: "failed", status: "failed: capacity", code: 125, files: 0 },
  { label: "c", state: "uncertain", status: undefined, job_id: "J7", trust: "untrusted" },
], { state: "kept", reason: "branch b failed", cwd: "src" });
const child = manifest("S2", [{ label: "x", kind: "argv", placement: "kit:codex", files: 1 }], {
  parent: { split: "S1", label: "c" },
  depth: 2,
  created_unix_ms: Date.UTC(2025, 0, 2, 3, 5, 0),
});

const LISTING = [
  "S1  kept  2025-01-02T03:04:05.000Z  /work/p/src",
  "  a  captured  shell-vm  exited 0  2 files",
  "  b  failed  shell-vm  failed: capacity  0 files",
  "  c  uncertain  shell-vm  -  0 files  job J7  untrusted",
  "  reason: branch b failed",
  "    S2  await  2025-01-02T03:05:00.000Z  /work/p  from S1:c",
  "      x  captured  kit:codex  exited 0  1 file",
  "",
].join("\n");

Deno.test({ name: "formatSplits prints the tree", permissions: {} }, () => {
  assert.equal(formatSplits([child, kept]), LISTING);
  assert.equal(formatSplits([]), "no splits\n");
});

Deno.test({
  name: "formatSplits names what a running branch's shell left running, and since when",
  permissions: {},
}, () => {
  const processes = Array.from({ length: 16 }, (_, i) => ({ pid: 100 + i, command: `job ${i}` }));
  const running = manifest("S3", [
    {
      label: "a",
      state: "running",
      status: undefined,
      code: undefined,
      files: 0,
      lingering: {
        since_unix_ms: Date.UTC(2025, 0, 2, 3, 4, 6),
        processes: processes.slice(0, 1),
        more: 0,
      },
    },
    {
      label: "b",
      state: "running",
      status: undefined,
      code: undefined,
      files: 0,
      lingering: { since_unix_ms: Date.UTC(2025, 0, 2, 3, 4, 7), processes, more: 2 },
    },
  ], { state: "run" });
  assert.equal(
    formatSplits([running]),
    [
      "S3  run  2025-01-02T03:04:05.000Z  /work/p",
      "  a  running  shell-vm  -  0 files",
      "    its shell exited at 2025-01-02T03:04:06.000Z; 1 process it started still runs:",
      "      100  job 0",
      "  b  running  shell-vm  -  0 files",
      "    its shell exited at 2025-01-02T03:04:07.000Z; 18 processes it started still run:",
      ...processes.map((p) => `      ${p.pid}  ${p.command}`),
      "      and 2 more",
      "",
    ].join("\n"),
  );
});

Deno.test({ name: "splits lists as text and as JSON", permissions }, async () => {
  await using home = await tempHome();
  await using daemon = await FakeDaemon.listen(`${home.path}/marshd.sock`);
  const answer = (async () => {
    for (const id of [undefined, "S1"]) {
      const conn = await daemon.accept();
      const req = await conn.expect("splits.list");
      assert.equal(req.id, id);
      await conn.send({ v: 1, t: "splits", splits: [kept, child] });
    }
  })();
  const text = await marsh(["splits"], { home: home.path, stdin: "null" });
  const json = await marsh(["splits", "--json", "S1"], { home: home.path, stdin: "null" });
  await answer;
  assert.equal(text.code, 0, text.stderr);
  assert.equal(text.text, LISTING);
  assert.equal(json.code, 0, json.stderr);
  assert.deepEqual(JSON.parse(json.text), { splits: [kept, child] });
});

Deno.test(
  { name: "splits cancel and rm send the request; refusals are exit codes", permissions },
  async () => {
    await using home = await tempHome();
    await using daemon = await FakeDaemon.listen(`${home.path}/marshd.sock`);
    const answer = (async () => {
      let conn = await daemon.accept();
      assert.deepEqual(await conn.next(), { v: 1, t: "splits.cancel", id: "S1" });
      await conn.send({ v: 1, t: "ok", message: "split S1: cancelling 2 branches" });
      conn = await daemon.accept();
      assert.deepEqual(await conn.next(), { v: 1, t: "splits.rm", id: "S1" });
      await conn.send({ v: 1, t: "ok" });
      conn = await daemon.accept();
      await conn.expect("splits.rm");
      await conn.send({ v: 1, t: "error", code: 2, message: "split S3: no such split" });
    })();
    let r = await marsh(["splits", "cancel", "S1"], { home: home.path, stdin: "null" });
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.text, "split S1: cancelling 2 branches\n");
    r = await marsh(["splits", "rm", "S1"], { home: home.path, stdin: "null" });
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.text, "split S1: removed\n");
    r = await marsh(["splits", "rm", "S3"], { home: home.path, stdin: "null" });
    assert.equal(r.code, 2);
    assert.equal(r.stderr, "marsh splits rm: split S3: no such split\n");
    await answer;
    r = await marsh(["splits", "rm"], { home: home.path, stdin: "null" });
    assert.equal(r.code, 2);
    assert.equal(
      r.stderr,
      "marsh splits rm: missing required argument 'ID' (see `marsh splits rm --help`)\n",
    );
  },
);

const STATUS: StatusReply = {
  v: 1,
  t: "status",
  daemon: { pid: 4242, home: "/h", started_unix_ms: Date.UTC(2025, 0, 2) },
  splits: { active: 1, awaiting: 2, kept: 3 },
  forks: { strategy: "overlay", reason: "the daemon may mount", policy: "auto" },
  view: { view: "project", reason: "root: a private mount namespace" },
  processes: { running: 2, refused: 5, held: 1 },
};

Deno.test({ name: "status and daemon status with a daemon", permissions }, async () => {
  await using home = await tempHome();
  await using daemon = await FakeDaemon.listen(`${home.path}/marshd.sock`);
  const answer = (async () => {
    for (let i = 0; i < 4; i++) {
      const conn = await daemon.accept();
      await conn.expect("status");
      await conn.send(STATUS);
    }
  })();
  let r = await marsh(["status"], { home: home.path, stdin: "null" });
  assert.equal(r.code, 0, r.stderr);
  assert.equal(
    r.text,
    "daemon: running (pid 4242, since 2025-01-02T00:00:00.000Z)\ncontrol dir: /h\n" +
      "splits: 1 active, 2 awaiting, 3 kept\nforks: overlay (the daemon may mount)\n" +
      "shell branches: project view (root: a private mount namespace)\n" +
      "processes: 2 running, 5 refused, 1 held\n",
  );
  r = await marsh(["status", "--json"], { home: home.path, stdin: "null" });
  assert.equal(r.code, 0, r.stderr);
  assert.deepEqual(JSON.parse(r.text), {
    daemon: STATUS.daemon,
    splits: STATUS.splits,
    forks: STATUS.forks,
    view: STATUS.view,
    processes: { running: 2, refused: 5, held: 1 },
  });
  r = await marsh(["daemon", "status"], { home: home.path, stdin: "null" });
  assert.equal(r.code, 0, r.stderr);
  assert.equal(
    r.text,
    "marshd: running (pid 4242, since 2025-01-02T00:00:00.000Z), control dir /h\n",
  );
  r = await marsh(["daemon", "start"], { home: home.path, stdin: "null" });
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.text, "marshd already running (pid 4242)\n");
  await answer;
});

Deno.test({ name: "daemon stop waits until the socket stops answering", permissions }, async () => {
  await using home = await tempHome();
  const daemon = await FakeDaemon.listen(`${home.path}/marshd.sock`);
  const run = spawnMarsh(["daemon", "stop"], { home: home.path, stdin: "null" });
  const conn = await daemon.accept();
  await conn.expect("daemon.stop");
  await conn.send({ v: 1, t: "ok" });
  await conn.close();
  // Still answering for a moment: the CLI keeps polling.
  await new Promise((resolve) => setTimeout(resolve, 300));
  await daemon.close();
  const r = await run.done;
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.text, "marshd stopped\n");
});
