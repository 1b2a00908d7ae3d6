/**
 * Feeds random and malformed frames to a daemon socket, one connection per
 * case, and reports what came back. Run by tests/daemon_fuzz_test.ts with
 * `--allow-net=unix:<socket>` only.
 *
 * @module
 */

import fc from "fast-check";
import { encodeFrame, readFrames } from "../../protocol/frame.ts";

const [socket, runsArg] = Deno.args;
if (!socket) throw new Error("usage: fuzz_client.ts SOCKET [RUNS]");

const value = fc.oneof(
  fc.jsonValue(),
  fc.record({
    v: fc.constantFrom(1, 2, "1"),
    t: fc.constantFrom(
      "split.create",
      "split.join",
      "splits.list",
      "splits.rm",
      "splits.cancel",
      "status",
      "spool",
      "join.release",
      "nope",
    ),
    id: fc.string(),
    branches: fc.anything(),
    cwd: fc.string(),
    env: fc.anything(),
    spool: fc.anything(),
  }, { requiredKeys: ["v", "t"] }),
);
const wire = fc.oneof(
  value.map((v) => encodeFrame(v)),
  fc.uint8Array({ maxLength: 64 }),
  // A length header past every bound, then a little of its body.
  fc.integer({ min: 4 * 1024 * 1024, max: 0xffffffff }).map((n) => {
    const b = new Uint8Array(8);
    new DataView(b.buffer).setUint32(0, n);
    return b;
  }),
);

let errors = 0, closed = 0, other = 0;
const otherTypes: string[] = [];
const samples = fc.sample(wire, { numRuns: Number(runsArg ?? 200), seed: 42 });
for (const bytes of samples) {
  const conn = await Deno.connect({ transport: "unix", path: socket });
  try {
    await conn.write(bytes);
    await conn.closeWrite();
    let saw = false;
    for await (const frame of readFrames(conn.readable)) {
      saw = true;
      const t = (frame as { t?: string }).t;
      if (t === "error") errors++;
      else {
        other++;
        otherTypes.push(String(t));
      }
    }
    if (!saw) closed++;
  } catch {
    closed++;
  } finally {
    try {
      conn.close();
    } catch {
      // The daemon closed it first.
    }
  }
}
console.log(JSON.stringify({ cases: samples.length, errors, closed, other, otherTypes }));
