/**
 * TEST ONLY. The socket end of a stand-in for the daemon: the real daemon
 * (`daemon/`) is being built in parallel, so the CLI's tests run the real
 * CLI against this stand-in. It listens on the socket given as its argument
 * (mode 0600, as the daemon's) and bridges every connection to its stdio as
 * JSON lines; the test process (`_fake_daemon.ts`) decides every reply.
 *
 * It is a separate process with its own flags (`--allow-net=unix:<socket>`)
 * because the test runner's own flags do not reach a Unix socket.
 *
 * Out, one per line: `{"ev":"listening"}`, `{"ev":"conn","c":N}`,
 * `{"ev":"frame","c":N,"frame":F}` (F as `parseClientFrame` returns it),
 * `{"ev":"bad","c":N,"error":"..."}`, `{"ev":"end","c":N}`.
 * In, one per line: `{"cmd":"send","c":N,"frame":F}`, `{"cmd":"close","c":N}`.
 * Its stdin closing stops it and removes the socket.
 *
 * @module
 */

import { MAX_DAEMON_FRAME, parseClientFrame } from "../protocol/daemon.ts";
import { encodeFrame, readFrames } from "../protocol/frame.ts";

const enc = new TextEncoder();
const conns = new Map<number, Deno.UnixConn>();

function emit(event: Record<string, unknown>): void {
  const bytes = enc.encode(`${JSON.stringify(event)}\n`);
  let off = 0;
  while (off < bytes.length) off += Deno.stdout.writeSync(bytes.subarray(off));
}

async function serve(conn: Deno.UnixConn, c: number): Promise<void> {
  try {
    for await (const value of readFrames(conn.readable, MAX_DAEMON_FRAME)) {
      try {
        emit({ ev: "frame", c, frame: parseClientFrame(value) });
      } catch (error) {
        emit({ ev: "bad", c, error: String(error) });
      }
    }
  } catch (error) {
    emit({ ev: "bad", c, error: String(error) });
  }
  emit({ ev: "end", c });
}

async function commands(): Promise<void> {
  const decoder = new TextDecoder();
  let buf = "";
  for await (const bytes of Deno.stdin.readable) {
    buf += decoder.decode(bytes, { stream: true });
    for (let nl = buf.indexOf("\n"); nl >= 0; nl = buf.indexOf("\n")) {
      const cmd = JSON.parse(buf.slice(0, nl));
      buf = buf.slice(nl + 1);
      const conn = conns.get(cmd.c);
      if (!conn) continue;
      if (cmd.cmd === "send") {
        const frame = encodeFrame(cmd.frame, MAX_DAEMON_FRAME);
        try {
          let off = 0;
          while (off < frame.length) off += await conn.write(frame.subarray(off));
        } catch (error) {
          emit({ ev: "bad", c: cmd.c, error: String(error) });
        }
      } else if (cmd.cmd === "close") {
        conns.delete(cmd.c);
        try {
          conn.close();
        } catch (error) {
          if (!(error instanceof Deno.errors.BadResource)) throw error;
          // The client left first.
        }
      }
    }
  }
}

if (import.meta.main) {
  const path = Deno.args[0];
  if (!path) throw new Error("usage: _fake_daemon_main.ts SOCKET");
  const listener = Deno.listen({ transport: "unix", path });
  Deno.chmodSync(path, 0o600);
  emit({ ev: "listening" });
  void (async () => {
    let n = 0;
    for await (const conn of listener) {
      const c = n++;
      conns.set(c, conn);
      emit({ ev: "conn", c });
      void serve(conn, c);
    }
  })();
  await commands();
  listener.close();
  Deno.exit(0);
}
