/**
 * Acceptance (docs/checkpoints.md "The store's admission gate", L0.10;
 * DG-C07, DG-R06): a checkpoint's four results are separate, each
 * observed on its own through the real CLI, daemon, worker and service.
 * The daemon is held after the bind and before the view's remount
 * (`MARSH_TEST_PAUSE_AT=op-bound`), and meanwhile:
 *
 * - **durable**: the journal's head is the new checkpoint (`sessions`,
 *   `log`), while the view still shows the old root;
 * - **native**: the project's own files are untouched until `marsh
 *   checkout`, which then writes them (the view still old);
 * - **export**: no ref holds the root until `marsh commit`, whose commit's
 *   tree is then the root id (the view still old);
 * - **visible**: the view shows the new root only once remounted (here
 *   by the restarted daemon's recovery).
 */

import assert from "node:assert/strict";
import { exists, finish, PERMISSIONS, Sandbox, show, waitFor } from "./_acceptance.ts";
import type { LogEntryInfo, SessionInfo } from "../protocol/daemon_session.ts";

async function session(sb: Sandbox): Promise<SessionInfo> {
  const r = await sb.marsh(["sessions", "--json"]);
  assert.equal(r.code, 0, show(r));
  const [s] = (JSON.parse(r.stdout) as { sessions: SessionInfo[] }).sessions;
  assert.ok(s);
  return s;
}

Deno.test({
  name:
    "a checkpoint's results are separate: durable head, native checkout, Git export, visible view",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create({ files: { "a.txt": "1\n" } });
  const started = await sb.marsh(["daemon", "start"], {
    env: { MARSH_TEST_PAUSE_AT: "op-bound" },
  });
  assert.equal(started.code, 0, show(started));
  const start = await sb.marsh(["session", "start", "fix"]);
  assert.equal(start.code, 0, show(start));
  const s0 = await session(sb);
  const op = sb.spawnMarsh(["op", "--", "sh", "-c", "echo 2 > a.txt"]);
  await waitFor("the daemon to hold after the bind", () => exists(`${sb.home}/paused-op-bound`));

  // Durable: the head moved, in the journal.
  const s1 = await session(sb);
  assert.notEqual(s1.head, s0.head, "the head moved");
  assert.notEqual(s1.root, s0.root);
  const logged = await sb.marsh(["log", "--json"]);
  const [e] = (JSON.parse(logged.stdout) as { entries: LogEntryInfo[] }).entries;
  assert.equal(e!.checkpoint, s1.head);
  assert.deepEqual(e!.paths, [{ path: "a.txt", change: "modified" }]);
  // Not visible yet: the view still shows the old root.
  assert.equal(s1.view_root, s0.root, "the view was not remounted");
  assert.equal(Deno.readTextFileSync(`${s1.view}/a.txt`), "1\n");
  // Not native: the project's files are untouched.
  assert.equal(Deno.readTextFileSync(`${sb.project}/a.txt`), "1\n");
  // Not exported: no ref.
  const none = await sb.runGit(["rev-parse", "--verify", "--quiet", "refs/heads/cp"]);
  assert.notEqual(none.code, 0, show(none));

  // Native: marsh checkout writes the project's tree; the view stays as it was.
  const co = await sb.marsh(["checkout"]);
  assert.equal(co.code, 0, show(co));
  assert.equal(Deno.readTextFileSync(`${sb.project}/a.txt`), "2\n");
  assert.equal((await session(sb)).view_root, s0.root);
  assert.equal(Deno.readTextFileSync(`${s1.view}/a.txt`), "1\n");

  // Export: marsh commit moves a ref to a commit whose tree is the root; the view stays.
  const ci = await sb.marsh(["commit", "--ref", "refs/heads/cp", "-m", "cp"]);
  assert.equal(ci.code, 0, show(ci));
  assert.equal((await sb.git("rev-parse", "refs/heads/cp^{tree}")).trim(), s1.root);
  assert.equal((await session(sb)).view_root, s0.root);

  // Visible: only a remount shows it; here the restarted daemon's recovery does.
  const pid = sb.daemonPid();
  assert.ok(pid);
  Deno.kill(pid, "SIGKILL");
  await finish(op, "the held marsh op");
  const again = await sb.marsh(["daemon", "start"]);
  assert.equal(again.code, 0, show(again));
  const s2 = await session(sb);
  assert.equal(s2.head, s1.head, "the head is what was made durable");
  assert.equal(s2.view_root, s1.root, "the view shows it now");
  assert.equal(Deno.readTextFileSync(`${s2.view}/a.txt`), "2\n");
});
