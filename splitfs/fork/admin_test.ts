import assert from "node:assert/strict";
import { exists, gitOk, gitProject, put, sandbox, text } from "../_testing.ts";
import { SplitWorkspace } from "../workspace/workspace.ts";

// Real git in real forks (copy forks: the admin dir is the same for every
// fork strategy). Git runs with a private HOME and no global config.
const perms: Deno.PermissionOptions = {
  ffi: true,
  read: true,
  write: true,
  run: ["git", "awk", "umount"],
  env: ["PATH"],
};

/** What a branch's Git does in its fork, by label; each edits and commits `<label>.txt`. */
const GIT_AT_WORK: Record<string, string[][]> = {
  "checkout-b": [["checkout", "-q", "-b", "feature"]],
  "switch-c": [["switch", "-q", "-c", "feature/two"]],
  "track": [["checkout", "-q", "-b", "tracked", "--track", "marsh-split"]],
  "identity": [["config", "user.name", "bot"], ["config", "user.email", "bot@example.com"]],
  "detached": [["checkout", "-q", "--detach"]],
  "tag": [["tag", "-a", "-m", "t", "v1"]],
};

/** Run after the commit: what gc, repack and maintenance write. */
const HOUSEKEEPING: Record<string, string[][]> = {
  "gc": [["gc", "-q"]],
  // Two packs over gc.autoPackLimit: `gc --auto` (what Git starts by itself) runs.
  "autogc": [
    ["repack", "-dq"],
    ["commit", "-q", "--allow-empty", "-m", "more"],
    ["repack", "-dq"],
    ["-c", "gc.autoPackLimit=1", "-c", "gc.autoDetach=false", "gc", "--auto", "-q"],
  ],
  "repack": [
    ["repack", "-adq"],
    ["pack-refs", "--all"],
    ["commit-graph", "write", "--reachable", "--split"],
  ],
  "maintenance": [
    ["maintenance", "run", "--task=loose-objects", "--task=commit-graph"],
    ["multi-pack-index", "write"],
  ],
};

Deno.test({
  name:
    "what Git itself does in a fork (a new branch, a detached HEAD, identity, tracking, gc, repack) is captured as trusted, and the patches apply",
  permissions: perms,
}, async () => {
  using sb = sandbox();
  const opts = { home: sb.home };
  const labels = [...Object.keys(GIT_AT_WORK), ...Object.keys(HOUSEKEEPING)];
  await gitProject(sb, Object.fromEntries(labels.map((l) => [`${l}.txt`, `${l}\n`])));
  const patches: string[] = [];
  {
    using ws = SplitWorkspace.create({
      id: "s1",
      root: sb.root,
      env: { HOME: sb.home },
      forks: "copy",
    });
    for (const label of labels) {
      const fork = ws.fork(label);
      for (const args of GIT_AT_WORK[label] ?? []) await gitOk(fork.path, args, opts);
      put(fork.path, `${label}.txt`, `${label} changed\n`);
      await gitOk(fork.path, ["commit", "-qam", `in ${label}`], opts);
      for (const args of HOUSEKEEPING[label] ?? []) await gitOk(fork.path, args, opts);
      const c = ws.capture(label);
      assert.equal(c.rejected, null, `fork ${label}`);
      assert.equal(c.files, 1, `fork ${label}`);
      const out = `${sb.root}/.marsh/split/s1/out/${label}`;
      assert.equal(text(`${out}/files`), `M\t${label}.txt\n`);
      put(sb.outside, `${label}.patch`, text(`${out}/diff.patch`));
      patches.push(`${sb.outside}/${label}.patch`);
    }
    // Each operation really wrote what it is here to test.
    const admin = (label: string) => `${sb.root}/.marsh/split/s1/.admin/${label}`;
    assert.equal(text(`${admin("checkout-b")}/HEAD`), "ref: refs/heads/feature\n");
    assert.equal(text(`${admin("switch-c")}/HEAD`), "ref: refs/heads/feature/two\n");
    assert.match(text(`${admin("track")}/config`), /\[branch "tracked"\]/);
    assert.match(text(`${admin("identity")}/config`), /name = bot/);
    assert.match(text(`${admin("detached")}/HEAD`), /^[0-9a-f]{40}\n$/);
    for (const label of ["gc", "autogc", "repack"]) {
      assert.match(text(`${admin(label)}/packed-refs`), /refs\/heads\/marsh-split\n/, label);
      assert.equal(exists(`${admin(label)}/info/refs`), true, label);
    }
    assert.equal(exists(`${admin("repack")}/objects/info/commit-graphs`), true);
    ws.remove();
  }
  for (const patch of patches) await gitOk(sb.root, ["apply", patch], opts);
  for (const label of labels) assert.equal(text(`${sb.root}/${label}.txt`), `${label} changed\n`);
});
