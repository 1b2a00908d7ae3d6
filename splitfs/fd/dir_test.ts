import assert from "node:assert/strict";
import { Dir, SymlinkRefusedError, TooLargeError, WrongKindError } from "./dir.ts";
import { MountPointError } from "./mount_boundary.ts";
import { readMounts } from "./mountinfo.ts";
import { FsError } from "./ffi.ts";

const perms: Deno.PermissionOptions = {
  ffi: true,
  read: true,
  write: true,
  run: ["mkfifo"],
};

function tempDir(): string {
  return Deno.makeTempDirSync({ prefix: "marsh-dir-test-" });
}

Deno.test(
  { name: "Dir creates, lists, reads and removes through descriptors", permissions: perms },
  () => {
    const root = tempDir();
    try {
      using dir = Dir.openAbsolute(root);
      using sub = dir.ensureDir("sub");
      sub.writeNewFile("a.txt", new TextEncoder().encode("hello\n"), 0o755);
      sub.symlink(new TextEncoder().encode("../elsewhere"), "link");
      assert.deepEqual(sub.sortedEntries().map((e) => [e.name, e.kind]), [
        ["a.txt", "file"],
        ["link", "symlink"],
      ]);
      assert.equal(new TextDecoder().decode(sub.readFile("a.txt", 100)), "hello\n");
      assert.equal(Deno.statSync(`${root}/sub/a.txt`).mode! & 0o777, 0o755);
      assert.equal(new TextDecoder().decode(sub.readlink("link")), "../elsewhere");
      assert.equal(sub.statAt("missing"), null);
      assert.equal(sub.statAt("link")?.kind, "symlink");
      dir.removeTree("sub");
      assert.equal(dir.statAt("sub"), null);
    } finally {
      Deno.removeSync(root, { recursive: true });
    }
  },
);

Deno.test({
  name: "Dir refuses a symlink planted where a directory is expected",
  permissions: perms,
}, () => {
  const root = tempDir();
  const outside = tempDir();
  try {
    Deno.symlinkSync(outside, `${root}/planted`);
    using dir = Dir.openAbsolute(root);
    assert.throws(() => dir.openDir("planted"), SymlinkRefusedError);
    assert.throws(() => dir.ensureDir("planted"), SymlinkRefusedError);
    assert.throws(() => dir.openPath("planted/x"), SymlinkRefusedError);
    // Nothing was created through the link.
    assert.deepEqual([...Deno.readDirSync(outside)], []);
  } finally {
    Deno.removeSync(root, { recursive: true });
    Deno.removeSync(outside, { recursive: true });
  }
});

Deno.test(
  { name: "Dir never reads or writes through a planted file symlink", permissions: perms },
  () => {
    const root = tempDir();
    const outside = tempDir();
    try {
      Deno.writeTextFileSync(`${outside}/secret`, "secret");
      Deno.symlinkSync(`${outside}/secret`, `${root}/f`);
      using dir = Dir.openAbsolute(root);
      assert.throws(() => dir.readFile("f", 100), SymlinkRefusedError);
      assert.throws(() => dir.createFile("f"), SymlinkRefusedError);
      assert.equal(Deno.readTextFileSync(`${outside}/secret`), "secret");
      // removeTree unlinks the link itself, never its target.
      dir.removeTree("f");
      assert.equal(Deno.readTextFileSync(`${outside}/secret`), "secret");
    } finally {
      Deno.removeSync(root, { recursive: true });
      Deno.removeSync(outside, { recursive: true });
    }
  },
);

Deno.test(
  { name: "Dir reads of a FIFO fail at once instead of blocking", permissions: perms },
  async () => {
    const root = tempDir();
    try {
      const made = await new Deno.Command("mkfifo", { args: [`${root}/fifo`] }).output();
      assert.equal(made.code, 0);
      using dir = Dir.openAbsolute(root);
      const err = assert.throws(() => dir.readFile("fifo", 100), WrongKindError);
      void err;
      assert.equal(dir.statAt("fifo")?.kind, "fifo");
    } finally {
      Deno.removeSync(root, { recursive: true });
    }
  },
);

