import assert from "node:assert/strict";
import fc from "fast-check";
import { assertProperty } from "../tests/_property.ts";
import { unzlibSync } from "fflate";
import { BASE85_ALPHABET, decodeBase85, encodeBase85 } from "./base85.ts";

Deno.test("base85 alphabet has 85 distinct characters", { permissions: {} }, () => {
  assert.equal(new Set(BASE85_ALPHABET).size, 85);
});

Deno.test("base85 matches vectors from git diff --binary", { permissions: {} }, () => {
  // git's `literal 0` line is "HcmV?d00001": 8 bytes, the zlib stream (level 1,
  // Git's default for binary patches) of nothing.
  const emptyZlib = new Uint8Array([0x78, 0x01, 0x03, 0x00, 0x00, 0x00, 0x00, 0x01]);
  assert.deepEqual(decodeBase85("cmV?d00001", 8), emptyZlib);
  assert.equal(encodeBase85(emptyZlib), "cmV?d00001");
  assert.deepEqual(unzlibSync(emptyZlib), new Uint8Array());
  // git's `literal 3` line for the bytes 00 01 02: "K" (11 bytes) + base85.
  const deflated = decodeBase85("cmZQzWC8#H2LJ>B", 11);
  assert.deepEqual(unzlibSync(deflated), new Uint8Array([0, 1, 2]));
  assert.equal(encodeBase85(deflated), "cmZQzWC8#H2LJ>B");
  assert.equal(encodeBase85(new Uint8Array([0xff, 0xff, 0xff, 0xff])), "|NsC0");
  assert.equal(encodeBase85(new Uint8Array([0, 0, 0, 1])), "00001");
  assert.equal(encodeBase85(new Uint8Array([1])), encodeBase85(new Uint8Array([1, 0, 0, 0])));
});

Deno.test("base85 round-trips any bytes", { permissions: {} }, (t) => {
  assertProperty(
    t,
    fc.property(fc.uint8Array({ maxLength: 300 }), (bytes) => {
      const text = encodeBase85(bytes);
      assert.equal(text.length, Math.ceil(bytes.length / 4) * 5);
      assert.deepEqual(decodeBase85(text, bytes.length), bytes);
    }),
    { numRuns: 300 },
  );
});

Deno.test("decodeBase85() rejects malformed text", { permissions: {} }, () => {
  assert.throws(() => decodeBase85("0000", 4), SyntaxError);
  assert.throws(() => decodeBase85("0000 ", 4), SyntaxError);
  assert.throws(() => decodeBase85('0000"', 4), SyntaxError);
  assert.throws(() => decodeBase85("|NsC1", 4), SyntaxError);
  assert.throws(() => decodeBase85("~~~~~", 4), SyntaxError);
});
