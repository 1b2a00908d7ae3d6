/**
 * Docker's multiplexed attach stream (no TTY), split as it arrives: frames
 * of an 8-byte header (byte 0 the stream: 1 stdout, 2 stderr, 3 the
 * engine's own error; bytes 4–7 the big-endian length) and the payload.
 * The whole-buffer form is `demux` in `docker/docker_api.ts`.
 *
 * @module
 */

/** Which host file a payload belongs to. */
export type StreamKind = "stdout" | "stderr";

/** A piece of one frame's payload, in order. */
export interface DemuxChunk {
  readonly stream: StreamKind;
  readonly bytes: Uint8Array;
}

const HEADER = 8;

/**
 * Splits a multiplexed stream chunk by chunk. A frame's payload may be
 * handed out in several pieces; headers may straddle chunks.
 */
export class Demuxer {
  readonly #header = new Uint8Array(HEADER);
  #headerHave = 0;
  #left = 0;
  #stream: StreamKind = "stdout";

  /** Whether the bytes so far end exactly at a frame boundary. */
  get atBoundary(): boolean {
    return this.#headerHave === 0 && this.#left === 0;
  }

  /** The payload pieces in `chunk` (views into it, not copies). */
  push(chunk: Uint8Array): DemuxChunk[] {
    const out: DemuxChunk[] = [];
    let off = 0;
    while (off < chunk.length) {
      if (this.#left === 0) {
        const take = Math.min(HEADER - this.#headerHave, chunk.length - off);
        this.#header.set(chunk.subarray(off, off + take), this.#headerHave);
        this.#headerHave += take;
        off += take;
        if (this.#headerHave < HEADER) break;
        this.#headerHave = 0;
        // 2 is stderr; 3 (the engine's own error text) goes there too.
        this.#stream = this.#header[0] === 2 || this.#header[0] === 3 ? "stderr" : "stdout";
        this.#left = new DataView(this.#header.buffer).getUint32(4);
        continue;
      }
      const take = Math.min(this.#left, chunk.length - off);
      out.push({ stream: this.#stream, bytes: chunk.subarray(off, off + take) });
      this.#left -= take;
      off += take;
    }
    return out;
  }
}
