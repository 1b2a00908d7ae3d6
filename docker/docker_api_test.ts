import assert from "node:assert/strict";
import { demux } from "./docker_api.ts";

const enc = new TextEncoder();
const dec = new TextDecoder();

function frame(stream: number, text: string): Uint8Array {
  const body = enc.encode(text);
  const out = new Uint8Array(8 + body.length);
  out[0] = stream;
  new DataView(out.buffer).setUint32(4, body.length);
  out.set(body, 8);
  return out;
}

Deno.test("a multiplexed log splits into stdout and stderr, in order", () => {
  const parts = [frame(1, "a"), frame(2, "err\n"), frame(1, "b\n"), frame(2, "")];
  const all = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    all.set(p, at);
    at += p.length;
  }
  const { stdout, stderr } = demux(all);
  assert.equal(dec.decode(stdout), "ab\n");
  assert.equal(dec.decode(stderr), "err\n");
  assert.equal(demux(new Uint8Array()).stdout.length, 0);
});
