import assert from "node:assert/strict";
import { join } from "node:path";
import type { FileChange, Side } from "./change.ts";
import { blobId } from "./blob_id.ts";
import { filesLine, writeFilePatch } from "./writer.ts";
import {
  assertApplies,
  assertAppliesThreeWay,
  changesBetween,
  gitOk,
  materialize,
  patchFor,
  randomBytes,
  tempDir,
  type Tree,
  utf8,
} from "./_testing.ts";

const dec = new TextDecoder();
const GIT = { read: true, write: true, run: ["git"], env: ["PATH"] };

function file(text: string, mode: 0o100644 | 0o100755 = 0o100644): Side {
  return { mode, bytes: utf8(text) };
}

function link(target: string): Side {
  return { mode: 0o120000, bytes: utf8(target) };
}

function numbered(from: number, to: number): string {
  let text = "";
  for (let i = from; i <= to; i++) text += `${i}\n`;
  return text;
}

/** Seeded noise with a NUL: different seeds share nothing, so Git sends literals, not deltas. */
function binary(seed: number, length: number): Side {
  const bytes = new Uint8Array(length);
  let x = seed * 0x9e3779b1 + 1;
  for (let i = 0; i < length; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    bytes[i] = x & 0xff;
  }
  bytes[1] = 0;
  return { mode: 0o100644, bytes };
}

/** Old and new trees covering every kind of section Git writes. */
function fixture(): { oldTree: Tree; newTree: Tree } {
  const oldTree: Tree = new Map<string, Side>([
    ["keep", file("1\n")],
    ["mod.txt", file(numbered(1, 20))],
    ["del.txt", file("1\n2\n")],
    ["empty-del", file("")],
    ["mode-only", file("1\n")],
    ["mode-and-content", file("1\n2\n", 0o100755)],
    ["link-retarget", link("target-a")],
    ["file-to-link", file("1\n")],
    ["link-to-file", link("x")],
    ["with space", file("1\n")],
    ["tab\there", file("1\n")],
    ['quote"d', file("1\n")],
    ["ünï", file("1\n")],
    ["bin", binary(1, 300)],
    ["bin-del", binary(2, 100)],
    ["dir/nested.txt", file("1\n2\n3\n")],
    ["noeol", file("1")],
    ["fd", file("1\n")],
    ["df/x", file("1\n")],
  ]);
  const newTree: Tree = new Map<string, Side>([
    ["keep", file("1\n")],
    ["mod.txt", file(numbered(1, 9) + "x\n" + numbered(11, 20))],
    ["empty-del-not", file("")],
    ["mode-only", file("1\n", 0o100755)],
    ["mode-and-content", file("1\n3\n")],
    ["link-retarget", link("target-b")],
    ["file-to-link", link("1")],
    ["link-to-file", file("2\n")],
    ["with space", file("2\n")],
    ["tab\there", file("2\n")],
    ["back\\slash sp", file("1\n2\n")],
    ["ünï", file("2\n")],
    ["bin", binary(3, 300)],
    ["bin-add", binary(4, 70)],
    ["dir/nested.txt", file("1\n2\n3\n4\n")],
    ["noeol", file("2")],
    ["add.txt", file("1\n2\n")],
    ["fd/x", file("1\n")],
    ["df", file("1\n")],
  ]);
  return { oldTree, newTree };
}

