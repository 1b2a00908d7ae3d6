/**
 * The raw list capture writes (`rawLine`) against real Git's
 * `git diff --raw --no-abbrev --no-renames`, and read back: the same
 * entries as the patch's headers, with both blobs named for a change of
 * mode alone; lines capture would not write are refused.
 */

import assert from "node:assert/strict";
import { blobId } from "../../patch/blob_id.ts";
import type { FileChange } from "../../patch/change.ts";
import { rawLine, writeFilePatch } from "../../patch/writer.ts";
import { Dir } from "../fd/dir.ts";
import { gitOk, put, sandbox } from "../_testing.ts";
import { type PatchEntry, PatchHeaderError, readPatchEntries } from "./patch_headers.ts";
import { parseRawList, readRawList } from "./raw_list.ts";

const PERMS: Deno.PermissionOptions = { run: true, read: true, write: true, env: true, ffi: true };
const enc = new TextEncoder();
const dec = new TextDecoder();
const BIN = new Uint8Array([0, 1, 2, 3, 255, 0, 10, 13]);
const f = (s: string | Uint8Array, mode: 0o100644 | 0o100755 | 0o120000 = 0o100644) => ({
  mode,
  bytes: typeof s === "string" ? enc.encode(s) : s,
});

/** The changes the Git repository below makes, in path order. */
const CHANGES: FileChange[] = [
  { path: "a /b.txt", old: null, new: f("space\n") },
  { path: "bin.dat", old: f("text\n"), new: f(BIN) },
  { path: "empty", old: null, new: f("") },
  { path: "gone.txt", old: f("gone\n", 0o100755), new: null },
  { path: "mode.sh", old: f("#!/bin/sh\n"), new: f("#!/bin/sh\n", 0o100755) },
  { path: 'q\t"é".txt', old: f("q\n"), new: f("Q\n") },
  { path: "t", old: f("was a file\n"), new: f("gone.txt", 0o120000) },
];

function rawOf(changes: readonly FileChange[]): string {
  return changes.map((c) => {
    const p = writeFilePatch(c);
    return rawLine(p.status, c.path, c.old, c.new, p.oldId, p.newId);
  }).join("");
}

Deno.test({ name: "raw list: what git diff --raw prints", permissions: PERMS }, async () => {
  using sb = sandbox("marsh-raw-");
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
  const git = await new Deno.Command("git", {
    args: [
      "-c",
      "core.quotePath=false",
      "diff",
      "--cached",
      "--raw",
      "--no-abbrev",
      "--no-renames",
    ],
    cwd: sb.root,
    env: { GIT_CONFIG_GLOBAL: "/dev/null", GIT_CONFIG_NOSYSTEM: "1", HOME: sb.home },
    stdout: "piped",
  }).output();
  assert.ok(git.success);
  assert.equal(rawOf(CHANGES), dec.decode(git.stdout));
});

Deno.test(
  { name: "raw list: read back as the patch's headers, blobs named", permissions: PERMS },
  () => {
    using sb = sandbox("marsh-raw-");
    Deno.writeFileSync(
      `${sb.outside}/diff.patch`,
      new Uint8Array(CHANGES.flatMap((c) => [...writeFilePatch(c).patch])),
    );
    Deno.writeTextFileSync(`${sb.outside}/raw`, rawOf(CHANGES));
    using out = Dir.openAbsolute(sb.outside);
    const fromRaw = readRawList(out);
    using patch = out.openFile("diff.patch");
    const same = blobId(enc.encode("#!/bin/sh\n"));
    const expected: PatchEntry[] = readPatchEntries(patch).map((e) =>
      e.path === "mode.sh"
        ? { path: e.path, old: { mode: 0o100644, blob: same }, new: { mode: 0o100755, blob: same } }
        : e
    );
    assert.deepEqual(fromRaw, expected);
    Deno.removeSync(`${sb.outside}/raw`);
    assert.equal(readRawList(out), null);
    assert.deepEqual(parseRawList(""), []);
  },
);

Deno.test("raw list: lines capture would not write are refused", () => {
  const id = blobId(enc.encode("x\n"));
  const zero = "0".repeat(40);
  const good = `:100644 100644 ${zero.slice(1)}1 ${id} M\tx\n`;
  assert.equal(parseRawList(good).length, 1);
  for (
    const bad of [
      good.slice(0, -1), // no newline at the end
      `:100644 100644 ${id} ${id} M\t\n`, // no path
      `:000000 100644 ${zero} ${id} M\tx\n`, // M without an old side
      `:100644 000000 ${id} ${zero} A\tx\n`, // A with an old side only
      `:100644 120000 ${id} ${id} M\tx\n`, // a type change called M
      `:100644 100755 ${id} ${zero} M\tx\n`, // a side with a mode and no blob
      `:040000 100644 ${id} ${id} M\tx\n`, // a directory
      `:100644 100644 ${id} ${id} M\t"x\n`, // a quote left open
    ]
  ) {
    assert.throws(() => parseRawList(bad), PatchHeaderError, JSON.stringify(bad));
  }
});
