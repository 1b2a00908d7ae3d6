/**
 * The `compare-fork`, `compare-out` and `compare-drop` frames through the
 * real split-filesystem service (a child process with its own narrow
 * permissions): the throwaway fork of a captured branch, its output, its
 * removal, and one a failed removal left behind.
 */
import assert from "node:assert/strict";
import type { CreatedReply, ForkedReply } from "../../protocol/splitfs.ts";
import type { CompareForkedReply } from "../../protocol/splitfs_compare.ts";
import { SplitfsError, SplitfsService } from "../../protocol/splitfs_client.ts";
import { exists, fingerprint, mountsBelow, put, sandbox, text } from "../_testing.ts";

const PERMS: Deno.PermissionOptions = { run: true, read: true, write: true, env: true };

for (const forks of ["copy", "auto"] as const) {
  Deno.test({
    name:
      `service: a throwaway fork of a branch's result, written, dropped; the branch's fork unchanged (forks: ${forks})`,
    permissions: PERMS,
  }, async () => {
    using sb = sandbox("marsh-compare-fork-");
    put(sb.root, "a.txt", "one\n");
    put(sb.root, "src/b.txt", "bee\n");
    {
      await using svc = SplitfsService.start();
      await svc.request<CreatedReply>({
        v: 1,
        t: "create",
        id: "s1",
        cwd: sb.root,
        env: {},
        withIgnored: false,
        forks,
      });
      const forked = await svc.request<ForkedReply>({ v: 1, t: "fork", id: "s1", label: "a" });
      put(forked.path, "a.txt", "one, edited\n");
      Deno.removeSync(`${forked.path}/src/b.txt`);
      await svc.request({ v: 1, t: "capture", id: "s1", label: "a" });
      const split = `${sb.root}/.marsh/split/s1`;
      const branch = fingerprint(split, { skip: (rel) => rel.startsWith(".compare-") });

      const made = await svc.request<CompareForkedReply>({
        v: 1,
        t: "compare-fork",
        id: "s1",
        label: "a",
      });
      assert.equal(made.path, `${split}/.compare-a`);
      if (forks === "auto") assert.equal(made.strategy, "overlay");
      else assert.match(made.strategy, /^(reflink|copy_file_range|copy)$/);
      // The branch's result, not the base.
      assert.equal(text(`${made.path}/a.txt`), "one, edited\n");
      assert.ok(!exists(`${made.path}/src/b.txt`));
      put(made.path, "a.txt", "the test's\n");
      put(made.path, "new.txt", "new\n");
      Deno.removeSync(`${made.path}/src`, { recursive: true });

      const again = await svc.request({ v: 1, t: "compare-fork", id: "s1", label: "a" })
        .then(() => null, (e) => e);
      assert.ok(again instanceof SplitfsError, `${again}`);
      assert.match(again.message, /a test of branch a is already running/);

      const attempt = `${sb.home}/attempt`;
      Deno.mkdirSync(attempt);
      put(attempt, "stdout", "out 1\n");
      put(attempt, "stderr", "err 1\n");
      const outReq = {
        v: 1,
        t: "compare-out",
        id: "s1",
        label: "a",
        stdout: `${attempt}/stdout`,
        stderr: `${attempt}/stderr`,
      } as const;
      await svc.request(outReq);
      put(attempt, "stdout", "out 2\n");
      await svc.request(outReq);
      assert.equal(text(`${split}/out/a/compare/stdout`), "out 2\n", "replaced");
      assert.equal(text(`${split}/out/a/compare/stderr`), "err 1\n");
      assert.deepEqual([...Deno.readDirSync(`${split}/out/a/compare`)].map((e) => e.name).sort(), [
        "stderr",
        "stdout",
      ]);

      await svc.request({ v: 1, t: "compare-drop", id: "s1", label: "a" });
      assert.ok(!exists(made.path));
      assert.ok(!exists(`${split}/.overlay/.compare-a`));
      assert.deepEqual(mountsBelow(made.path), []);
      const after = fingerprint(split, { skip: (rel) => rel.startsWith("out/a/compare") });
      assert.deepEqual(after, branch, "the branch's fork, upper dir and out/ are unchanged");
      // A second drop finds nothing, and is fine.
      await svc.request({ v: 1, t: "compare-drop", id: "s1", label: "a" });
      await svc.request({ v: 1, t: "remove", id: "s1" });
    }
    assert.deepEqual(mountsBelow(sb.top), []);
  });
}

Deno.test({
  name:
    "service: a throwaway fork still in use is not removed (busy); the next compare-fork removes it first",
  permissions: PERMS,
}, async () => {
  using sb = sandbox("marsh-compare-fork-busy-");
  put(sb.root, "a.txt", "one\n");
  {
    await using svc = SplitfsService.start();
    await svc.request<CreatedReply>({
      v: 1,
      t: "create",
      id: "s1",
      cwd: sb.root,
      env: {},
      withIgnored: false,
      forks: "auto",
    });
    const forked = await svc.request<ForkedReply>({ v: 1, t: "fork", id: "s1", label: "a" });
    put(forked.path, "a.txt", "two\n");
    await svc.request({ v: 1, t: "capture", id: "s1", label: "a" });
    const made = await svc.request<CompareForkedReply>({
      v: 1,
      t: "compare-fork",
      id: "s1",
      label: "a",
    });
    assert.equal(made.strategy, "overlay", "this test needs overlay forks");
    put(made.path, "left.txt", "left behind\n");
    // A process whose cwd is in the fork keeps its mount busy.
    const sleeper = new Deno.Command("sleep", { args: ["30"], cwd: made.path }).spawn();
    try {
      const busy = await svc.request({ v: 1, t: "compare-drop", id: "s1", label: "a" })
        .then(() => null, (e) => e);
      assert.ok(busy instanceof SplitfsError, `${busy}`);
      assert.match(busy.message, /busy/);
      assert.deepEqual(mountsBelow(made.path), [made.path], "still mounted");
    } finally {
      sleeper.kill("SIGKILL");
      await sleeper.status;
    }
    const fresh = await svc.request<CompareForkedReply>({
      v: 1,
      t: "compare-fork",
      id: "s1",
      label: "a",
    });
    assert.equal(fresh.path, made.path);
    assert.ok(!exists(`${fresh.path}/left.txt`), "the leftover was removed, not reused");
    assert.equal(text(`${fresh.path}/a.txt`), "two\n");
    assert.deepEqual(mountsBelow(fresh.path), [fresh.path], "one mount, not two stacked");
    await svc.request({ v: 1, t: "compare-drop", id: "s1", label: "a" });
    assert.ok(!exists(fresh.path));
    await svc.request({ v: 1, t: "remove", id: "s1" });
  }
  assert.deepEqual(mountsBelow(sb.top), []);
});
