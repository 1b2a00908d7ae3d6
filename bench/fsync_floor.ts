/**
 * This disk's fsync floor, for reading the checkpoint figures against
 * (docs/checkpoints.md "Measured"): a 4 KiB write then an fsync, `n` times,
 * in a directory on the disk the bench's trees are on. The drain to the
 * head's compare-and-swap holds several such barriers, so its ≤ 2 ms target
 * means little on a disk whose single fsync is near it.
 *
 * Needs `--allow-read` and `--allow-write` for `dir`.
 *
 * @module
 */

import { join } from "node:path";
import { percentile } from "./checkpoints_stats.ts";

/** What {@linkcode fsyncFloor} measured, in ms. */
export interface FsyncFloor {
  readonly p50: number;
  readonly p90: number;
  readonly n: number;
  readonly dir: string;
}

/** Times `n` fsyncs, each after writing 4 KiB to one file in `dir` (removed after). */
export async function fsyncFloor(dir: string, n = 200): Promise<FsyncFloor> {
  await Deno.mkdir(dir, { recursive: true });
  const path = join(dir, `.fsync-floor-${Deno.pid}`);
  const block = new Uint8Array(4096).fill(0x78);
  const ms: number[] = [];
  try {
    using f = await Deno.open(path, { write: true, create: true, truncate: true });
    for (let i = 0; i < n; i++) {
      await f.seek(0, Deno.SeekMode.Start);
      for (let off = 0; off < block.length;) off += await f.write(block.subarray(off));
      const t = performance.now();
      await f.sync();
      ms.push(performance.now() - t);
    }
  } finally {
    await Deno.remove(path);
  }
  return { p50: percentile(ms, 50), p90: percentile(ms, 90), n, dir };
}

/** The line the report prints for it. */
export function renderFsyncFloor(f: FsyncFloor): string {
  return `- this disk's fsync floor: a 4 KiB write (one block, rewritten) then fsync, ${f.n} times in ${f.dir}: ` +
    `p50 ${f.p50.toFixed(2)} ms, p90 ${f.p90.toFixed(2)} ms (the drain to the head's CAS holds ` +
    "several such barriers: read its ≤ 2 ms target against this)";
}
