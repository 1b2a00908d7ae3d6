/**
 * Random and malformed frames on the daemon's socket get an error frame or a
 * closed connection, never a crash: the same daemon answers afterwards.
 */
import assert from "node:assert/strict";
import { PERMISSIONS, Sandbox, show } from "./_acceptance.ts";

const root = new URL("../", import.meta.url).pathname;

Deno.test({ name: "daemon: random frames never crash it", permissions: PERMISSIONS }, async () => {
  await using sb = await Sandbox.create();
  const started = await sb.marsh(["daemon", "start"]);
  assert.equal(started.code, 0, show(started));
  const pid = sb.daemonPid();
  assert.ok(pid);
  const socket = `${sb.home}/marshd.sock`;
  const out = await new Deno.Command(Deno.env.get("MARSH_DENO") ?? Deno.execPath(), {
    args: [
      "run",
      "--quiet",
      `--allow-net=unix:${socket}`,
      `--allow-read=${socket}`,
      `--allow-write=${socket}`,
      `--config=${root}deno.json`,
      `${root}tests/probes/fuzz_client.ts`,
      socket,
      "300",
    ],
    stdout: "piped",
    stderr: "piped",
  }).output();
  const dec = new TextDecoder();
  assert.equal(out.code, 0, dec.decode(out.stderr));
  const report = JSON.parse(dec.decode(out.stdout));
  assert.equal(report.cases, 300);
  // Only a well-formed status or splits request may get a real answer.
  for (const t of report.otherTypes) assert.ok(["status", "splits", "ok"].includes(t), t);
  assert.ok(report.errors > 0, "malformed frames get error frames");
  const status = await sb.marsh(["status", "--json"]);
  assert.equal(status.code, 0, show(status));
  assert.equal(JSON.parse(status.stdout).daemon.pid, pid, "the same daemon still answers");
});
