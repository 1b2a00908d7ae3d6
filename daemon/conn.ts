/**
 * One caller's connection: frames in, frames out, and the authority of the
 * socket it arrived on. A connection carries one request and its stream; its
 * end is the stream's end.
 *
 * @module
 */

import { encodeFrame, FrameError, readFrames } from "../protocol/frame.ts";
import {
  type ClientFrame,
  type DaemonFrame,
  DaemonProtocolError,
  MAX_DAEMON_FRAME,
  parseClientFrame,
} from "../protocol/daemon.ts";

/** Who is calling, decided by the socket the daemon accepted on — never by a frame. */
export type Authority =
  | { readonly kind: "host" }
  | {
    readonly kind: "branch";
    readonly split: string;
    readonly label: string;
    readonly session: string;
  }
  | {
    /**
     * A Kit job, through its attempt's `/run/marsh/cap.sock` (docs/rules.md "The job capability").
     */
    readonly kind: "job";
    readonly job: string;
    readonly attempt: string;
    /** The split and branch the job runs for: its view is that branch's fork. */
    readonly split: string;
    readonly label: string;
    /**
     * The pool session of the job's split: nested splits share its pool (docs/rules.md
     * "Budgets and capabilities").
     */
    readonly session: string;
    /** The job's fork on the host (also its path inside the container). */
    readonly fork: string;
    /**
     * The job's mounts, which a child it starts gets verbatim (docs/rules.md
     * "Running a registered command as a job"); absent for a job recorded
     * before they were kept here: its split's branch gives them.
     */
    readonly view?: KitView;
  };

/**
 * What of the host a Kit job sees (docs/rules.md "Running a registered
 * command as a job"): `root` read-write at its own path, its Git admin dir
 * and object dirs, and paths inside `root` bound read-only over it.
 */
export interface KitView {
  /** The fork (or, for a host `marsh run`, the project) at its own path. */
  readonly root: string;
  /** `<split>/.admin/<label>` for a fork of a Git project, else null. */
  readonly admin: string | null;
  readonly objectDirs: readonly string[];
  /** Bound read-only where they exist (a host project's `.git` and `.marsh`). */
  readonly readOnly: readonly string[];
}

/** Frames waiting to be written before a slow reader is disconnected. */
const MAX_QUEUED = 64;

/** A caller's connection. */
export class Conn {
  readonly authority: Authority;
  readonly #conn: Deno.Conn;
  readonly #frames: AsyncGenerator<unknown>;
  #queue: Promise<void> = Promise.resolve();
  #queued = 0;
  #closed = false;
  readonly #closedSignal = Promise.withResolvers<void>();

  constructor(conn: Deno.Conn, authority: Authority) {
    this.#conn = conn;
    this.authority = authority;
    this.#frames = readFrames(conn.readable, MAX_DAEMON_FRAME);
  }

  /** Resolves when the connection has ended, from either side. */
  get closed(): Promise<void> {
    return this.#closedSignal.promise;
  }

  get isClosed(): boolean {
    return this.#closed;
  }

  /**
   * The next frame, `null` at the end of the stream. A malformed or oversized
   * frame gets an error frame and closes the connection.
   */
  async next(): Promise<ClientFrame | null> {
    if (this.#closed) return null;
    try {
      const r = await this.#frames.next();
      if (r.done) {
        this.close();
        return null;
      }
      return parseClientFrame(r.value);
    } catch (error) {
      if (error instanceof FrameError || error instanceof DaemonProtocolError) {
        await this.send({ v: 1, t: "error", code: 2, message: `bad frame: ${error.message}` });
        this.close();
        return null;
      }
      // A reset connection is the same as a dropped stream.
      this.close();
      return null;
    }
  }

  /**
   * Queues a frame. A reader more than MAX_QUEUED frames behind is
   * disconnected rather than allowed to grow the daemon's memory.
   */
  send(frame: DaemonFrame): Promise<void> {
    if (this.#closed) return Promise.resolve();
    if (this.#queued >= MAX_QUEUED) {
      this.close();
      return Promise.resolve();
    }
    this.#queued++;
    const bytes = encodeFrame(frame, MAX_DAEMON_FRAME);
    this.#queue = this.#queue.then(async () => {
      try {
        if (!this.#closed) await writeAll(this.#conn, bytes);
      } catch {
        this.close();
      } finally {
        this.#queued--;
      }
    });
    return this.#queue;
  }

  /** Waits until every queued frame is written (or the connection is gone). */
  flush(): Promise<void> {
    return this.#queue;
  }

  /** Closes the connection; a second call does nothing. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    try {
      this.#conn.close();
    } catch {
      // Already closed by the peer: nothing left to release.
    }
    this.#closedSignal.resolve();
  }
}

async function writeAll(conn: Deno.Conn, bytes: Uint8Array): Promise<void> {
  let off = 0;
  while (off < bytes.length) off += await conn.write(bytes.subarray(off));
}