Deno.test({ name: "Dir creates files exclusively and bounds reads", permissions: perms }, () => {
  const root = tempDir();
  try {
    using dir = Dir.openAbsolute(root);
    dir.writeNewFile("x", new Uint8Array(10));
    assert.throws(
      () => dir.writeNewFile("x", new Uint8Array(1)),
      (e) => e instanceof FsError && e.code === "EEXIST",
    );
    assert.equal(dir.readFile("x", 10).length, 10);
    assert.throws(() => dir.readFile("x", 9), TooLargeError);
  } finally {
    Deno.removeSync(root, { recursive: true });
  }
});

Deno.test({
  name: "Dir copies a file with its mode and mtime by every strategy",
  permissions: perms,
}, () => {
  const root = tempDir();
  try {
    const data = new Uint8Array(3 * 1024 * 1024 + 7).map((_, i) => (i * 31) & 0xff);
    Deno.writeFileSync(`${root}/src`, data, { mode: 0o751 });
    Deno.chmodSync(`${root}/src`, 0o751);
    using dir = Dir.openAbsolute(root);
    for (const strategy of ["reflink", "copy_file_range", "readwrite"] as const) {
      const r = dir.copyFileTo("src", dir, `dst-${strategy}`, strategy);
      assert.deepEqual(Deno.readFileSync(`${root}/dst-${strategy}`), data);
      assert.equal(Deno.statSync(`${root}/dst-${strategy}`).mode! & 0o777, 0o751);
      assert.equal(dir.statAt(`dst-${strategy}`)?.mtimeNs, r.before.mtimeNs);
      assert.ok(["reflink", "copy_file_range", "readwrite"].includes(r.strategy));
      if (strategy === "readwrite") assert.equal(r.strategy, "readwrite");
    }
  } finally {
    Deno.removeSync(root, { recursive: true });
  }
});

Deno.test(
  { name: "Dir identity survives a rename and changes on replacement", permissions: perms },
  () => {
    const root = tempDir();
    try {
      using dir = Dir.openAbsolute(root);
      using a = dir.ensureDir("a");
      const id = a.stat();
      dir.rename("a", dir, "b");
      assert.equal(dir.statAt("b")?.ino, id.ino);
      Deno.mkdirSync(`${root}/a`);
      assert.notEqual(dir.statAt("a")?.ino, id.ino);
    } finally {
      Deno.removeSync(root, { recursive: true });
    }
  },
);

Deno.test(
  { name: "Dir.renameReplacing replaces a file; Dir.rename never does", permissions: perms },
  () => {
    const root = tempDir();
    try {
      using dir = Dir.openAbsolute(root);
      const enc = new TextEncoder();
      dir.writeNewFile("old", enc.encode("old\n"));
      dir.writeNewFile("new", enc.encode("new\n"));
      dir.writeNewFile("other", enc.encode("other\n"));
      assert.throws(
        () => dir.rename("other", dir, "old"),
        (e) => e instanceof FsError && e.code === "EEXIST",
      );
      dir.renameReplacing("new", dir, "old");
      assert.equal(Deno.readTextFileSync(`${root}/old`), "new\n");
      assert.equal(dir.statAt("new"), null);
    } finally {
      Deno.removeSync(root, { recursive: true });
    }
  },
);

