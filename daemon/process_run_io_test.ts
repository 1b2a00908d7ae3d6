/**
 * A `marsh run` job's FIFO relay (docs/rules.md "Running a registered
 * command as a job") on real FIFOs, with this test playing the worker:
 * output relayed as it is written, stdin written in order and closed, and
 * a worker that never opens its ends does not hang the relay.
 */

import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import type { ProcessOutReply } from "../protocol/process_run.ts";
import { FifoRelay, makeFifos } from "./process_run_io.ts";

const permissions: Deno.PermissionOptions = { read: true, write: true, run: ["mkfifo"] };

Deno.test({ name: "fifo relay: output out, stdin in, both ends closed", permissions }, async () => {
  const dir = await Deno.makeTempDir({ prefix: "marsh-relay-" });
  try {
    const fifos = await makeFifos(dir);
    assert.equal(Deno.statSync(fifos.stdout).isFifo, true);
    assert.equal(Deno.statSync(fifos.stdin).mode! & 0o777, 0o600);
    const got: ProcessOutReply[] = [];
    const errors: string[] = [];
    const relay = new FifoRelay(fifos, (f) => {
      got.push(f);
      return Promise.resolve();
    }, (what, e) => errors.push(`${what}: ${e}`));
    relay.start();
    // The worker's side, in its order: stdout, stderr, then stdin.
    const out = await Deno.open(fifos.stdout, { write: true });
    const err = await Deno.open(fifos.stderr, { write: true });
    const inp = await Deno.open(fifos.stdin, { read: true });
    await relay.stdin(new TextEncoder().encode("first\n"));
    await out.write(new TextEncoder().encode("to out\n"));
    await err.write(new TextEncoder().encode("to err\n"));
    await relay.stdin(new TextEncoder().encode("second\n"));
    relay.endStdin();
    const read = await new Response(inp.readable).text();
    assert.equal(read, "first\nsecond\n");
    out.close();
    err.close();
    await relay.finish();
    const text = (stream: string) =>
      got.filter((f) => f.stream === stream).map((f) => Buffer.from(f.data, "base64").toString())
        .join("");
    assert.deepEqual([text("stdout"), text("stderr")], ["to out\n", "to err\n"]);
    assert.deepEqual(errors, []);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test(
  { name: "fifo relay: a worker that never opened its ends does not hang it", permissions },
  async () => {
    const dir = await Deno.makeTempDir({ prefix: "marsh-relay-" });
    try {
      const relay = new FifoRelay(await makeFifos(dir), () => Promise.resolve(), () => {});
      relay.start();
      await relay.stdin(new TextEncoder().encode("never read\n"));
      const t0 = Date.now();
      await relay.finish();
      assert.ok(Date.now() - t0 < 2_000, `finish took ${Date.now() - t0} ms`);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
);
