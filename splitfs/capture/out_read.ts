/**
 * `marsh logs` of a published branch: `out/<label>/stdout` or `stderr`
 * streamed in bounded pieces through the split's held out/ descriptor.
 *
 * Needs `--allow-ffi=<libc path>`.
 *
 * @module
 */

import type { Dir } from "../fd/dir.ts";
import { RefusedError } from "../errors.ts";
import { E, FsError } from "../fd/ffi.ts";
import { labelProblem } from "../../model/layout.ts";

const PIECE = 64 * 1024;

/**
 * Streams `out/<label>/<name>` under `out` to `emit` (which must copy what
 * it keeps: the buffer is reused) and returns the bytes read. The file is
 * opened without following a symlink, and a FIFO is refused, never read.
 *
 * @throws {RefusedError} when out/<label>/<name> does not exist or the label is invalid
 */
export function readOutFile(
  out: Dir,
  label: string,
  name: "stdout" | "stderr",
  emit: (bytes: Uint8Array) => void,
): number {
  const problem = labelProblem(label);
  if (problem) throw new RefusedError(problem);
  let dir: Dir;
  try {
    dir = out.openDir(label);
  } catch (error) {
    throw missing(error, `out/${label}`);
  }
  try {
    let file;
    try {
      file = dir.openFile(name);
    } catch (error) {
      throw missing(error, `out/${label}/${name}`);
    }
    using f = file;
    const buf = new Uint8Array(PIECE);
    let total = 0;
    for (;;) {
      const n = f.read(buf);
      if (n === 0) return total;
      emit(buf.subarray(0, n));
      total += n;
    }
  } finally {
    dir.close();
  }
}

function missing(error: unknown, what: string): unknown {
  if (error instanceof FsError && error.errno === E.ENOENT) {
    return new RefusedError(`${what} does not exist`);
  }
  return error;
}