Deno.test(
  {
    name: "Dir.statAbsolute does not follow the last symlink; openAbsoluteFile streams a copy",
    permissions: perms,
  },
  () => {
    const root = tempDir();
    try {
      Deno.writeTextFileSync(`${root}/file`, "x".repeat(3 << 20));
      Deno.symlinkSync(`${root}/file`, `${root}/link`);
      assert.equal(Dir.statAbsolute(`${root}/link`)?.kind, "symlink");
      assert.equal(Dir.statAbsolute(`${root}/file`)?.size, 3 << 20);
      assert.equal(Dir.statAbsolute(`${root}/missing`), null);
      assert.throws(() => Dir.openAbsoluteFile(root), WrongKindError);
      using dir = Dir.openAbsolute(root);
      {
        using src = Dir.openAbsoluteFile(`${root}/link`);
        using dst = dir.createFile("copy");
        src.copyTo(dst, "readwrite");
      }
      assert.equal(Deno.readTextFileSync(`${root}/copy`), "x".repeat(3 << 20));
    } finally {
      Deno.removeSync(root, { recursive: true });
    }
  },
);

Deno.test({
  name: "Dir.link hard-links through descriptors, never replaces, never follows a symlink",
  permissions: perms,
}, () => {
  const root = tempDir();
  const outside = tempDir();
  try {
    using dir = Dir.openAbsolute(root);
    using a = dir.ensureDir("a");
    using b = dir.ensureDir("b");
    a.writeNewFile("f", new TextEncoder().encode("shared\n"), 0o444);
    a.link("f", b, "g");
    const [sf, sg] = [a.statAt("f")!, b.statAt("g")!];
    assert.equal(sg.ino, sf.ino);
    assert.equal(sg.dev, sf.dev);
    assert.equal(sg.nlink, 2);
    assert.equal(sg.perm, 0o444);
    // An existing destination is never replaced.
    assert.throws(() => a.link("f", b, "g"), (e) => e instanceof FsError && e.code === "EEXIST");
    assert.throws(
      () => a.link("missing", b, "h"),
      (e) => e instanceof FsError && e.code === "ENOENT",
    );
    // A symlink is linked as itself: its target is not reached.
    Deno.writeTextFileSync(`${outside}/target`, "outside\n");
    a.symlink(new TextEncoder().encode(`${outside}/target`), "s");
    a.link("s", b, "s2");
    assert.equal(b.statAt("s2")?.kind, "symlink");
    assert.equal(Deno.lstatSync(`${outside}/target`).nlink, 1);
    assert.throws(() => a.link("f", b, "../escape"), TypeError);
  } finally {
    Deno.removeSync(root, { recursive: true });
    Deno.removeSync(outside, { recursive: true });
  }
});

/** Runs mount(8) or umount(8); the test fails when it does. */
function mountTool(cmd: "mount" | "umount", args: string[]): void {
  const r = new Deno.Command(cmd, { args, stderr: "piped" }).outputSync();
  assert.ok(r.success, `${cmd} ${args.join(" ")}: ${new TextDecoder().decode(r.stderr)}`);
}

/** Unmounts whatever is still mounted at these paths (a failed test's leftovers). */
function unmountAll(paths: readonly string[]): void {
  for (const p of paths) {
    for (let i = 0; i < 4 && readMounts().some((m) => m.mountPoint === p); i++) {
      const r = new Deno.Command("umount", { args: [p], stderr: "null" }).outputSync();
      if (!r.success) {
        new Deno.Command("umount", { args: ["-l", p], stderr: "null" }).outputSync();
      }
    }
  }
}

/** The MountPointError `fn` throws; the test fails when it throws nothing or something else. */
function refusal(fn: () => void): MountPointError {
  try {
    fn();
  } catch (error) {
    if (error instanceof MountPointError) return error;
    throw error;
  }
  throw new assert.AssertionError({ message: "the removal did not stop at the mount point" });
}

/** A directory outside the tree being removed, holding files that must survive. */
function makeCache(): string {
  const cache = tempDir();
  Deno.mkdirSync(`${cache}/deep/er`, { recursive: true });
  Deno.writeTextFileSync(`${cache}/keep.txt`, "keep\n");
  Deno.writeTextFileSync(`${cache}/deep/er/keep2.txt`, "keep2\n");
  return cache;
}