/** Collapses base85 data lines, which differ with the zlib implementation. */
function withoutBinaryData(text: string): string {
  return text.replace(/^(?:[A-Za-z][0-9A-Za-z!#$%&()*+\-;<=>?@^_`{|}~]+\n)+/gm, "<data>\n");
}

async function gitTree(repo: string, tree: Tree): Promise<string> {
  for await (const entry of Deno.readDir(repo)) {
    if (entry.name !== ".git") await Deno.remove(join(repo, entry.name), { recursive: true });
  }
  await materialize(repo, tree);
  await gitOk(repo, ["add", "--all"]);
  return dec.decode(await gitOk(repo, ["write-tree"])).trim();
}

Deno.test("writeFilePatch() writes what git diff-tree --binary writes", {
  permissions: GIT,
}, async () => {
  await using dir = await tempDir();
  const { oldTree, newTree } = fixture();
  const repo = join(dir.path, "repo");
  await Deno.mkdir(repo);
  await gitOk(repo, ["init", "--quiet", "."]);
  const before = await gitTree(repo, oldTree);
  const after = await gitTree(repo, newTree);
  const q = ["-c", "core.quotePath=false"];
  const expected = dec.decode(
    await gitOk(repo, [
      ...q,
      "diff-tree",
      "-r",
      "-p",
      "--full-index",
      "--binary",
      "--no-renames",
      "--no-color",
      before,
      after,
    ]),
  );
  const changes = changesBetween(oldTree, newTree);
  const { patch, results } = patchFor(changes);
  assert.equal(withoutBinaryData(dec.decode(patch)), withoutBinaryData(expected));

  const names = dec.decode(
    await gitOk(repo, [...q, "diff-tree", "-r", "--name-status", "--no-renames", before, after]),
  );
  assert.equal(results.map((r, i) => filesLine(r.status, changes[i]!.path)).join(""), names);

  await assertApplies(dir.path, oldTree, newTree, patch);
  await assertAppliesThreeWay(dir.path, oldTree, newTree, patch, results, changes);
});

Deno.test("a directory name ending in a space is quoted so git apply finds the path", {
  permissions: GIT,
}, async () => {
  await using dir = await tempDir();
  const oldTree: Tree = new Map<string, Side>([
    ["sp /mode", file("1\n", 0o100755)],
    ["sp /empty", file("")],
    ["sp /bin", binary(5, 50)],
    ["sp /text", file("1\n")],
  ]);
  const newTree: Tree = new Map<string, Side>([
    ["sp /mode", file("1\n")],
    ["sp /empty-new", file("")],
    ["sp /bin", binary(6, 50)],
    ["sp /text", file("2\n")],
  ]);
  const changes = changesBetween(oldTree, newTree);
  const { patch, results } = patchFor(changes);
  const text = dec.decode(patch);
  assert.ok(text.startsWith('diff --git "a/sp /bin" "b/sp /bin"\n'), text);
  assert.ok(text.includes('\n--- "a/sp /text"\t\n+++ "b/sp /text"\t\n'), text);
  await assertApplies(dir.path, oldTree, newTree, patch);
  await assertAppliesThreeWay(dir.path, oldTree, newTree, patch, results, changes);
});

Deno.test("writeFilePatch() reports status and blob ids", { permissions: {} }, () => {
  const a = file("a\n");
  const b = file("b\n");
  const check = (change: FileChange, status: string) => {
    const result = writeFilePatch(change);
    assert.equal(result.status, status);
    assert.equal(result.oldId, change.old ? blobId(change.old.bytes) : null);
    assert.equal(result.newId, change.new ? blobId(change.new.bytes) : null);
  };
  check({ path: "x", old: null, new: a }, "A");
  check({ path: "x", old: a, new: null }, "D");
  check({ path: "x", old: a, new: b }, "M");
  check({ path: "x", old: a, new: file("a\n", 0o100755) }, "M");
  check({ path: "x", old: a, new: link("a\n") }, "T");
  check({ path: "x", old: link("a"), new: link("b") }, "M");
});

Deno.test("writeFilePatch() rejects changes Git could not apply", { permissions: {} }, () => {
  const a = file("a\n");
  for (
    const path of [
      "",
      "/abs",
      "a//b",
      "a/",
      "./a",
      "a/../b",
      "..",
      "x/.git/config",
      ".GIT",
      "nul\0",
    ]
  ) {
    assert.throws(() => writeFilePatch({ path, old: null, new: a }), TypeError, path);
  }
  assert.throws(() => writeFilePatch({ path: "lone\ud800", old: null, new: a }), TypeError);
  assert.throws(() => writeFilePatch({ path: "x", old: null, new: null }), TypeError);
  assert.throws(() => writeFilePatch({ path: "x", old: a, new: file("a\n") }), TypeError);
  assert.throws(
    () =>
      writeFilePatch({ path: "x", old: null, new: { mode: 0o40000 as 0o100644, bytes: a.bytes } }),
    TypeError,
  );
  // Names Git accepts are fine.
  for (const path of [".gitignore", "a.git", "dir/.github/x", "...", " "]) {
    writeFilePatch({ path, old: null, new: a });
  }
});

Deno.test("filesLine() quotes like git diff --name-status", { permissions: {} }, () => {
  assert.equal(filesLine("A", "src/a b.ts"), "A\tsrc/a b.ts\n");
  assert.equal(filesLine("T", "tab\there"), 'T\t"tab\\there"\n');
  assert.equal(filesLine("D", "é"), "D\té\n");
});

Deno.test("a text diff past its timeout falls back to a binary literal that applies", {
  permissions: GIT,
}, async () => {
  await using dir = await tempDir();
  const before = Array.from({ length: 30_000 }, (_, i) => `line ${i} before\n`).join("");
  const after = Array.from({ length: 30_000 }, (_, i) => `line ${i} after\n`).join("");
  const oldTree: Tree = new Map([["big.txt", file(before)]]);
  const newTree: Tree = new Map([["big.txt", file(after)]]);
  const change = { path: "big.txt", old: oldTree.get("big.txt")!, new: newTree.get("big.txt")! };
  const fallback = dec.decode(writeFilePatch(change, { textDiffTimeoutMs: 1 }).patch);
  assert.ok(fallback.includes("\nGIT binary patch\nliteral "), "falls back to binary");
  assert.ok(!fallback.includes("\n@@ "));
  assert.match(
    fallback,
    /^diff --git a\/big.txt b\/big.txt\nindex [0-9a-f]{40}\.\.[0-9a-f]{40} 100644\nGIT/,
  );
  await assertApplies(dir.path, oldTree, newTree, utf8(fallback));
  // The same file with a small edit diffs as text within a short bound (not 0 ms:
  // on a loaded machine even a one-line diff of 30k lines can pass a 0 ms deadline).
  const small = { ...change, new: file(before.replace("line 7 before", "line 7 changed")) };
  assert.ok(
    dec.decode(writeFilePatch(small, { textDiffTimeoutMs: 500 }).patch).includes("\n@@ "),
  );
});

Deno.test("32 MiB files are written in seconds and apply", {
  permissions: GIT,
}, async () => {
  await using dir = await tempDir();
  const size = 32 << 20;
  const text = new Uint8Array(size);
  for (let i = 0; i < size; i++) text[i] = i % 64 === 63 ? 0x0a : 0x61 + ((i * 7 + (i >>> 6)) % 26);
  const edited = text.slice();
  for (const at of [100, 5_000_000, 20_000_000, size - 10]) edited[at] = 0x30;
  const random = randomBytes(size);
  const randomEdited = random.slice();
  randomEdited[size >> 1] = randomEdited[size >> 1]! ^ 1;
  const oldTree: Tree = new Map([
    ["text", { mode: 0o100644, bytes: text }],
    ["random", { mode: 0o100644, bytes: random }],
  ]);
  const newTree: Tree = new Map([
    ["text", { mode: 0o100644, bytes: edited }],
    ["random", { mode: 0o100644, bytes: randomEdited }],
  ]);
  const started = performance.now();
  const { patch, results } = patchFor(changesBetween(oldTree, newTree));
  const elapsed = performance.now() - started;
  assert.ok(elapsed < 20_000, `took ${elapsed} ms`);
  assert.ok(!dec.decode(results[1]!.patch).includes("GIT binary patch"), "text stays text");
  assert.ok(results[1]!.patch.length < 10_000);
  await assertApplies(dir.path, oldTree, newTree, patch);
});
