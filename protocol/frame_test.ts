import assert from "node:assert/strict";
import fc from "fast-check";
import { assertProperty } from "../tests/_property.ts";
import { encodeFrame, FrameError, readFrames, readFramesFrom } from "./frame.ts";
import { parseSplitfsReply, parseSplitfsRequest, ProtocolError } from "./splitfs.ts";

function streamOf(chunks: Uint8Array[]): ReadableStream<Uint8Array> {
  return new ReadableStream({
    start(c) {
      for (const chunk of chunks) c.enqueue(chunk);
      c.close();
    },
  });
}

/** A `read(2)`-like source giving `chunks` in order, each cut to the caller's buffer. */
function readerOf(chunks: Uint8Array[]): (buf: Uint8Array) => Promise<number | null> {
  const left = chunks.map((c) => c.slice());
  return (buf) => {
    const c = left[0];
    if (c === undefined) return Promise.resolve(null);
    const n = Math.min(buf.length, c.length);
    buf.set(c.subarray(0, n));
    if (n === c.length) left.shift();
    else left[0] = c.subarray(n);
    return Promise.resolve(n);
  };
}

async function collect(chunks: Uint8Array[], max?: number): Promise<unknown[]> {
  const out: unknown[] = [];
  for await (const v of readFrames(streamOf(chunks), max)) out.push(v);
  // The CLI's read(2)-like path gives the same values and the same errors.
  const again: unknown[] = [];
  for await (const v of readFramesFrom(readerOf(chunks), max)) again.push(v);
  assert.deepEqual(again, out);
  return out;
}

Deno.test("frames round-trip whatever the chunking", async (t) => {
  await assertProperty(
    t,
    fc.asyncProperty(
      fc.array(fc.jsonValue(), { maxLength: 8 }),
      fc.array(fc.integer({ min: 1, max: 64 }), { minLength: 1, maxLength: 8 }),
      async (values, cuts) => {
        const bytes = new Uint8Array(values.flatMap((v) => [...encodeFrame(v)]));
        const chunks: Uint8Array[] = [];
        let off = 0, i = 0;
        while (off < bytes.length) {
          const n = cuts[i++ % cuts.length]!;
          chunks.push(bytes.slice(off, off + n));
          off += n;
        }
        const got = await collect(chunks);
        assert.deepEqual(got, values.map((v) => JSON.parse(JSON.stringify(v))));
      },
    ),
    { numRuns: 200 },
  );
});

Deno.test("an oversized frame is refused before it is buffered", async () => {
  const header = new Uint8Array(4);
  new DataView(header.buffer).setUint32(0, 1025);
  await assert.rejects(collect([header], 1024), FrameError);
  // Exactly at the bound is accepted.
  const body = `"${"x".repeat(1022)}"`;
  assert.equal(body.length, 1024);
  assert.deepEqual(await collect([encodeFrame(JSON.parse(body), 1024)], 1024), [JSON.parse(body)]);
  assert.throws(() => encodeFrame("x".repeat(1023), 1024), FrameError);
});

async function collectFrom(chunks: Uint8Array[], max?: number): Promise<unknown[]> {
  const out: unknown[] = [];
  for await (const v of readFramesFrom(readerOf(chunks), max)) out.push(v);
  return out;
}

Deno.test("the read(2)-like path: a frame larger than its buffer, and its errors", async () => {
  const big = { s: "y".repeat(200 * 1024) };
  const bytes = encodeFrame(big);
  assert.deepEqual(await collectFrom([bytes, encodeFrame(1)]), [big, 1]);
  await assert.rejects(collectFrom([bytes.slice(0, bytes.length - 1)]), FrameError);
  const header = new Uint8Array(4);
  new DataView(header.buffer).setUint32(0, 1025);
  await assert.rejects(collectFrom([header], 1024), FrameError);
});

Deno.test("truncated and malformed frames are errors, never hangs", async () => {
  const good = encodeFrame({ a: 1 });
  await assert.rejects(collect([good.slice(0, good.length - 1)]), FrameError);
  const bad = new Uint8Array([0, 0, 0, 3, 0x7b, 0x7b, 0x7b]);
  await assert.rejects(collect([bad]), FrameError);
  const notUtf8 = new Uint8Array([0, 0, 0, 2, 0xff, 0xfe]);
  await assert.rejects(collect([notUtf8]), FrameError);
});

Deno.test("random bytes never crash the reader: a value or a FrameError", async (t) => {
  await assertProperty(
    t,
    fc.asyncProperty(fc.uint8Array({ maxLength: 300 }), async (bytes) => {
      try {
        await collect([bytes], 256);
      } catch (error) {
        assert.ok(error instanceof FrameError, String(error));
      }
    }),
    { numRuns: 500 },
  );
});

Deno.test("request and reply parsers accept only their shapes", (t) => {
  assert.deepEqual(parseSplitfsRequest({ v: 1, t: "diff", old: "/a", new: "/b", files: false }), {
    v: 1,
    t: "diff",
    old: "/a",
    new: "/b",
    files: false,
  });
  for (
    const bad of [
      null,
      [],
      { v: 2, t: "diff", old: "/a", new: "/b", files: false },
      { v: 1, t: "diff", old: 1, new: "/b", files: false },
      { v: 1, t: "rm", path: "/" },
    ]
  ) {
    assert.throws(() => parseSplitfsRequest(bad), ProtocolError);
  }
  assert.throws(
    () => parseSplitfsReply({ v: 1, t: "error", kind: "weird", message: "x" }),
    ProtocolError,
  );
  assertProperty(
    t,
    fc.property(fc.jsonValue(), (x) => {
      try {
        parseSplitfsRequest(x);
      } catch (error) {
        assert.ok(error instanceof ProtocolError);
      }
    }),
  );
});

Deno.test("a fork request names a split and a label; nothing else is passed on", () => {
  const fork = { v: 1, t: "fork", id: "s1", label: "a" };
  assert.deepEqual(parseSplitfsRequest(fork), fork);
  // Unknown fields are dropped, as for every frame (shareIndex is gone: every fork has its own index).
  assert.deepEqual(parseSplitfsRequest({ ...fork, extra: 1, shareIndex: true }), fork);
});

Deno.test("an export-objects request takes checked labels and an optional parent", () => {
  const req = { v: 1, t: "export-objects", id: "s1", labels: ["a", "b"] };
  assert.deepEqual(parseSplitfsRequest(req), req);
  const nested = { ...req, parent: { split: "p1", label: "x" } };
  assert.deepEqual(parseSplitfsRequest(nested), nested);
  for (
    const labels of [
      "a",
      [1],
      ["../a"],
      ["a/b"],
      Array.from({ length: 17 }, (_, i) => `l${i}`),
    ]
  ) {
    assert.throws(() => parseSplitfsRequest({ ...req, labels }), ProtocolError);
  }
  assert.throws(
    () => parseSplitfsRequest({ ...req, parent: { split: "../x", label: "a" } }),
    ProtocolError,
  );
  const reply = { v: 1, t: "exported", target: "/p/.git/objects", written: 2, present: 1 };
  assert.deepEqual(parseSplitfsReply(reply), reply);
  assert.deepEqual(parseSplitfsReply({ ...reply, target: null }), { ...reply, target: null });
  assert.throws(() => parseSplitfsReply({ ...reply, written: "2" }), ProtocolError);
});
