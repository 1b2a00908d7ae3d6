import assert from "node:assert/strict";
import fc from "fast-check";
import { assertProperty } from "../tests/_property.ts";
import { demux } from "../docker/docker_api.ts";
import { Demuxer } from "./kit_demux.ts";

function frame(kind: number, payload: Uint8Array): Uint8Array {
  const out = new Uint8Array(8 + payload.length);
  out[0] = kind;
  new DataView(out.buffer).setUint32(4, payload.length);
  out.set(payload, 8);
  return out;
}

function concat(parts: readonly Uint8Array[]): Uint8Array {
  const all = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    all.set(p, at);
    at += p.length;
  }
  return all;
}

Deno.test({
  name: "Demuxer: any chunking gives what the whole-buffer demux gives",
  permissions: "none",
}, (t) => {
  assertProperty(
    t,
    fc.property(
      fc.array(fc.tuple(fc.constantFrom(1, 2), fc.uint8Array({ maxLength: 40 })), {
        maxLength: 12,
      }),
      fc.array(fc.integer({ min: 1, max: 30 }), { minLength: 1, maxLength: 20 }),
      (frames, cuts) => {
        const bytes = concat(frames.map(([k, p]) => frame(k, p)));
        const d = new Demuxer();
        const got = { stdout: [] as Uint8Array[], stderr: [] as Uint8Array[] };
        let off = 0, i = 0;
        while (off < bytes.length) {
          const n = cuts[i++ % cuts.length]!;
          for (const piece of d.push(bytes.subarray(off, off + n))) {
            got[piece.stream].push(piece.bytes.slice());
          }
          off += n;
        }
        const want = demux(bytes);
        assert.deepEqual(concat(got.stdout), want.stdout);
        assert.deepEqual(concat(got.stderr), want.stderr);
        assert.ok(d.atBoundary);
      },
    ),
  );
});

Deno.test(
  { name: "Demuxer: the engine's own errors (3) go to stderr", permissions: "none" },
  () => {
    const d = new Demuxer();
    const pieces = d.push(frame(3, new TextEncoder().encode("oops")));
    assert.deepEqual(pieces.map((p) => p.stream), ["stderr"]);
    assert.ok(d.atBoundary);
    d.push(frame(1, new Uint8Array(3)).subarray(0, 5));
    assert.ok(!d.atBoundary);
  },
);