function cacheIntact(cache: string): void {
  assert.equal(Deno.readTextFileSync(`${cache}/keep.txt`), "keep\n");
  assert.equal(Deno.readTextFileSync(`${cache}/deep/er/keep2.txt`), "keep2\n");
}

const mountPerms: Deno.PermissionOptions = { ...perms, run: ["mount", "umount"] };

for (const how of ["removeTree", "clear"] as const) {
  Deno.test({
    name:
      `Dir.${how} stops at a bind mount of the same file system: nothing below it is deleted, the error names it, and after umount the removal finishes`,
    permissions: mountPerms,
  }, () => {
    const root = tempDir();
    const cache = makeCache();
    const point = `${root}/tree/a/vm`;
    try {
      Deno.mkdirSync(`${root}/tree/a/vm`, { recursive: true });
      Deno.writeTextFileSync(`${root}/tree/a/mine.txt`, "mine\n");
      mountTool("mount", ["--bind", cache, point]);
      // Same device on both sides: only the mount id tells them apart.
      assert.equal(Deno.statSync(point).dev, Deno.statSync(`${root}/tree`).dev);
      using dir = Dir.openAbsolute(root);
      const remove = () => {
        if (how === "removeTree") dir.removeTree("tree");
        else {
          using tree = dir.openDir("tree");
          tree.clear();
        }
      };
      const err = refusal(remove);
      assert.deepEqual(err.mountPoints, [point]);
      const top = `${root}/tree`;
      assert.equal(
        err.message,
        `cannot remove ${top}: ${point} is a mount point (umount ${point})`,
      );
      assert.equal(
        err.withFix("marsh gc").message,
        `cannot remove ${top}: ${point} is a mount point (umount ${point}, then marsh gc)`,
      );
      cacheIntact(cache);
      assert.ok(Deno.statSync(point).isDirectory, "the mount point stays");
      mountTool("umount", [point]);
      remove();
      assert.equal(dir.statAt("tree")?.kind, how === "removeTree" ? undefined : "dir");
      cacheIntact(cache);
    } finally {
      unmountAll([point]);
      Deno.removeSync(root, { recursive: true });
      Deno.removeSync(cache, { recursive: true });
    }
  });
}

Deno.test({
  name:
    "Dir.removeTree refuses a mount on the child itself, a mount of another file system, and a bind-mounted file",
  permissions: mountPerms,
}, () => {
  const root = tempDir();
  const cache = makeCache();
  const points = [`${root}/top`, `${root}/t/tmp`, `${root}/f/file`];
  try {
    for (const d of ["top", "t/tmp", "f"]) Deno.mkdirSync(`${root}/${d}`, { recursive: true });
    Deno.writeTextFileSync(`${root}/f/file`, "mine\n");
    mountTool("mount", ["--bind", cache, `${root}/top`]);
    mountTool("mount", ["-t", "tmpfs", "-o", "size=1m", "marsh-test", `${root}/t/tmp`]);
    Deno.writeTextFileSync(`${root}/t/tmp/on-tmpfs`, "x\n");
    mountTool("mount", ["--bind", `${cache}/keep.txt`, `${root}/f/file`]);
    using dir = Dir.openAbsolute(root);
    for (const [name, point] of [["top", points[0]], ["t", points[1]], ["f", points[2]]]) {
      assert.deepEqual(refusal(() => dir.removeTree(name!)).mountPoints, [point]);
    }
    cacheIntact(cache);
    assert.equal(Deno.readTextFileSync(`${root}/t/tmp/on-tmpfs`), "x\n");
    unmountAll(points);
    for (const name of ["top", "t", "f"]) dir.removeTree(name);
    assert.deepEqual([...Deno.readDirSync(root)], []);
    cacheIntact(cache);
  } finally {
    unmountAll(points);
    Deno.removeSync(root, { recursive: true });
    Deno.removeSync(cache, { recursive: true });
  }
});
