import assert from "node:assert/strict";
import { unzlibSync } from "fflate";
import { compresses, zlibDeflate } from "./_zlib.ts";
import { looseObject } from "./loose_object.ts";
import { randomBytes } from "./_testing.ts";

const text = (n: number) => new TextEncoder().encode("a line that repeats\n".repeat(n / 20));

Deno.test("compresses() samples contents from 64 KiB and says whether they shrink", {
  permissions: {},
}, () => {
  assert.equal(compresses(randomBytes(64 * 1024 - 1)), true, "below 64 KiB: always deflated");
  assert.equal(compresses(randomBytes(64 * 1024)), false);
  assert.equal(compresses(randomBytes(3 << 20)), false);
  assert.equal(compresses(text(64 * 1024)), true);
  // Noise with a compressible stretch at one of the samples still deflates.
  const mixed = randomBytes(400_000);
  mixed.set(text(20_000), 200_000);
  assert.equal(compresses(mixed), true);
});

Deno.test("zlibDeflate() writes zlib streams any inflater reads, at any level", {
  permissions: {},
}, () => {
  for (const bytes of [new Uint8Array(), randomBytes(100_000), text(100_000)]) {
    for (const level of [0, 1, 6, 9]) {
      assert.deepEqual(unzlibSync(zlibDeflate(bytes, level)), bytes, `level ${level}`);
    }
  }
});

Deno.test("looseObject() stores noise from 64 KiB and deflates what compresses", {
  permissions: {},
}, () => {
  const noise = randomBytes(200_000);
  const stored = looseObject(noise).compressed;
  // Stored blocks add 5 bytes each, the zlib header and checksum 6, the blob
  // header 12; level 1 on noise writes about 5% more than it was given.
  assert.ok(stored.length <= noise.length + 100, `${stored.length}`);
  assert.equal(stored[2]! & 0b110, 0, "the first block is a stored one");
  const lines = text(200_000);
  assert.ok(looseObject(lines).compressed.length < lines.length / 10);
});
