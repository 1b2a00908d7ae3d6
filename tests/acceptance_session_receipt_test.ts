/**
 * Acceptance (docs/checkpoints.md "An operation", step 3; DG-J03, DG-J05):
 * every operation's checkpoint carries its completeness receipt through the
 * real CLI, daemon, worker and splitfs service: what proved its process
 * tree gone (`cgroup`, or `subreaper` with `MARSH_WORKER_FORCE_SUBREAPER=1`)
 * and whether a private mount namespace made its overlay the only writable
 * view. A daemon without that namespace (`MARSH_SHELL_VIEW=fork`) runs
 * operations `relative`: a write by absolute path bypasses the overlay, and
 * the checkpoint is never called complete.
 */

import assert from "node:assert/strict";
import { PERMISSIONS, Sandbox, show } from "./_acceptance.ts";
import type { LogEntryInfo, SessionInfo } from "../protocol/daemon_session.ts";
import type { CheckpointShownReply } from "../protocol/daemon_checkpoint.ts";

async function newest(sb: Sandbox): Promise<LogEntryInfo> {
  const r = await sb.marsh(["log", "--json"]);
  assert.equal(r.code, 0, show(r));
  const [e] = (JSON.parse(r.stdout) as { entries: LogEntryInfo[] }).entries;
  assert.ok(e?.operation);
  return e;
}

async function shown(sb: Sandbox, checkpoint: string): Promise<CheckpointShownReply> {
  const r = await sb.marsh(["show", checkpoint, "--json"]);
  assert.equal(r.code, 0, show(r));
  return JSON.parse(r.stdout) as CheckpointShownReply;
}

for (const drain of ["cgroup", "subreaper"] as const) {
  Deno.test({
    name: `marsh log and show: an operation's receipt is complete (drained by its ${drain})`,
    permissions: PERMISSIONS,
  }, async () => {
    await using sb = await Sandbox.create({
      env: drain === "subreaper" ? { MARSH_WORKER_FORCE_SUBREAPER: "1" } : {},
    });
    const start = await sb.marsh(["session", "start", "fix"]);
    assert.equal(start.code, 0, show(start));
    const r = await sb.marsh(["op", "--", "sh", "-c", "echo 1 > a.txt"]);
    assert.equal(r.code, 0, show(r));
    const e = await newest(sb);
    const receipt = e.operation!.receipt;
    assert.deepEqual(receipt && { ...receipt, why: "" }, {
      complete: true,
      drain,
      view: "project",
      why: "",
    });
    assert.match(
      receipt!.why,
      /^its whole process tree was seen gone \(.*\) and a private mount namespace made its overlay the only writable view of the project$/,
    );
    const s = await shown(sb, e.checkpoint);
    assert.deepEqual(s.checkpoint.operation?.receipt, receipt);
    const text = await sb.marsh(["show", e.checkpoint]);
    assert.equal(text.code, 0, show(text));
    assert.match(text.stdout, /\nreceipt {5}complete: its whole process tree was seen gone /);
  });
}

Deno.test({
  name:
    "marsh op without a mount namespace (MARSH_SHELL_VIEW=fork): relative, a write by absolute path bypasses it, never complete",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create({ env: { MARSH_SHELL_VIEW: "fork" } });
  const start = await sb.marsh(["session", "start", "fix"]);
  assert.equal(start.code, 0, show(start));
  const sessions = await sb.marsh(["sessions", "--json"]);
  const [info] = (JSON.parse(sessions.stdout) as { sessions: SessionInfo[] }).sessions;
  // The session's own view is still the read-only overlay: its class is said exactly.
  assert.equal(info!.view_class, "virtual");
  const bypass = `${sb.project}/bypass.txt`;
  // One write by a relative path (into the overlay), one by absolute path (past it).
  const r = await sb.marsh(["op", "--", "sh", "-c", `echo in > in.txt; echo out > '${bypass}'`]);
  assert.equal(r.code, 0, show(r));
  assert.match(
    r.stderr,
    /marsh: checkpoint [0-9a-f]{64} \(1 path changed\); relative: the command saw the project by its cwd only, so a write by absolute path may have left the session\n$/,
  );
  // The absolute write reached the project itself, and is not in the checkpoint.
  assert.equal(Deno.readTextFileSync(bypass), "out\n");
  const e = await newest(sb);
  assert.deepEqual(e.paths, [{ path: "in.txt", change: "added" }]);
  assert.equal(e.operation!.view, "relative");
  assert.match(e.operation!.view_reason ?? "", /^MARSH_SHELL_VIEW=fork: /);
  const receipt = e.operation!.receipt;
  assert.equal(receipt?.complete, false);
  assert.equal(receipt?.view, "relative");
  assert.equal(receipt?.drain, "cgroup");
  assert.match(receipt!.why, /^relative: .*may have bypassed its overlay and be missing/);
  assert.deepEqual((await shown(sb, e.checkpoint)).checkpoint.operation?.receipt, receipt);
  const log = await sb.marsh(["log"]);
  assert.match(
    log.stdout,
    /\n {2}relative: it saw the project by its cwd only; a write by absolute path may have left the session\n/,
  );
  const text = await sb.marsh(["show", e.checkpoint]);
  assert.match(text.stdout, /\nreceipt {5}not complete: relative: /);
});
