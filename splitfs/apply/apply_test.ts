import assert from "node:assert/strict";
import { fingerprintDiff, sandbox } from "../_testing.ts";
import { applyPlan } from "./transaction.ts";
import { Dir } from "../fd/dir.ts";
import { readLog } from "./intent_log.ts";
import { fsyncAll } from "./fs_extra.ts";
import { FsError } from "../fd/ffi.ts";
import { listResolutions, recover } from "./recover.ts";
import {
  ApplyFailedError,
  ApplyRefusedError,
  ConcurrentChangeError,
  RollbackFailedError,
} from "./errors.ts";
import {
  binary,
  planOf,
  rejection,
  type Spec,
  treeOf,
  treeOfSpec,
  writeSpec,
} from "./_apply_testing.ts";

const PERMS = { read: true, write: true, ffi: true, env: true } as const;

/** One plan kind: the tree before, the tree after. */
const CASES: Record<string, { pre: Spec; post: Spec; filesOnly?: boolean; git?: boolean }> = {
  "a file's bytes": {
    pre: { "a.txt": { file: "one\n" }, "keep.txt": { file: "keep\n" } },
    post: { "a.txt": { file: "two\n" }, "keep.txt": { file: "keep\n" } },
  },
  "the executable bit alone": {
    pre: { "run.sh": { file: "#!/bin/sh\n" } },
    post: { "run.sh": { file: "#!/bin/sh\n", mode: 0o755 } },
  },
  "a symlink: new, retargeted, and replacing a file": {
    pre: { "l1": { link: "a" }, "f": { file: "x" } },
    post: { "l1": { link: "../outside/b" }, "l2": { link: "dangling" }, "f": { link: "l1" } },
  },
  "a delete of a file and a symlink": {
    pre: { "gone.txt": { file: "bye\n" }, "l": { link: "gone.txt" }, "stay": { file: "s" } },
    post: { "stay": { file: "s" } },
  },
  "a file that becomes a directory": {
    pre: { "x": { file: "file\n" } },
    post: { "x/inner.txt": { file: "inner\n" }, "x/sub/deep.txt": { file: "deep\n" } },
  },
  "a directory that becomes a file": {
    pre: { "d/a.txt": { file: "a" }, "d/sub/b.txt": { file: "b" }, "d/empty": { dir: true } },
    post: { "d": { file: "now a file\n", mode: 0o600 } },
  },
  "a directory that becomes a file, planned as Git does (files only)": {
    pre: { "d/a.txt": { file: "a" }, "d/sub/b.txt": { file: "b" } },
    post: { "d": { file: "now a file\n" } },
    filesOnly: true,
    git: true,
  },
  "nested new directories, made implicitly": {
    pre: { "top.txt": { file: "t" } },
    post: {
      "top.txt": { file: "t" },
      "n1/n2/n3/leaf.txt": { file: "leaf\n" },
      "n1/side": { file: "s" },
    },
    filesOnly: true,
  },
  "binary files with NULs, large and empty": {
    pre: { "bin.dat": { file: binary(70_000, 1) } },
    post: {
      "bin.dat": { file: binary(3_000_000, 2) },
      "empty": { file: "" },
      "db.sqlite": { file: binary(4096, 3), mode: 0o640 },
    },
  },
};

for (const [name, c] of Object.entries(CASES)) {
  Deno.test({ name: `apply: ${name}`, permissions: PERMS }, async () => {
    using sb = sandbox("marsh-apply-");
    writeSpec(sb.root, c.pre);
    const before = treeOf(sb.root);
    assert.deepEqual(fingerprintDiff(treeOfSpec(sb.top, c.pre), before), []);
    const { plan, content } = planOf(c.pre, c.post, {
      filesOnly: c.filesOnly ?? false,
      scope: c.git ? "git" : "filesystem",
    });
    const applied = await applyPlan(sb.root, plan, { content });
    assert.deepEqual(fingerprintDiff(treeOfSpec(sb.top, c.post), treeOf(sb.root)), []);
    // The staging is gone; the restore point (log, backup) stays.
    const res = `${sb.root}/.marsh/resolve/${applied.id}`;
    assert.deepEqual([...Deno.readDirSync(res)].map((e) => e.name).sort(), ["backup", "log"]);
    assert.deepEqual(listResolutions(sb.root), [applied.id]);
  });
}

