import assert from "node:assert/strict";
import { isBinary } from "./is_binary.ts";
import { writeFilePatch } from "./writer.ts";
import { assertApplies, randomBytes, tempDir, type Tree, utf8 } from "./_testing.ts";

Deno.test("isBinary() looks for a NUL in the first 8000 bytes", { permissions: {} }, () => {
  assert.equal(isBinary(new Uint8Array()), false);
  assert.equal(isBinary(utf8("plain text\n")), false);
  assert.equal(isBinary(new Uint8Array([0])), true);
  const late = new Uint8Array(9000).fill(0x61);
  late[7999] = 0;
  assert.equal(isBinary(late), true);
  late[7999] = 0x61;
  late[8000] = 0;
  assert.equal(isBinary(late), false);
  assert.equal(isBinary(new Uint8Array([0xff, 0xfe, 0x80, 0x0d])), false);
});

/** Contents that look awkward in a patch but must still go as text and apply exactly. */
function awkwardTexts(): Record<string, [string | Uint8Array, string | Uint8Array]> {
  const long = "x".repeat(3 << 20);
  const lateNul = new Uint8Array(9000).fill(0x62);
  lateNul[8500] = 0;
  const lateNul2 = lateNul.slice();
  lateNul2[8700] = 0x0a;
  return {
    "cr": ["a\rb\rc\r", "a\rB\rc\r"],
    "lone-cr": ["\r", "\r\n\r"],
    "crlf": ["one\r\ntwo\r\nthree\r\n", "one\r\n2\r\nthree\r\nfour"],
    "crlf-eof": ["x\r\n", "x\r"],
    "patch-syntax": [
      "-minus\n+plus\n space\n\\ back\n@@ -1 +1 @@\ndiff --git a/x b/x\n--- a/x\n+++ b/x\n",
      "+minus\n-plus\n  space\n\\ No newline at end of file\n@@ -0,0 +1 @@\ndiff --git a/y b/y\n",
    ],
    "empty-lines": ["\n\n\n", "\n\n\n\n"],
    "long-line": [long + "\n", long + "y\n"],
    "invalid-utf8": [
      new Uint8Array([0xff, 0x0a, 0xc3, 0x28, 0x0a, 0xed, 0xa0, 0x80, 0x0a]),
      new Uint8Array([0xfe, 0x0a, 0xc3, 0x28, 0x0a, 0xf8, 0x88, 0x80, 0x80, 0x80]),
    ],
    "late-nul": [lateNul, lateNul2],
    "no-eol": ["last", "last\n"],
  };
}

Deno.test("awkward text contents go as text and round-trip through git apply", {
  permissions: { read: true, write: true, run: ["git"], env: ["PATH"] },
}, async () => {
  await using dir = await tempDir();
  const oldTree: Tree = new Map();
  const newTree: Tree = new Map();
  let patchLength = 0;
  const parts: Uint8Array[] = [];
  for (const [name, [before, after]] of Object.entries(awkwardTexts())) {
    const old = {
      mode: 0o100644 as const,
      bytes: typeof before === "string" ? utf8(before) : before,
    };
    const next = {
      mode: 0o100644 as const,
      bytes: typeof after === "string" ? utf8(after) : after,
    };
    assert.equal(isBinary(old.bytes) || isBinary(next.bytes), false, name);
    const { patch } = writeFilePatch({ path: name, old, new: next });
    const text = new TextDecoder().decode(patch);
    assert.ok(!text.includes("GIT binary patch"), `${name} is sent as text`);
    assert.ok(text.includes("\n@@ -"), `${name} has hunks`);
    oldTree.set(name, old);
    newTree.set(name, next);
    parts.push(patch);
    patchLength += patch.length;
  }
  const patch = new Uint8Array(patchLength);
  let at = 0;
  for (const part of parts) {
    patch.set(part, at);
    at += part.length;
  }
  await assertApplies(dir.path, oldTree, newTree, patch);
});

Deno.test("binary contents round-trip through git apply", {
  permissions: { read: true, write: true, run: ["git"], env: ["PATH"] },
}, async () => {
  await using dir = await tempDir();
  const blob = randomBytes(5000);
  blob[10] = 0;
  const edited = blob.slice();
  edited[4000] = edited[4000]! ^ 0xff;
  const oldTree: Tree = new Map([["bin", { mode: 0o100644, bytes: blob }]]);
  const newTree: Tree = new Map([["bin", { mode: 0o100644, bytes: edited }]]);
  const { patch } = writeFilePatch({
    path: "bin",
    old: oldTree.get("bin")!,
    new: newTree.get("bin")!,
  });
  assert.ok(new TextDecoder().decode(patch).includes("\nGIT binary patch\nliteral 5000\n"));
  await assertApplies(dir.path, oldTree, newTree, patch);
});
