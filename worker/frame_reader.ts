/**
 * A frame reader that survives bad frames. `protocol/frame.ts`'s reader
 * stops at the first malformed frame; the worker must instead answer each
 * one with an error event and read on (a bad frame from the daemon must not
 * end every running branch). A frame's length prefix is all it needs to
 * stay in step: a body that is not UTF-8 JSON is reported and dropped, and
 * an oversized one is reported and skipped without being buffered.
 *
 * @module
 */

import { FrameError, MAX_FRAME_BYTES } from "../protocol/frame.ts";

/** One frame's value, or why a frame was dropped. */
export type FrameItem = { readonly value: unknown } | { readonly error: FrameError };

const dec = new TextDecoder("utf-8", { fatal: true });

/**
 * Yields each frame's JSON value, or a {@linkcode FrameError} for a frame
 * that was dropped. A stream that ends inside a frame yields a last error.
 */
export async function* readFrameItems(
  stream: ReadableStream<Uint8Array>,
  max = MAX_FRAME_BYTES,
): AsyncGenerator<FrameItem> {
  const reader = stream.getReader();
  let buf: Uint8Array = new Uint8Array(0);
  let skip = 0;
  try {
    for (;;) {
      for (;;) {
        if (skip > 0) {
          const n = Math.min(skip, buf.length);
          buf = buf.subarray(n);
          skip -= n;
          if (skip > 0) break;
        }
        if (buf.length < 4) break;
        const len = new DataView(buf.buffer, buf.byteOffset, 4).getUint32(0);
        if (len > max) {
          yield { error: new FrameError(`frame of ${len} bytes exceeds ${max}`) };
          buf = buf.subarray(4);
          skip = len;
          continue;
        }
        if (buf.length < 4 + len) break;
        const body = buf.subarray(4, 4 + len);
        buf = buf.subarray(4 + len);
        let value: unknown;
        try {
          value = JSON.parse(dec.decode(body));
        } catch (cause) {
          yield { error: new FrameError("frame is not UTF-8 JSON", { cause }) };
          continue;
        }
        yield { value };
      }
      const { value, done } = await reader.read();
      if (done) {
        if (buf.length > 0 || skip > 0) {
          yield { error: new FrameError("stream ended inside a frame") };
        }
        return;
      }
      if (buf.length === 0) {
        buf = value;
      } else {
        const next = new Uint8Array(buf.length + value.length);
        next.set(buf);
        next.set(value, buf.length);
        buf = next;
      }
    }
  } finally {
    reader.releaseLock();
  }
}
