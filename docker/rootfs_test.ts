import assert from "node:assert/strict";
import { assembleRootfs, KIT_UID, parseFileCopy, RootfsError, type RootfsSpec } from "./rootfs.ts";
import { type TarEntry, writeTar } from "./tar.ts";
import { ensureBusybox } from "../tests/_setup.ts";

// run: the set-up installs busybox with apt when it is missing (tests/_setup.ts).
const perms: Deno.PermissionOptions = {
  read: true,
  write: true,
  env: ["PATH", "MARSH_DENO"],
  run: ["id", "apt-get"],
};

function spec(over: Partial<RootfsSpec> = {}): RootfsSpec {
  return {
    bins: ["git"],
    files: [],
    deno: Deno.env.get("MARSH_DENO") ?? Deno.execPath(),
    path: Deno.env.get("PATH") ?? "/usr/bin:/bin",
    cwd: "/",
    ...over,
  };
}

/** `assembleRootfs(spec(over))` on a host that has busybox. */
async function assemble(over: Partial<RootfsSpec> = {}): Promise<TarEntry[]> {
  await ensureBusybox();
  return await assembleRootfs(spec(over));
}

/** Follows the image's own symlinks, as a process inside it would. */
function lookup(entries: TarEntry[], path: string): TarEntry | undefined {
  const byPath = new Map(entries.map((e) => [e.path, e]));
  let cur = "";
  const parts = path.split("/").filter((c) => c !== "");
  for (let i = 0; i < parts.length; i++) {
    const next = cur === "" ? parts[i]! : `${cur}/${parts[i]}`;
    const e = byPath.get(next);
    if (!e) return undefined;
    if (e.type === "symlink" && i < parts.length - 1) {
      const target = e.target.startsWith("/") ? e.target : `${cur}/${e.target}`;
      return lookup(entries, `${target}/${parts.slice(i + 1).join("/")}`);
    }
    if (e.type === "symlink" && i === parts.length - 1) return e;
    cur = next;
  }
  return byPath.get(cur);
}

Deno.test({ name: "the same inputs give the same archive bytes", permissions: perms }, async () => {
  const a = writeTar(await assemble());
  const b = writeTar(await assemble());
  assert.deepEqual(a, b);
});

Deno.test({
  name: "busybox, the programs, their libraries, deno's libraries and the users, nothing else",
  permissions: perms,
}, async () => {
  const entries = await assemble();
  const paths = entries.map((e) => e.path);
  assert.deepEqual(paths, [...paths].sort(), "sorted");
  assert.equal(lookup(entries, "/bin/busybox")?.type, "file");
  const sh = lookup(entries, "/bin/sh");
  assert.ok(sh?.type === "symlink" && sh.target === "busybox", JSON.stringify(sh));
  assert.equal(lookup(entries, "/usr/bin/git")?.type, "file");
  assert.ok(lookup(entries, "/lib64/ld-linux-x86-64.so.2"), "the loader");
  for (const lib of ["libc.so.6", "libz.so.1", "libpcre2-8.so.0", "libm.so.6", "libgcc_s.so.1"]) {
    assert.ok(lookup(entries, `/lib/x86_64-linux-gnu/${lib}`), lib);
  }
  const passwd = lookup(entries, "/etc/passwd");
  assert.ok(passwd?.type === "file");
  assert.match(new TextDecoder().decode(passwd.data), new RegExp(`^kit:x:${KIT_UID}:`, "m"));
  assert.equal(lookup(entries, "/tmp")?.mode, 0o1777);
  assert.equal(lookup(entries, "/root")?.mode, 0o700);
  assert.equal(lookup(entries, "/home/kit")?.uid, KIT_UID);
  assert.ok(!paths.some((p) => p.startsWith("usr/share")), "no docs, no locales");
  for (const e of entries) {
    assert.ok(e.type !== "file" || (e.mode & 0o7000) === 0, `no set-id bits: ${e.path}`);
  }
});

Deno.test({
  name: "--file copies files and trees; a --bin wins over an applet",
  permissions: perms,
}, async () => {
  const dir = await Deno.makeTempDir({ prefix: "marsh-rootfs-" });
  try {
    await Deno.writeTextFile(`${dir}/app.conf`, "x=1\n");
    await Deno.mkdir(`${dir}/tree/sub`, { recursive: true });
    await Deno.writeTextFile(`${dir}/tree/sub/f`, "f");
    await Deno.symlink("sub/f", `${dir}/tree/link`);
    await Deno.writeTextFile(`${dir}/tool`, "#!/bin/bash\necho tool\n", { mode: 0o755 });
    const entries = await assemble({
      bins: ["./tool", "find"],
      cwd: dir,
      files: [parseFileCopy("app.conf:/etc/app.conf"), parseFileCopy(`${dir}/tree:/opt/tree`)],
    });
    const conf = lookup(entries, "/etc/app.conf");
    assert.ok(conf?.type === "file" && new TextDecoder().decode(conf.data) === "x=1\n");
    assert.equal(lookup(entries, "/opt/tree/sub/f")?.type, "file");
    const link = lookup(entries, "/opt/tree/link");
    assert.ok(link?.type === "symlink" && link.target === "sub/f");
    assert.equal(lookup(entries, `${dir}/tool`)?.type, "file", "the script");
    assert.ok(lookup(entries, "/usr/bin/bash"), "its interpreter");
    assert.equal(lookup(entries, "/usr/bin/find")?.type, "file", "GNU find, not the applet");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test(
  { name: "missing or clashing inputs are refused with the reason", permissions: perms },
  async () => {
    await assert.rejects(
      assemble({ bins: ["no-such-program-x"] }),
      RootfsError,
      "not found on PATH",
    );
    await assert.rejects(
      assemble({ files: [parseFileCopy("/etc/hostname:/etc/passwd")] }),
      RootfsError,
      "/etc/passwd is already in the image",
    );
    await assert.rejects(
      assemble({ files: [parseFileCopy("/no/such/file:/x")] }),
      RootfsError,
      "does not exist",
    );
    assert.throws(() => parseFileCopy("a"), RootfsError, "SRC:DST");
    assert.throws(() => parseFileCopy("a:relative"), RootfsError, "absolute");
    assert.throws(() => parseFileCopy("a:/x/../y"), RootfsError, "..");
    assert.throws(() => parseFileCopy("a:/"), RootfsError, "absolute");
  },
);
