/**
 * Length-prefixed frames: a 4-byte big-endian length, then that many bytes
 * of UTF-8 JSON. Every frame is bounded; an oversized or malformed frame is
 * a {@linkcode FrameError}, never an unbounded allocation.
 *
 * @module
 */

/** The largest frame any marsh process sends or accepts. */
export const MAX_FRAME_BYTES = 4 * 1024 * 1024;

/** A frame that cannot be read: too large, truncated, or not JSON. */
export class FrameError extends Error {
  override name = "FrameError";
}

const enc = new TextEncoder();
const dec = new TextDecoder("utf-8", { fatal: true });

/** Encodes one value as a frame. */
export function encodeFrame(value: unknown, max = MAX_FRAME_BYTES): Uint8Array {
  const body = enc.encode(JSON.stringify(value));
  if (body.length > max) throw new FrameError(`frame of ${body.length} bytes exceeds ${max}`);
  const out = new Uint8Array(4 + body.length);
  new DataView(out.buffer).setUint32(0, body.length);
  out.set(body, 4);
  return out;
}

/** Reads into `buf`: the byte count, or `null` at end of stream (as `Deno.Conn.read`). */
export type ReadInto = (buf: Uint8Array) => Promise<number | null>;

/**
 * Reads frames from a byte stream, yielding each decoded JSON value. Ends
 * cleanly at end of stream on a frame boundary; throws {@linkcode FrameError}
 * on a truncated, oversized or malformed frame.
 */
export async function* readFrames(
  stream: ReadableStream<Uint8Array>,
  max = MAX_FRAME_BYTES,
): AsyncGenerator<unknown> {
  const reader = stream.getReader();
  try {
    yield* framesOf(async () => {
      const { value, done } = await reader.read();
      return done ? null : value;
    }, max);
  } finally {
    reader.releaseLock();
  }
}

/**
 * {@linkcode readFrames} from a `read(2)`-like source: the CLI reads its
 * socket this way, without loading the runtime's web streams (about 5 ms of
 * every command's start: docs/guide.md, "How fast marsh starts").
 */
export function readFramesFrom(read: ReadInto, max = MAX_FRAME_BYTES): AsyncGenerator<unknown> {
  let chunk = new Uint8Array(64 * 1024);
  return framesOf(async () => {
    const n = await read(chunk);
    if (n === null) return null;
    const got = chunk.subarray(0, n);
    // The buffer is handed on (kept until its frame is whole): the next read gets a new one.
    chunk = new Uint8Array(64 * 1024);
    return got;
  }, max);
}

async function* framesOf(
  next: () => Promise<Uint8Array | null>,
  max: number,
): AsyncGenerator<unknown> {
  let buf: Uint8Array = new Uint8Array(0);
  for (;;) {
    while (buf.length >= 4) {
      const len = new DataView(buf.buffer, buf.byteOffset, 4).getUint32(0);
      if (len > max) throw new FrameError(`frame of ${len} bytes exceeds ${max}`);
      if (buf.length < 4 + len) break;
      const body = buf.subarray(4, 4 + len);
      // A view, not a copy: many small frames in one read stay linear.
      buf = buf.subarray(4 + len);
      let value: unknown;
      try {
        value = JSON.parse(dec.decode(body));
      } catch (cause) {
        throw new FrameError("frame is not UTF-8 JSON", { cause });
      }
      yield value;
    }
    const value = await next();
    if (value === null) {
      if (buf.length > 0) {
        throw new FrameError(`stream ended inside a frame (${buf.length} bytes)`);
      }
      return;
    }
    if (buf.length === 0) {
      buf = value;
    } else {
      const joined = new Uint8Array(buf.length + value.length);
      joined.set(buf);
      joined.set(value, buf.length);
      buf = joined;
    }
  }
}

/** Writes frames to a byte sink, one at a time. */
export class FrameWriter {
  readonly #writer: WritableStreamDefaultWriter<Uint8Array>;
  constructor(stream: WritableStream<Uint8Array>) {
    this.#writer = stream.getWriter();
  }
  async write(value: unknown): Promise<void> {
    await this.#writer.write(encodeFrame(value));
  }
  async close(): Promise<void> {
    await this.#writer.close();
  }
}