Deno.test({
  name: "apply: a concurrent write aborts naming the path; the tree is byte-identical",
  permissions: PERMS,
}, async () => {
  using sb = sandbox("marsh-apply-");
  const pre: Spec = {
    "a.txt": { file: "a\n" },
    "b.txt": { file: "b\n" },
    "d/c.txt": { file: "c\n" },
  };
  writeSpec(sb.root, pre);
  const { plan, content } = planOf(pre, {
    "a.txt": { file: "A\n" },
    "b.txt": { file: "B\n" },
    "new/x": { file: "x" },
  });
  // The user writes b.txt and chmods d/c.txt after the plan was computed.
  Deno.writeTextFileSync(`${sb.root}/b.txt`, "edited by the user\n");
  Deno.chmodSync(`${sb.root}/d/c.txt`, 0o755);
  const tree = treeOf(sb.root);
  const err = await rejection(applyPlan(sb.root, plan, { content }), ConcurrentChangeError);
  assert.deepEqual(err.changed.map((c) => c.path), [
    "b.txt",
    "d/c.txt",
  ]);
  assert.match(
    err.message,
    /b\.txt \(expected file 0644 [0-9a-f]{10}, found file 0644 [0-9a-f]{10}\)/,
  );
  assert.deepEqual(fingerprintDiff(tree, treeOf(sb.root)), []);
  assert.deepEqual(listResolutions(sb.root), [], "a refused apply leaves no resolution behind");
});

Deno.test({
  name:
    "apply: a write between the plan and the apply in the --git scope, and a mode change Git ignores",
  permissions: PERMS,
}, async () => {
  using sb = sandbox("marsh-apply-");
  const pre: Spec = { "a.txt": { file: "a\n" } };
  writeSpec(sb.root, pre);
  const { plan, content } = planOf(pre, { "a.txt": { file: "A\n" } }, { scope: "git" });
  // 0644 → 0664: Git sees no change (no executable bit), so the apply goes ahead.
  Deno.chmodSync(`${sb.root}/a.txt`, 0o664);
  await applyPlan(sb.root, plan, { content });
  assert.equal(Deno.readTextFileSync(`${sb.root}/a.txt`), "A\n");
});

Deno.test({
  name: "apply: an unplanned file inside a directory that must go refuses; nothing changed",
  permissions: PERMS,
}, async () => {
  using sb = sandbox("marsh-apply-");
  const pre: Spec = { "d/a.txt": { file: "a" } };
  writeSpec(sb.root, pre);
  const { plan, content } = planOf(pre, { "d": { file: "f" } }, { filesOnly: true, scope: "git" });
  Deno.writeTextFileSync(`${sb.root}/d/ignored.log`, "not in the plan");
  const tree = treeOf(sb.root);
  const err = await rejection(applyPlan(sb.root, plan, { content }), ApplyRefusedError);
  assert.match(err.message, /d is a directory that still holds d\/ignored\.log/);
  assert.deepEqual(fingerprintDiff(tree, treeOf(sb.root)), []);
});

Deno.test({
  name: "apply: a parent that is a symlink is never followed; the apply refuses",
  permissions: PERMS,
}, async () => {
  using sb = sandbox("marsh-apply-");
  Deno.symlinkSync(sb.outside, `${sb.root}/p`);
  const { plan, content } = planOf({}, { "p/x.txt": { file: "x" } }, { filesOnly: true });
  const err = await rejection(applyPlan(sb.root, plan, { content }), ApplyRefusedError);
  assert.match(err.message, /p is a symlink, not a directory/);
  assert.deepEqual([...Deno.readDirSync(sb.outside)], []);
});

Deno.test({
  name: "apply: wrong bytes for a blob fail in staging and change nothing",
  permissions: PERMS,
}, async () => {
  using sb = sandbox("marsh-apply-");
  const pre: Spec = { "a.txt": { file: "a" } };
  writeSpec(sb.root, pre);
  const { plan } = planOf(pre, { "a.txt": { file: "b" }, "c.txt": { file: "c" } });
  const tree = treeOf(sb.root);
  const err = await rejection(
    applyPlan(sb.root, plan, { content: () => ({ bytes: new TextEncoder().encode("tampered") }) }),
    ApplyFailedError,
  );
  assert.match(err.message, /the bytes given for a\.txt are not what the plan takes/);
  assert.deepEqual(fingerprintDiff(tree, treeOf(sb.root)), []);
  assert.deepEqual(listResolutions(sb.root), []);
});

