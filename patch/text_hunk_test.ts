import assert from "node:assert/strict";
import { join } from "node:path";
import fc from "fast-check";
import { assertProperty } from "../tests/_property.ts";
import { textHunks } from "./text_hunk.ts";
import { git, tempDir, utf8 } from "./_testing.ts";

/** One byte per character (a TextDecoder "latin1" is really windows-1252). */
function latin1(text: string): Uint8Array {
  return Uint8Array.from(text, (c) => c.charCodeAt(0));
}

function hunks(oldText: string, newText: string): string | undefined {
  const out = textHunks(utf8(oldText), utf8(newText));
  return out === undefined ? undefined : new TextDecoder().decode(out);
}

function numbered(from: number, to: number): string {
  let text = "";
  for (let i = from; i <= to; i++) text += `${i}\n`;
  return text;
}

Deno.test("textHunks() is empty for equal contents", { permissions: {} }, () => {
  assert.equal(hunks("", ""), "");
  assert.equal(hunks("a\nb", "a\nb"), "");
});

Deno.test("textHunks() prints Git's hunk ranges", { permissions: {} }, () => {
  assert.equal(hunks("a\n", "b\n"), "@@ -1 +1 @@\n-a\n+b\n");
  assert.equal(hunks("", "a\nb\n"), "@@ -0,0 +1,2 @@\n+a\n+b\n");
  assert.equal(hunks("a\nb\n", ""), "@@ -1,2 +0,0 @@\n-a\n-b\n");
  assert.equal(hunks("a\n", "a\nb\n"), "@@ -1 +1,2 @@\n a\n+b\n");
  assert.equal(
    hunks(numbered(1, 20), numbered(1, 9) + "x\n" + numbered(11, 20)),
    "@@ -7,7 +7,7 @@\n 7\n 8\n 9\n-10\n+x\n 11\n 12\n 13\n",
  );
});

Deno.test("textHunks() merges hunks whose context touches", { permissions: {} }, () => {
  // Changes at lines 5 and 12 leave 6 lines between: one hunk.
  const merged = hunks(
    numbered(1, 20),
    numbered(1, 4) + "a\n" + numbered(6, 11) + "b\n" + numbered(13, 20),
  );
  assert.equal(merged?.match(/^@@/gm)?.length, 1);
  assert.match(merged!, /^@@ -2,14 \+2,14 @@\n/);
  // Changes at lines 5 and 13 leave 7 lines between: two hunks.
  const split = hunks(
    numbered(1, 20),
    numbered(1, 4) + "a\n" + numbered(6, 12) + "b\n" + numbered(14, 20),
  );
  assert.equal(
    split,
    "@@ -2,7 +2,7 @@\n 2\n 3\n 4\n-5\n+a\n 6\n 7\n 8\n" +
      "@@ -10,7 +10,7 @@\n 10\n 11\n 12\n-13\n+b\n 14\n 15\n 16\n",
  );
});

Deno.test("textHunks() marks a last line without a newline", { permissions: {} }, () => {
  assert.equal(
    hunks("a\nb", "a\nc"),
    "@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+c\n\\ No newline at end of file\n",
  );
  assert.equal(
    hunks("a\nb", "a\nb\n"),
    "@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+b\n",
  );
  assert.equal(
    hunks("x\na\nb", "y\na\nb"),
    "@@ -1,3 +1,3 @@\n-x\n+y\n a\n b\n\\ No newline at end of file\n",
  );
});

Deno.test("textHunks() keeps CR and any byte as content", { permissions: {} }, () => {
  const oldBytes = new Uint8Array([0x61, 0x0d, 0x0a, 0xff, 0x80, 0x0a, 0x0d]);
  const newBytes = new Uint8Array([0x61, 0x0d, 0x0a, 0xfe, 0x0a, 0x0d]);
  assert.deepEqual(
    textHunks(oldBytes, newBytes),
    latin1("@@ -1,3 +1,3 @@\n a\r\n-\xff\x80\n+\xfe\n \r\n\\ No newline at end of file\n"),
  );
});

Deno.test("textHunks() gives up after its timeout", { permissions: {} }, () => {
  // Nothing in common: the diff needs about 40 000 edit steps.
  const oldText = Array.from({ length: 20_000 }, (_, i) => `old ${i}\n`).join("");
  const newText = Array.from({ length: 20_000 }, (_, i) => `new ${i}\n`).join("");
  const started = Date.now();
  assert.equal(textHunks(utf8(oldText), utf8(newText), { timeoutMs: 1 }), undefined);
  assert.ok(Date.now() - started < 2000);
  // Insertions only never reach the diff, so they never time out.
  assert.ok(textHunks(utf8(oldText), utf8(oldText + newText), { timeoutMs: 0 }));
});

/** An edit that keeps the diff unambiguous: old lines are unique, new lines fresh. */
const editArb = fc.record({
  at: fc.nat(),
  remove: fc.nat({ max: 4 }),
  insert: fc.nat({ max: 4 }),
});

Deno.test("textHunks() matches git diff on unambiguous edits", {
  permissions: { read: true, write: true, run: ["git"], env: ["PATH"] },
}, async (t) => {
  await using dir = await tempDir();
  const oldFile = join(dir.path, "old");
  const newFile = join(dir.path, "new");
  let fresh = 0;
  await assertProperty(
    t,
    fc.asyncProperty(
      fc.nat({ max: 60 }),
      fc.array(editArb, { maxLength: 5 }),
      fc.boolean(),
      fc.boolean(),
      async (count, edits, oldEol, newEol) => {
        const oldLines = Array.from({ length: count }, (_, i) => `${i}`);
        const newLines = [...oldLines];
        for (const edit of edits) {
          const at = newLines.length === 0 ? 0 : edit.at % (newLines.length + 1);
          const added = Array.from({ length: edit.insert }, () => `${100_000 + fresh++} new`);
          newLines.splice(at, edit.remove, ...added);
        }
        const join = (lines: string[], eol: boolean) =>
          lines.length === 0 ? "" : lines.join("\n") + (eol ? "\n" : "");
        const oldText = join(oldLines, oldEol);
        const newText = join(newLines, newEol);
        await Deno.writeTextFile(oldFile, oldText);
        await Deno.writeTextFile(newFile, newText);
        const result = await git(dir.path, ["diff", "--no-index", "--no-color", "old", "new"]);
        const gitText = new TextDecoder().decode(result.stdout);
        const gitHunks = gitText.includes("\n@@ ")
          ? gitText.slice(gitText.indexOf("\n@@ ") + 1)
          : "";
        assert.equal(hunks(oldText, newText), gitHunks);
      },
    ),
    { numRuns: 80 },
  );
});
