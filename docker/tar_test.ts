import assert from "node:assert/strict";
import { readTar, type TarEntry, TarError, writeTar } from "./tar.ts";

const enc = new TextEncoder();
const dec = new TextDecoder();

const long = `${"d".repeat(120)}/${"e".repeat(120)}/${"f".repeat(90)}`;
const entries: TarEntry[] = [
  { type: "dir", path: "etc", mode: 0o755, uid: 0, gid: 0 },
  { type: "file", path: "etc/passwd", mode: 0o644, uid: 0, gid: 0, data: enc.encode("root\n") },
  { type: "dir", path: "home/kit", mode: 0o755, uid: 1000, gid: 1000 },
  { type: "symlink", path: "lib", mode: 0o777, uid: 0, gid: 0, target: "usr/lib" },
  { type: "dir", path: "tmp", mode: 0o1777, uid: 0, gid: 0 },
  {
    type: "file",
    path: `${"p".repeat(140)}/x`,
    mode: 0o755,
    uid: 0,
    gid: 0,
    data: new Uint8Array(513),
  },
  { type: "file", path: long, mode: 0o600, uid: 0, gid: 0, data: enc.encode("deep") },
  { type: "symlink", path: "far", mode: 0o777, uid: 0, gid: 0, target: `/${"t".repeat(150)}` },
  { type: "file", path: "héllo", mode: 0o644, uid: 0, gid: 0, data: new Uint8Array() },
];

Deno.test("the same entries give the same bytes, and they read back", () => {
  const a = writeTar(entries);
  const b = writeTar(entries.map((e) => ({ ...e })));
  assert.deepEqual(a, b);
  assert.equal(a.length % 512, 0);
  assert.deepEqual(readTar(a), entries);
});

Deno.test({
  name: "GNU tar reads what we write: names, long names, modes, owners, links",
  permissions: { run: ["tar"], write: true, read: true },
}, async () => {
  const dir = await Deno.makeTempDir({ prefix: "marsh-tar-" });
  try {
    await Deno.writeFile(`${dir}/a.tar`, writeTar(entries));
    const out = await new Deno.Command("tar", {
      args: ["--numeric-owner", "-tvf", `${dir}/a.tar`],
      env: { LC_ALL: "C.UTF-8", TZ: "UTC" },
    }).output();
    assert.equal(out.code, 0, dec.decode(out.stderr));
    const lines = dec.decode(out.stdout).trimEnd().split("\n");
    assert.equal(lines.length, entries.length);
    assert.match(lines[0]!, /^drwxr-xr-x 0\/0 +0 1970-01-01 00:00 etc\/$/);
    assert.match(lines[2]!, /^drwxr-xr-x 1000\/1000 .* home\/kit\/$/);
    assert.match(lines[3]!, /^lrwxrwxrwx 0\/0 .* lib -> usr\/lib$/);
    assert.match(lines[4]!, /^drwxrwxrwt /);
    assert.ok(lines[6]!.endsWith(` ${long}`), lines[6]);
    assert.ok(lines[7]!.endsWith(`far -> /${"t".repeat(150)}`), lines[7]);
    assert.ok(lines[8]!.endsWith(" héllo"), lines[8]);
    // And extracts the contents.
    const x = await new Deno.Command("tar", { args: ["-xf", `${dir}/a.tar`, "-C", dir, long] })
      .output();
    assert.equal(x.code, 0, dec.decode(x.stderr));
    assert.equal(await Deno.readTextFile(`${dir}/${long}`), "deep");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("unsafe member paths are refused", () => {
  for (const path of ["", "/etc", "a/../b", "./a", "a/", "a//b"]) {
    assert.throws(
      () => writeTar([{ type: "dir", path, mode: 0o755, uid: 0, gid: 0 }]),
      TarError,
      path,
    );
  }
});