Deno.test(
  { name: "apply: a failing step rolls back every step before it", permissions: PERMS },
  async () => {
    using sb = sandbox("marsh-apply-");
    const pre: Spec = { "a.txt": { file: "a" }, "b/c.txt": { file: "c" }, "gone": { file: "g" } };
    const post: Spec = { "a.txt": { file: "A" }, "b": { file: "B" }, "n/m/x": { file: "x" } };
    writeSpec(sb.root, pre);
    const { plan, content } = planOf(pre, post);
    const tree = treeOf(sb.root);
    const reached: string[] = [];
    const err = await rejection(
      applyPlan(sb.root, plan, {
        id: "r1",
        content,
        onStep: (s) => {
          reached.push(s);
          // The last placement (n/m/x) loses its staged file, the only one left in stage/.
          const places = reached.filter((r) => /^place-\d+:logged$/.test(r)).length;
          if (places === 3 && s.endsWith(":logged")) {
            const stage = `${sb.root}/.marsh/resolve/r1/stage`;
            for (const e of Deno.readDirSync(stage)) Deno.removeSync(`${stage}/${e.name}`);
          }
        },
      }),
      ApplyFailedError,
    );
    assert.match(
      err.message,
      /rolled back, so the project is as it was: renameat .*: no such file/,
    );
    assert.ok(reached.some((r) => r.startsWith("backup-")) && !reached.includes("synced"));
    assert.deepEqual(listResolutions(sb.root), []);
    assert.deepEqual(fingerprintDiff(tree, treeOf(sb.root)), []);
  },
);

Deno.test({
  name: "apply: a rollback blocked by a concurrent write keeps the log; recover finishes it",
  permissions: PERMS,
}, async () => {
  using sb = sandbox("marsh-apply-");
  const pre: Spec = { "a.txt": { file: "a" } };
  writeSpec(sb.root, pre);
  const { plan, content } = planOf(pre, { "a.txt": { file: "A" }, "n/x": { file: "x" } });
  const tree = treeOf(sb.root);
  const seen: string[] = [];
  const err = await rejection(
    applyPlan(sb.root, plan, {
      id: "r2",
      content,
      onStep: (s) => {
        seen.push(s);
        // A squatter at n/x before its placement: the rename fails, and the rollback cannot remove n.
        if (
          s.startsWith("place-") && s.endsWith(":logged") &&
          seen.filter((x) => x.startsWith("place-")).length === 3
        ) {
          Deno.writeTextFileSync(`${sb.root}/n/x`, "squatter");
        }
      },
    }),
    RollbackFailedError,
  );
  assert.match(
    err.message,
    /could not be rolled back: .*directory not empty.*recover resolution r2/,
  );
  assert.deepEqual(listResolutions(sb.root), ["r2"]);
  Deno.removeSync(`${sb.root}/n/x`);
  assert.equal(await recover(sb.root, "r2"), "pre");
  assert.deepEqual(fingerprintDiff(tree, treeOf(sb.root)), []);
  assert.deepEqual(listResolutions(sb.root), []);
});

Deno.test({
  name:
    "apply: a write after the re-check is caught once the file is in the backup; all rolled back",
  permissions: PERMS,
}, async () => {
  using sb = sandbox("marsh-apply-");
  const pre: Spec = { "a.txt": { file: "a" }, "b.txt": { file: "b" }, "d/x": { file: "x" } };
  writeSpec(sb.root, pre);
  const { plan, content } = planOf(pre, {
    "a.txt": { file: "A" },
    "b.txt": { file: "B" },
    "d": { file: "D" },
  });
  let tree = new Map<string, string>();
  const err = await rejection(
    applyPlan(sb.root, plan, {
      content,
      onStep: (s) => {
        if (s !== "ready") return;
        // Right after the re-check. (A write of the same size within the same clock tick as
        // the check is not caught: file times are coarse, as Git's racy-clean check knows.)
        Deno.writeTextFileSync(`${sb.root}/a.txt`, "ZZ");
        tree = treeOf(sb.root);
      },
    }),
    ConcurrentChangeError,
  );
  assert.deepEqual(err.changed, [{
    path: "a.txt",
    expected: "what was checked",
    found: "written after it was checked",
  }]);
  assert.deepEqual(fingerprintDiff(tree, treeOf(sb.root)), []);
  assert.deepEqual(listResolutions(sb.root), []);
  // A file made in a directory that goes, after the re-check: caught when the directory is moved.
  const err2 = await rejection(
    applyPlan(
      sb.root,
      planOf({ ...pre, "a.txt": { file: "ZZ" } }, {
        "a.txt": { file: "ZZ" },
        "b.txt": { file: "B" },
        "d": { file: "D" },
      }).plan,
      {
        content,
        onStep: (s) => {
          if (s !== "ready") return;
          Deno.writeTextFileSync(`${sb.root}/d/late`, "late");
          tree = treeOf(sb.root);
        },
      },
    ),
    ConcurrentChangeError,
  );
  assert.deepEqual(err2.changed.map((c) => [c.path, c.found]), [["d", "a directory holding late"]]);
  assert.deepEqual(fingerprintDiff(tree, treeOf(sb.root)), []);
});

