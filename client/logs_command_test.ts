/**
 * `marsh logs` against a stand-in connection: each chunk the daemon sends
 * reaches stdout whole, its control bytes escaped when stdout is a
 * terminal (pieces of the escaper put back together) and as sent otherwise.
 */
import assert from "node:assert/strict";
import type { DaemonFrame } from "../protocol/daemon.ts";
import type { DaemonConnection } from "./daemon_connect.ts";
import type { CliIo } from "./io.ts";
import { logsCommand } from "./logs_command.ts";

const enc = new TextEncoder();
const dec = new TextDecoder();

/** The daemon's side: these frames, then nothing; what the command sent is kept. */
function connection(frames: DaemonFrame[], sent: unknown[]): () => Promise<DaemonConnection> {
  const conn = {
    send(frame: unknown) {
      sent.push(frame);
      return Promise.resolve();
    },
    async *[Symbol.asyncIterator]() {
      yield* frames;
    },
    close() {},
    [Symbol.asyncDispose]: () => Promise.resolve(),
  };
  return () => Promise.resolve(conn as unknown as DaemonConnection);
}

function io(stdoutIsTerminal: boolean, out: Uint8Array[]): CliIo {
  return {
    cwd: () => "/",
    env: () => ({}),
    stdin: ReadableStream.from([]),
    stdinIsTerminal: false,
    stdoutIsTerminal,
    stderrIsTerminal: false,
    write(bytes) {
      out.push(bytes.slice());
      return Promise.resolve(true);
    },
    error(line) {
      throw new Error(`unexpected error line: ${line}`);
    },
  };
}

const CHUNKS = [
  enc.encode("plain \u001b[31mred\u001b[0m\ttab\n"),
  new Uint8Array([0x61, 0x00, 0x62, 0x7f, 0xc2, 0x9b, 0x63, 0x0a]),
];

function frames(): DaemonFrame[] {
  return [
    ...CHUNKS.map((c) => ({ v: 1, t: "logs.chunk", stream: "stdout", data: c.toBase64() })),
    { v: 1, t: "logs.end" },
  ] as DaemonFrame[];
}

Deno.test(
  { name: "logs on a terminal: each chunk escaped and written whole", permissions: {} },
  async () => {
    const out: Uint8Array[] = [];
    const sent: unknown[] = [];
    const status = await logsCommand(
      { id: "S1", label: "a", follow: false, streams: "both" },
      io(true, out),
      () => Promise.reject(new Error("nothing on stderr")),
      false,
      connection(frames(), sent),
    );
    assert.equal(status, 0);
    assert.deepEqual(out.map((b) => dec.decode(b)), [
      "plain \\x1b[31mred\\x1b[0m\ttab\n",
      "a\\x00b\\x7f\\xc2\\x9bc\n",
    ]);
    assert.deepEqual(sent, [
      { v: 1, t: "splits.logs", id: "S1", label: "a", follow: false, streams: "both" },
    ]);
  },
);

Deno.test(
  { name: "logs to a pipe: the bytes as the branch wrote them", permissions: {} },
  async () => {
    const out: Uint8Array[] = [];
    const status = await logsCommand(
      { id: "S1", label: "a", follow: false, streams: "both" },
      io(false, out),
      () => Promise.reject(new Error("nothing on stderr")),
      false,
      connection(frames(), []),
    );
    assert.equal(status, 0);
    assert.deepEqual(out, CHUNKS);
  },
);
