import assert from "node:assert/strict";
import fc from "fast-check";
import { assertProperty } from "../tests/_property.ts";
import { encodeFrame } from "../protocol/frame.ts";
import { type FrameItem, readFrameItems } from "./frame_reader.ts";

function streamOf(chunks: Uint8Array[]): ReadableStream<Uint8Array> {
  return new ReadableStream({
    start(c) {
      for (const chunk of chunks) c.enqueue(chunk);
      c.close();
    },
  });
}

async function collect(chunks: Uint8Array[], max?: number): Promise<FrameItem[]> {
  const out: FrameItem[] = [];
  for await (const item of readFrameItems(streamOf(chunks), max)) out.push(item);
  return out;
}

function header(len: number): Uint8Array {
  const h = new Uint8Array(4);
  new DataView(h.buffer).setUint32(0, len);
  return h;
}

const concat = (parts: Uint8Array[]) => new Uint8Array(parts.flatMap((p) => [...p]));
const kinds = (items: FrameItem[]) => items.map((i) => "error" in i ? "error" : i.value);

Deno.test(
  { name: "frame reader: bad frames are reported and skipped", permissions: "none" },
  async () => {
    const notJson = concat([header(3), new Uint8Array([0x7b, 0x7b, 0x7b])]);
    const notUtf8 = concat([header(2), new Uint8Array([0xff, 0xfe])]);
    const oversized = concat([header(20), new Uint8Array(20).fill(0x61)]);
    const bytes = concat([
      encodeFrame(1),
      notJson,
      encodeFrame({ a: 2 }),
      notUtf8,
      oversized,
      encodeFrame("three"),
    ]);
    // Whole, and one byte at a time.
    for (const chunks of [[bytes], [...bytes].map((b) => new Uint8Array([b]))]) {
      assert.deepEqual(kinds(await collect(chunks, 16)), [
        1,
        "error",
        { a: 2 },
        "error",
        "error",
        "three",
      ]);
    }
  },
);

Deno.test({
  name: "frame reader: a stream cut inside a frame ends with an error",
  permissions: "none",
}, async () => {
  const good = encodeFrame({ a: 1 });
  assert.deepEqual(kinds(await collect([good, good.slice(0, 5)])), [{ a: 1 }, "error"]);
  assert.deepEqual(kinds(await collect([header(100), new Uint8Array(10)], 16)), ["error", "error"]);
  assert.deepEqual(kinds(await collect([])), []);
});

Deno.test(
  { name: "frame reader: any chunking of good frames reads them all", permissions: "none" },
  async (t) => {
    await assertProperty(
      t,
      fc.asyncProperty(
        fc.array(fc.jsonValue(), { maxLength: 8 }),
        fc.array(fc.integer({ min: 1, max: 64 }), { minLength: 1, maxLength: 8 }),
        async (values, cuts) => {
          const bytes = concat(values.map((v) => encodeFrame(v)));
          const chunks: Uint8Array[] = [];
          for (let off = 0, i = 0; off < bytes.length; i++) {
            const n = cuts[i % cuts.length]!;
            chunks.push(bytes.slice(off, off + n));
            off += n;
          }
          assert.deepEqual(
            kinds(await collect(chunks)),
            values.map((v) => JSON.parse(JSON.stringify(v))),
          );
        },
      ),
      { numRuns: 200 },
    );
  },
);

Deno.test({ name: "frame reader: random bytes never throw", permissions: "none" }, async (t) => {
  await assertProperty(
    t,
    fc.asyncProperty(fc.uint8Array({ maxLength: 300 }), async (bytes) => {
      await collect([bytes], 64);
    }),
    { numRuns: 500 },
  );
});