Deno.test({
  name: "apply: a conflicting or malformed plan is refused before anything",
  permissions: PERMS,
}, async () => {
  using sb = sandbox("marsh-apply-");
  await assert.rejects(
    applyPlan(sb.root, {
      scope: "filesystem",
      trees: { base: null, source: null, branch: null, result: null },
      entries: [{
        op: "conflict",
        path: "x",
        base: { kind: "absent" },
        source: { kind: "dir" },
        branch: { kind: "symlink", target: "y" },
        reason: "both sides changed it",
      }],
    }, { content: () => ({ bytes: new Uint8Array() }) }),
    ApplyRefusedError,
  );
  await assert.rejects(
    applyPlan(sb.root, {
      scope: "filesystem",
      trees: { base: null, source: null, branch: null, result: null },
      entries: [{ op: "delete", path: "../x", before: { kind: "dir" } }],
    }, { content: () => ({ bytes: new Uint8Array() }) }),
    /not normalised/,
  );
  assert.deepEqual([...Deno.readDirSync(sb.root)], []);
});

Deno.test({
  name: "apply: a phase's steps are logged together, before the first of them runs",
  permissions: PERMS,
}, async () => {
  using sb = sandbox("marsh-apply-");
  const pre: Spec = { "a.txt": { file: "a" }, "b.txt": { file: "b" }, "gone": { file: "g" } };
  const post: Spec = { "a.txt": { file: "A" }, "b.txt": { file: "B" }, "n/m/x": { file: "x" } };
  writeSpec(sb.root, pre);
  const { plan, content } = planOf(pre, post);
  const seen = new Map<string, string[]>();
  await applyPlan(sb.root, plan, {
    id: "r1",
    content,
    onStep: (s) => {
      if (!s.endsWith(":logged")) return;
      using res = Dir.openAbsolute(`${sb.root}/.marsh/resolve/r1`);
      seen.set(s, readLog(res).flatMap((r) => r.t === "step" ? [r.kind] : []));
    },
  });
  const backups = ["backup", "backup", "backup"], mkdirs = ["mkdir", "mkdir"];
  const places = ["place", "place", "place"];
  // The log holds every step of a phase from its first step on, and none of the next phase's.
  assert.deepEqual(seen.get("backup-0:logged"), backups);
  assert.deepEqual(seen.get("backup-2:logged"), backups);
  assert.deepEqual(seen.get("mkdir-3:logged"), [...backups, ...mkdirs]);
  assert.deepEqual(seen.get("place-5:logged"), [...backups, ...mkdirs, ...places]);
  assert.equal(seen.size, 8);
});

Deno.test(
  { name: "fsyncAll flushes many at once, and names one that fails", permissions: PERMS },
  async () => {
    using sb = sandbox("marsh-apply-");
    using dir = Dir.openAbsolute(sb.root);
    const files = Array.from({ length: 5 }, (_, i) => dir.createFile(`f${i}`, 0o600));
    try {
      for (const f of files) f.writeAll(new TextEncoder().encode("x"));
      await fsyncAll([...files, dir]);
      // A descriptor no file holds: its fsync fails, and the error names its path.
      await assert.rejects(
        fsyncAll([...files, { fd: 1_000_000, path: "gone" }]),
        (e) =>
          e instanceof FsError && e.call === "fsync" && e.path === "gone" && e.code === "EBADF",
      );
    } finally {
      for (const f of files) f.close();
    }
  },
);
