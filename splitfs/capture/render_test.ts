import assert from "node:assert/strict";
import fc from "fast-check";
import { assertProperty } from "../../tests/_property.ts";
import type { FileChange } from "../../patch/change.ts";
import { filesLine, writeFilePatch } from "../../patch/writer.ts";
import { BinarySummarizer, pathOfDiffLine } from "./render.ts";
import { TerminalEscaper } from "../../patch/terminal_escape.ts";

const enc = new TextEncoder();
const dec = new TextDecoder();

function concat(parts: readonly Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/** Feeds `input` in pieces cut at `cuts` and returns what came out (copied: buffers are reused). */
function summarize(input: Uint8Array, cuts: readonly number[] = [], label = "a"): string {
  const out: Uint8Array[] = [];
  const s = new BinarySummarizer(label, (b) => out.push(b.slice()));
  let from = 0;
  for (const cut of [...cuts].sort((x, y) => x - y)) {
    s.push(input.subarray(from, cut));
    from = cut;
  }
  s.push(input.subarray(from));
  s.end();
  return dec.decode(concat(out));
}

function escapeBytes(input: Uint8Array, cuts: readonly number[] = []): Uint8Array {
  const out: Uint8Array[] = [];
  const e = new TerminalEscaper((b) => out.push(b.slice()));
  let from = 0;
  for (const cut of [...cuts].sort((x, y) => x - y)) {
    e.push(input.subarray(from, cut));
    from = cut;
  }
  e.push(input.subarray(from));
  e.end();
  return concat(out);
}

const escape = (input: Uint8Array, cuts: readonly number[] = []) =>
  dec.decode(escapeBytes(input, cuts));

function patchOf(...changes: FileChange[]): Uint8Array {
  return concat(changes.map((c) => writeFilePatch(c).patch));
}

const file = (bytes: Uint8Array | string) => ({
  mode: 0o100644 as const,
  bytes: typeof bytes === "string" ? enc.encode(bytes) : bytes,
});

const binary = new Uint8Array(5000).map((_, i) => (i * 7) % 256);
binary[0] = 0;

Deno.test("BinarySummarizer replaces each GIT binary patch section and keeps the text", () => {
  const patch = patchOf(
    { path: "a.txt", old: file("one\n"), new: file("two\n") },
    { path: "img.bin", old: null, new: file(binary) },
    { path: "m.txt", old: file("x\n"), new: file("y\n") },
    { path: "old.bin", old: file(binary), new: file(new Uint8Array([0, 1, 2])) },
  );
  const text = summarize(patch, [], "lbl");
  const full = dec.decode(patch);
  assert.ok(full.includes("GIT binary patch"));
  assert.ok(!text.includes("GIT binary patch"));
  assert.ok(!text.includes("literal"));
  assert.match(text, /^diff --git a\/a.txt b\/a.txt\n/);
  assert.ok(text.includes("-one\n+two\n"));
  assert.ok(text.includes("-x\n+y\n"));
  assert.ok(
    text.includes(
      "diff --git a/img.bin b/img.bin\nnew file mode 100644\nindex 0000000000000000000000000000000000000000..",
    ),
  );
  assert.ok(
    text.includes(
      "\nbinary file changed: img.bin (5000 bytes; full patch in $SPLIT_DIR/lbl/diff.patch)\n" +
        "diff --git a/m.txt b/m.txt\n",
    ),
  );
  assert.ok(
    text.endsWith(
      "binary file changed: old.bin (3 bytes; full patch in $SPLIT_DIR/lbl/diff.patch)\n",
    ),
  );
});

Deno.test("BinarySummarizer names a quoted path as the files list does", () => {
  for (const path of ["tab\there.bin", 'q"uote.bin', "dir /x.bin", "ünï.bin", "a b.bin"]) {
    const patch = patchOf({ path, old: null, new: file(binary) });
    const text = summarize(patch);
    const shown = filesLine("A", path).slice(2, -1);
    assert.ok(
      text.includes(`binary file changed: ${shown} (5000 bytes;`),
      `${JSON.stringify(path)}: ${text}`,
    );
  }
  assert.equal(pathOfDiffLine('"a/x\\001y" "b/x\\001y"'), '"x\\001y"');
  assert.equal(pathOfDiffLine("a/a b/c b/a b/c"), "a b/c");
});

Deno.test("BinarySummarizer: the output does not depend on how the input is cut", (t) => {
  const patch = patchOf(
    { path: "a.txt", old: file("one\n"), new: file("two\nGIT binary patch\n") },
    { path: "b.bin", old: null, new: file(binary) },
    { path: "c.txt", old: file("diff --git x\n"), new: file("dd\nGG\n") },
    { path: "d.bin", old: file(binary), new: null },
  );
  const whole = summarize(patch);
  assert.ok(whole.includes("+GIT binary patch\n"), "a content line is never a section title");
  assertProperty(
    t,
    fc.property(
      fc.array(fc.integer({ min: 0, max: patch.length }), { maxLength: 12 }),
      (cuts) => summarize(patch, cuts) === whole,
    ),
    { numRuns: 300 },
  );
  // Every single-byte cut.
  for (let cut = 0; cut <= patch.length; cut += 7) assert.equal(summarize(patch, [cut]), whole);
});

Deno.test("BinarySummarizer passes a line longer than its buffer in pieces", () => {
  const long = "+" + "x".repeat(200_000) + "\n";
  const patch = enc.encode(
    `diff --git a/l.txt b/l.txt\n--- a/l.txt\n+++ b/l.txt\n@@ -0,0 +1 @@\n${long}` +
      "diff --git a/b b/b\nGIT binary patch\nliteral 7\n" + "d".repeat(100_000) +
      "\n\nliteral 0\nx\n\n" +
      "diff --git a/t b/t\n" + "d".repeat(70_000) + "\n",
  );
  const text = summarize(patch, [10, 70_000, 150_000]);
  assert.ok(text.includes(long));
  assert.ok(text.includes("binary file changed: b (7 bytes;"));
  assert.ok(!text.includes("literal"));
  assert.ok(text.endsWith("diff --git a/t b/t\n" + "d".repeat(70_000) + "\n"));
});

Deno.test("BinarySummarizer: a section cut short or without a literal hunk still gets its line", () => {
  assert.equal(
    summarize(enc.encode("diff --git a/x b/x\nGIT binary patch")),
    "diff --git a/x b/x\nbinary file changed: x (size unknown; full patch in $SPLIT_DIR/a/diff.patch)\n",
  );
  assert.equal(
    summarize(enc.encode("diff --git a/x b/x\nGIT binary patch\ndelta 12\nabc\n\n")),
    "diff --git a/x b/x\nbinary file changed: x (size unknown; full patch in $SPLIT_DIR/a/diff.patch)\n",
  );
  assert.equal(summarize(enc.encode("no newline")), "no newline");
  assert.equal(summarize(enc.encode("")), "");
});

Deno.test("TerminalEscaper escapes C0, DEL and C1 controls but keeps \\n, \\t and UTF-8", (t) => {
  const input = enc.encode("a\x1b[31mred\x07\r\n\tb\x7f é £ \u009b2J ünï\x00");
  const want = "a\\x1b[31mred\\x07\\x0d\n\tb\\x7f é £ \\xc2\\x9b2J ünï\\x00";
  assert.equal(escape(input), want);
  for (let cut = 0; cut <= input.length; cut++) assert.equal(escape(input, [cut]), want);
  assertProperty(
    t,
    fc.property(
      fc.array(fc.integer({ min: 0, max: input.length }), { maxLength: 8 }),
      (cuts) => escape(input, cuts) === want,
    ),
  );
  // A lead byte at the very end is held back, then given back unchanged.
  const lone = new Uint8Array([0x65, 0xc2]);
  assert.deepEqual(escapeBytes(lone), lone);
  assert.deepEqual(escapeBytes(lone, [1, 2]), lone);
});
