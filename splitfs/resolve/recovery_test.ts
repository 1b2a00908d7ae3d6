/**
 * Recovery through the real split-filesystem service: an apply run as its
 * own process (splitfs/apply/testdata/apply_main.ts) is killed with SIGKILL
 * mid-way; the service then brings the project to exactly the pre-state or
 * the post-state, on `recover-resolutions` or as soon as it first holds the
 * project's lock.
 */

import assert from "node:assert/strict";
import type { CreatedReply } from "../../protocol/splitfs.ts";
import type { RecoveredReply } from "../../protocol/splitfs_resolve.ts";
import { SplitfsError, SplitfsService } from "../../protocol/splitfs_client.ts";
import { exists, fingerprintDiff, sandbox } from "../_testing.ts";
import { blobId, hexOf } from "../git/tree_id.ts";
import { planOf, type Spec, treeOf, treeOfSpec, writeSpec } from "../apply/_apply_testing.ts";

const PERMS: Deno.PermissionOptions = { run: true, read: true, write: true, env: true, ffi: true };
const DRIVER = new URL("../apply/testdata/apply_main.ts", import.meta.url).pathname;
const enc = new TextEncoder();

const PRE: Spec = {
  "a.txt": { file: "a\n" },
  "b.txt": { file: "b\n" },
  "c.txt": { file: "c\n" },
  "link": { link: "a.txt" },
};
const POST: Spec = {
  "a.txt": { file: "A\n" },
  "b.txt": { file: "B\n", mode: 0o755 },
  "link": { link: "b.txt" },
  "new/d.txt": { file: "d\n" },
};

/** Writes the PRE → POST plan and its blobs as the driver reads them. */
function writeFixture(dir: string): void {
  const { plan } = planOf(PRE, POST, { scope: "git", filesOnly: true });
  Deno.writeTextFileSync(`${dir}/plan.json`, JSON.stringify(plan));
  Deno.mkdirSync(`${dir}/blobs`);
  for (const w of Object.values(POST)) {
    if (!("file" in w) || typeof w.file !== "string") continue;
    const bytes = enc.encode(w.file);
    Deno.writeFileSync(`${dir}/blobs/${hexOf(blobId(bytes))}`, bytes);
  }
}

/** Runs the driver's apply and kills it with SIGKILL once it pauses at `step`. */
async function killedAt(root: string, fixture: string, id: string, step: string): Promise<void> {
  const flag = `${fixture}/paused`;
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "--quiet", "--no-prompt", "-A", DRIVER, "apply", root, fixture, id],
    env: { MARSH_TEST_PAUSE_DIR: fixture, MARSH_TEST_PAUSE_AT: step },
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const output = child.output();
  let exited = false;
  output.finally(() => exited = true).catch(() => {});
  while (!exited && !exists(flag)) await new Promise((r) => setTimeout(r, 10));
  if (exited) {
    const r = await output;
    throw new Error(`the apply ended before ${step}: ${new TextDecoder().decode(r.stderr)}`);
  }
  child.kill("SIGKILL");
  await output;
  Deno.removeSync(flag);
}

/** A project in PRE with resolution `r1` killed at `step`, and the fixture dir. */
async function interrupted(sb: { root: string; top: string }, step: string): Promise<void> {
  writeSpec(sb.root, PRE);
  const fixture = `${sb.top}/fixture`;
  Deno.mkdirSync(fixture);
  writeFixture(fixture);
  await killedAt(sb.root, fixture, "r1", step);
  assert.ok(exists(`${sb.root}/.marsh/resolve/r1/log`));
}

