import assert from "node:assert/strict";
import fc from "fast-check";
import { assertProperty } from "../tests/_property.ts";
import { unzlibSync } from "fflate";
import { decodeBase85 } from "./base85.ts";
import { binaryPatch, literalHunk } from "./binary_hunk.ts";
import { randomBytes } from "./_testing.ts";

/**
 * Reads literal hunks back with the checks of git/git apply.c
 * `parse_binary_hunk`, returning each hunk's inflated content.
 */
function parseLiteralHunks(text: string): Uint8Array[] {
  const lines = text.split("\n");
  const hunks: Uint8Array[] = [];
  let i = 0;
  while (i < lines.length && lines[i] !== "") {
    const match = /^literal (\d+)$/.exec(lines[i]!);
    assert.ok(match, `hunk header: ${lines[i]}`);
    const size = Number(match[1]);
    i++;
    const chunks: Uint8Array[] = [];
    for (; lines[i] !== ""; i++) {
      const line = lines[i]!;
      assert.ok(line.length >= 6 && (line.length - 1) % 5 === 0, `line length: ${line}`);
      const maxBytes = ((line.length - 1) / 5) * 4;
      const c = line.charCodeAt(0);
      const bytes = c >= 0x41 && c <= 0x5a
        ? c - 0x41 + 1
        : c >= 0x61 && c <= 0x7a
        ? c - 0x61 + 27
        : -1;
      assert.ok(bytes > maxBytes - 4 && bytes <= maxBytes, `length character: ${line}`);
      chunks.push(decodeBase85(line.slice(1), bytes));
    }
    i++; // the blank line closing the hunk
    const deflated = new Uint8Array(chunks.reduce((n, c) => n + c.length, 0));
    let at = 0;
    for (const chunk of chunks) {
      deflated.set(chunk, at);
      at += chunk.length;
    }
    const content = unzlibSync(deflated);
    assert.equal(content.length, size);
    hunks.push(content);
  }
  assert.equal(i, lines.length - 1, "nothing after the hunks");
  return hunks;
}

const dec = new TextDecoder();

Deno.test("literalHunk() of empty content is one 8-byte line", { permissions: {} }, () => {
  const text = dec.decode(literalHunk(new Uint8Array()));
  assert.match(text, /^literal 0\nH[0-9A-Za-z!#$%&()*+\-;<=>?@^_`{|}~]{10}\n\n$/);
  assert.deepEqual(parseLiteralHunks(text), [new Uint8Array()]);
  // What git itself writes for an empty side parses the same way.
  assert.deepEqual(parseLiteralHunks("literal 0\nHcmV?d00001\n\n"), [new Uint8Array()]);
});

Deno.test("literalHunk() lines hold at most 52 bytes each", { permissions: {} }, () => {
  const content = randomBytes(1000);
  const lines = dec.decode(literalHunk(content)).split("\n");
  // Random bytes barely compress: about 1011 deflated bytes, 19 full lines.
  const full = lines.filter((l) => l.startsWith("z"));
  assert.ok(full.length >= 19);
  for (const line of full) assert.equal(line.length, 1 + 65);
});

Deno.test("binaryPatch() holds a forward then a reverse literal hunk", { permissions: {} }, (t) => {
  assertProperty(
    t,
    fc.property(
      fc.uint8Array({ maxLength: 400 }),
      fc.uint8Array({ maxLength: 400 }),
      (oldContent, newContent) => {
        const text = dec.decode(binaryPatch(oldContent, newContent));
        assert.ok(text.startsWith("GIT binary patch\n"));
        const hunks = parseLiteralHunks(text.slice("GIT binary patch\n".length));
        assert.equal(hunks.length, 2);
        assert.deepEqual(hunks[0], newContent);
        assert.deepEqual(hunks[1], oldContent);
      },
    ),
    { numRuns: 200 },
  );
});

Deno.test("large incompressible contents are stored and still parse back", {
  permissions: {},
}, () => {
  const noise = randomBytes(3 << 20);
  const text = new TextEncoder().encode("compressible line\n".repeat(200_000));
  const hunk = literalHunk(noise);
  // Stored blocks add a few bytes per 64 KiB; base85 adds a quarter, lines a little.
  assert.ok(hunk.length < noise.length * 1.3, `${hunk.length}`);
  assert.ok(literalHunk(text).length < text.length / 10);
  const [forward, reverse] = parseLiteralHunks(
    dec.decode(binaryPatch(text, noise)).slice("GIT binary patch\n".length),
  );
  assert.deepEqual(forward, noise);
  assert.deepEqual(reverse, text);
});
