/**
 * The patch header reader against real Git's own
 * `git diff --binary --full-index --no-renames` output and against capture's
 * writer: quoted names, a name with a space before a slash, a type change,
 * a change of mode alone, an empty file, binary and text hunks.
 */

import assert from "node:assert/strict";
import { blobId } from "../../patch/blob_id.ts";
import { writeFilePatch } from "../../patch/writer.ts";
import { Dir } from "../fd/dir.ts";
import { gitOk, put, sandbox } from "../_testing.ts";
import { type PatchEntry, PatchHeaderError, readPatchEntries } from "./patch_headers.ts";

const PERMS: Deno.PermissionOptions = { run: true, read: true, write: true, env: true, ffi: true };
const enc = new TextEncoder();
const id = (s: string | Uint8Array) => blobId(typeof s === "string" ? enc.encode(s) : s);
const BIN = new Uint8Array([0, 1, 2, 3, 255, 0, 10, 13]);

function parse(path: string): PatchEntry[] {
  using file = Dir.openAbsoluteFile(path);
  return readPatchEntries(file);
}

/** What both Git and the writer must give for the changes made below. */
const EXPECTED: PatchEntry[] = [
  { path: "a /b.txt", old: null, new: { mode: 0o100644, blob: id("space\n") } },
  {
    path: "bin.dat",
    old: { mode: 0o100644, blob: id("text\n") },
    new: { mode: 0o100644, blob: id(BIN) },
  },
  { path: "empty", old: null, new: { mode: 0o100644, blob: id("") } },
  { path: "gone.txt", old: { mode: 0o100755, blob: id("gone\n") }, new: null },
  { path: "mode.sh", old: { mode: 0o100644, blob: null }, new: { mode: 0o100755, blob: null } },
  {
    path: 'q\t"é".txt',
    old: { mode: 0o100644, blob: id("q\n") },
    new: { mode: 0o100644, blob: id("Q\n") },
  },
  {
    path: "t",
    old: { mode: 0o100644, blob: id("was a file\n") },
    new: { mode: 0o120000, blob: id("gone.txt") },
  },
];

Deno.test({ name: "patch headers: real git diff output", permissions: PERMS }, async () => {
  using sb = sandbox("marsh-headers-");
  const opts = { home: sb.home };
  await gitOk(sb.root, ["init", "-q", "-b", "main"], opts);
  put(sb.root, "bin.dat", "text\n");
  put(sb.root, "gone.txt", "gone\n", 0o755);
  put(sb.root, "mode.sh", "#!/bin/sh\n");
  put(sb.root, 'q\t"é".txt', "q\n");
  put(sb.root, "t", "was a file\n");
  await gitOk(sb.root, ["add", "-A"], opts);
  await gitOk(sb.root, ["commit", "-q", "-m", "base"], opts);
  put(sb.root, "a /b.txt", "space\n");
  put(sb.root, "bin.dat", BIN);
  put(sb.root, "empty", "");
  Deno.removeSync(`${sb.root}/gone.txt`);
  Deno.chmodSync(`${sb.root}/mode.sh`, 0o755);
  put(sb.root, 'q\t"é".txt', "Q\n");
  Deno.removeSync(`${sb.root}/t`);
  Deno.symlinkSync("gone.txt", `${sb.root}/t`);
  await gitOk(sb.root, ["add", "-A"], opts);
  const patch = await new Deno.Command("git", {
    args: [
      "-c",
      "core.quotePath=false",
      "diff",
      "--cached",
      "--binary",
      "--full-index",
      "--no-renames",
    ],
    cwd: sb.root,
    env: { GIT_CONFIG_GLOBAL: "/dev/null", GIT_CONFIG_NOSYSTEM: "1", HOME: sb.home },
    stdout: "piped",
  }).output();
  assert.ok(patch.success);
  Deno.writeFileSync(`${sb.outside}/diff.patch`, patch.stdout);
  assert.deepEqual(parse(`${sb.outside}/diff.patch`), EXPECTED);
});

Deno.test(
  { name: "patch headers: capture's writer, and what it never writes", permissions: PERMS },
  () => {
    using sb = sandbox("marsh-headers-");
    const f = (s: string | Uint8Array, mode: 0o100644 | 0o100755 | 0o120000 = 0o100644) => ({
      mode,
      bytes: typeof s === "string" ? enc.encode(s) : s,
    });
    const parts = [
      writeFilePatch({ path: "a /b.txt", old: null, new: f("space\n") }),
      writeFilePatch({ path: "bin.dat", old: f("text\n"), new: f(BIN) }),
      writeFilePatch({ path: "empty", old: null, new: f("") }),
      writeFilePatch({ path: "gone.txt", old: f("gone\n", 0o100755), new: null }),
      writeFilePatch({ path: "mode.sh", old: f("#!/bin/sh\n"), new: f("#!/bin/sh\n", 0o100755) }),
      writeFilePatch({ path: 'q\t"é".txt', old: f("q\n"), new: f("Q\n") }),
      writeFilePatch({ path: "t", old: f("was a file\n"), new: f("gone.txt", 0o120000) }),
    ];
    const path = `${sb.outside}/diff.patch`;
    Deno.writeFileSync(path, new Uint8Array(parts.flatMap((p) => [...p.patch])));
    assert.deepEqual(parse(path), EXPECTED);
    // A section without an index line or modes, and a path named twice, are not capture's.
    Deno.writeTextFileSync(path, "diff --git a/x b/x\n--- a/x\n+++ b/x\n");
    assert.throws(() => parse(path), PatchHeaderError);
    Deno.writeFileSync(path, new Uint8Array([...parts[1]!.patch, ...parts[1]!.patch]));
    assert.throws(() => parse(path), /names "bin.dat" twice/);
  },
);