for (
  const [step, state] of [
    ["#7", "pre"], // two steps done: the tree is neither state
    ["committed", "post"],
  ] as const
) {
  Deno.test({
    name: `recover-resolutions: an apply killed at ${step} ends ${state}`,
    permissions: PERMS,
  }, async () => {
    using sb = sandbox("marsh-recover-");
    await interrupted(sb, step);
    const pre = treeOfSpec(sb.top, PRE), post = treeOfSpec(sb.top, POST);
    if (state === "pre") {
      assert.notDeepEqual(fingerprintDiff(pre, treeOf(sb.root)), [], "killed part-way");
    }
    await using svc = SplitfsService.start();
    const r = await svc.request<RecoveredReply>({ v: 1, t: "recover-resolutions", root: sb.root });
    assert.deepEqual(r.resolutions, [{ id: "r1", state }]);
    assert.deepEqual(fingerprintDiff(state === "pre" ? pre : post, treeOf(sb.root)), []);
    assert.equal(
      exists(`${sb.root}/.marsh/resolve/r1`),
      state === "post",
      "a restore point stays after post",
    );
    // Done: a second pass lists what is left (a post-state's restore point, as post) and
    // changes nothing.
    const again = await svc.request<RecoveredReply>({
      v: 1,
      t: "recover-resolutions",
      root: sb.root,
    });
    assert.deepEqual(again.resolutions, state === "post" ? [{ id: "r1", state: "post" }] : []);
    assert.deepEqual(fingerprintDiff(state === "pre" ? pre : post, treeOf(sb.root)), []);
  });
}

Deno.test({
  name: "recovery: the service recovers a project before it splits it",
  permissions: PERMS,
}, async () => {
  using sb = sandbox("marsh-recover-");
  await interrupted(sb, "#7");
  await using svc = SplitfsService.start();
  const created = await svc.request<CreatedReply>({
    v: 1,
    t: "create",
    id: "s1",
    cwd: sb.root,
    env: {},
    withIgnored: false,
    forks: "copy",
  });
  assert.ok(!exists(`${sb.root}/.marsh/resolve/r1`), "recovered before the snapshot");
  const pre = treeOfSpec(sb.top, PRE);
  assert.deepEqual(fingerprintDiff(pre, treeOf(sb.root)), []);
  // The snapshot is of the pre-state, not of a half-applied tree.
  assert.equal(created.snapshot.files, 3);
  await svc.request({ v: 1, t: "remove", id: "s1" });
});

Deno.test({
  name: "recovery: a failure is reported, refuses new resolutions, and is retried",
  permissions: PERMS,
}, async () => {
  using sb = sandbox("marsh-recover-");
  await interrupted(sb, "mkdir-4:done");
  // A file in the directory the apply made: rolling back cannot remove it.
  Deno.writeTextFileSync(`${sb.root}/new/intruder.txt`, "mine\n");
  await using svc = SplitfsService.start();
  // A split is still made (the failure is logged), but no resolution runs.
  await svc.request<CreatedReply>({
    v: 1,
    t: "create",
    id: "s1",
    cwd: sb.root,
    env: {},
    withIgnored: false,
    forks: "copy",
  });
  await assert.rejects(
    svc.request({ v: 1, t: "recover-resolutions", root: sb.root }),
    (e) =>
      e instanceof SplitfsError && e.kind === "input" &&
      /could not be recovered, so nothing new runs there: resolution r1: .*new/.test(e.message),
  );
  await assert.rejects(
    svc.request({ v: 1, t: "undo-resolution", root: sb.root, resolution: "r1", by: "u1" }),
    (e) => e instanceof SplitfsError && /could not be recovered/.test(e.message),
  );
  assert.ok(exists(`${sb.root}/.marsh/resolve/r1/log`), "the log is kept for the next try");
  Deno.removeSync(`${sb.root}/new/intruder.txt`);
  const r = await svc.request<RecoveredReply>({ v: 1, t: "recover-resolutions", root: sb.root });
  assert.deepEqual(r.resolutions, [{ id: "r1", state: "pre" }]);
  assert.deepEqual(fingerprintDiff(treeOfSpec(sb.top, PRE), treeOf(sb.root)), []);
  await svc.request({ v: 1, t: "remove", id: "s1" });
});
