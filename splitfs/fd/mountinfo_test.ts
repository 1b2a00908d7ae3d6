import assert from "node:assert/strict";
import fc from "fast-check";
import { assertProperty } from "../../tests/_property.ts";
import { Dir } from "./dir.ts";
import {
  findMount,
  kernelPath,
  mountAt,
  mountAtPath,
  MountinfoFormatError,
  mountOf,
  parseMountinfo,
  readMounts,
  readMountsOn,
  unescapeMountField,
} from "./mountinfo.ts";
import { mountReadOnly, unmount } from "../fork/overlay.ts";
import { throwsA } from "../_testing.ts";

const perms: Deno.PermissionOptions = { ffi: true, read: true, write: true };
const enc = new TextEncoder();

/** The kernel's escaping of a mountinfo path (fs/proc_namespace.c: `" \t\n\\"`). */
function escape(path: string): string {
  return path.replace(/[ \t\n\\]/g, (c) => `\\${c.charCodeAt(0).toString(8).padStart(3, "0")}`);
}

Deno.test("parseMountinfo reads every field of proc(5)'s lines", () => {
  const text = "36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue\n" +
    "49 27 0:40 / /tmp/a\\040b rw,relatime shared:7 master:2 - overlay marsh ro,lowerdir=/x\n" +
    "50 27 0:41 / /plain rw - tmpfs tmpfs rw\n";
  const mounts = parseMountinfo(text);
  assert.deepEqual(mounts[0], {
    id: 36,
    parentId: 35,
    major: 98,
    minor: 0,
    root: "/mnt1",
    mountPoint: "/mnt2",
    options: "rw,noatime",
    optional: ["master:1"],
    fsType: "ext3",
    source: "/dev/root",
    superOptions: "rw,errors=continue",
  });
  assert.equal(mounts[1]!.mountPoint, "/tmp/a b");
  assert.deepEqual(mounts[1]!.optional, ["shared:7", "master:2"]);
  assert.equal(mounts[1]!.source, "marsh");
  assert.deepEqual(mounts[2]!.optional, []);
  assert.equal(mounts.length, 3);
});

Deno.test("parseMountinfo refuses lines that are not mountinfo", () => {
  for (
    const line of [
      "36 35 98:0 /mnt1 /mnt2 rw ext3 /dev/root rw",
      "x 35 98:0 / / rw - ext3 /dev/root rw",
      "36 35 98 / / rw - ext3 /dev/root rw",
      "36 35 98:0 / / rw -",
    ]
  ) throwsA(() => parseMountinfo(line), MountinfoFormatError);
});

Deno.test("mountinfo escapes of space, tab, newline and backslash round-trip", (t) => {
  assert.equal(unescapeMountField(enc.encode("/a\\040b\\011c\\012d\\134e")), "/a b\tc\nd\\e");
  // A backslash not followed by three octal digits is itself.
  assert.equal(unescapeMountField(enc.encode("/a\\9b\\04")), "/a\\9b\\04");
  assertProperty(
    t,
    fc.property(
      fc.array(
        fc.oneof(
          fc.constantFrom(" ", "\t", "\n", "\\", "\\040", "é", "日本", "-", "/"),
          fc.string({ maxLength: 4 }).filter((s) => !s.includes("\0")),
        ),
        { maxLength: 8 },
      ),
      (pieces) => {
        const path = `/${pieces.join("")}`;
        const line = `7 1 0:5 / ${escape(path)} rw - tmpfs none rw\n`;
        assert.equal(parseMountinfo(line)[0]!.mountPoint, path);
      },
    ),
  );
});

Deno.test("findMount picks the topmost of mounts stacked at one path", () => {
  const mounts = parseMountinfo(
    "10 1 0:1 / / rw - ext4 /dev/vda rw\n" +
      "20 10 0:2 / /m rw - tmpfs a rw\n" +
      "30 20 0:3 / /m rw - tmpfs b rw\n" +
      "40 10 0:4 / /n rw - tmpfs c rw\n",
  );
  assert.equal(findMount({ path: "/m" }, mounts)?.id, 30);
  assert.equal(findMount({ path: "/n" }, mounts)?.id, 40);
  assert.equal(findMount({ path: "/nowhere" }, mounts), null);
  assert.equal(findMount({ id: 20 }, mounts)?.source, "a");
  assert.equal(findMount({ id: 99 }, mounts), null);
});

Deno.test({
  name:
    "readMounts and findMount see a real mount at a path with a space, tab, newline and backslash",
  permissions: perms,
}, () => {
  const top = Deno.realPathSync(Deno.makeTempDirSync({ prefix: "marsh-mountinfo-test-" }));
  const name = "sp ace\ttab\nnl\\bs";
  try {
    for (const d of ["l1", "l2", name]) Deno.mkdirSync(`${top}/${d}`);
    Deno.writeTextFileSync(`${top}/l1/f`, "f\n");
    using parent = Dir.openAbsolute(top);
    using l1 = parent.openDir("l1");
    using l2 = parent.openDir("l2");
    const path = `${top}/${name}`;
    let record;
    {
      using target = parent.openDir(name);
      assert.equal(kernelPath(target), path);
      assert.equal(mountOf(target).id, mountAtPath(top).id);
      record = mountReadOnly("overlay", [l1, l2], target);
    }
    try {
      assert.equal(record.mountPoint, path);
      const raw = new TextDecoder().decode(Dir.readAbsolute("/proc/self/mountinfo", 1 << 24));
      assert.ok(raw.includes(` ${escape(path)} `), "the kernel escapes the path");
      const m = findMount({ path })!;
      assert.equal(m.id, record.mountId);
      assert.equal(m.fsType, "overlay");
      assert.equal(m.source, "marsh");
      assert.equal(m.parentId, mountAtPath(top).id);
      assert.deepEqual(findMount({ id: m.id }), m);
      assert.equal(mountAt(parent, name).id, m.id);
      assert.equal(mountAtPath(path).id, m.id);
      {
        using root = parent.openDir(name);
        const on = mountOf(root);
        assert.deepEqual([on.id, on.major, on.minor], [m.id, m.major, m.minor]);
        const st = Deno.statSync(path);
        assert.equal(BigInt(st.dev), root.stat().dev);
      }
      assert.ok(readMounts().some((x) => x.id === m.id));
      // The targeted read parses only the lines on that point, and finds the same record.
      assert.deepEqual(readMountsOn(m.parentId, path), [m]);
      assert.deepEqual(readMountsOn(m.parentId, `${top}/l1`), []);
      assert.deepEqual(readMountsOn(m.id, path), []);
    } finally {
      unmount(parent, name, record);
    }
    assert.equal(findMount({ path }), null);
    assert.equal(findMount({ id: record.mountId }), null);
  } finally {
    Deno.removeSync(top, { recursive: true });
  }
});

Deno.test({
  name: "readMountsOn finds what readMounts filtered by parent and mount point finds",
  permissions: perms,
}, () => {
  const all = readMounts();
  assert.ok(all.length > 0);
  for (const m of all) {
    const want = all.filter((x) => x.parentId === m.parentId && x.mountPoint === m.mountPoint);
    assert.deepEqual(readMountsOn(m.parentId, m.mountPoint), want);
  }
  assert.deepEqual(readMountsOn(-1, "/"), []);
});
