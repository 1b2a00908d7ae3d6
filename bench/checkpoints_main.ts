/**
 * The `--checkpoints` branch of `deno task bench` (bench/main.ts): each size
 * measured by bench/checkpoints.ts, smallest first, then the report
 * (bench/checkpoints_report.ts) or its JSON.
 *
 * @module
 */

import { HardenedGit } from "./_git.ts";
import { ioPressure, loadavg } from "./machine.ts";
import { fsyncFloor } from "./fsync_floor.ts";
import { TREE_CACHE } from "./tree_cache.ts";
import { measureSize, type SizeCheckpoints } from "./checkpoints.ts";
import { type CheckpointsResult, renderCheckpoints, rowsOf } from "./checkpoints_report.ts";

/** Runs the checkpoint benchmark and prints it. */
export async function runCheckpoints(o: {
  readonly sizes: readonly number[];
  readonly runs: number;
  readonly serial: readonly number[];
  readonly seed: number;
  readonly json: boolean;
  /** The command line as given, for the report. */
  readonly args: readonly string[];
}): Promise<void> {
  const log = (l: string) => console.error(`bench: ${l}`);
  await using git = await HardenedGit.create();
  const start = await loadavg();
  const ioStart = await ioPressure();
  const fsync = await fsyncFloor(TREE_CACHE);
  log(`checkpoints: fsync floor p50 ${fsync.p50.toFixed(2)} ms, p90 ${fsync.p90.toFixed(2)} ms`);
  const sizes: SizeCheckpoints[] = [];
  for (const files of [...o.sizes].sort((a, b) => a - b)) {
    sizes.push(
      await measureSize(
        { sizes: o.sizes, runs: o.runs, serial: o.serial, seed: o.seed, git, log },
        files,
      ),
    );
  }
  const result: CheckpointsResult = {
    command: ["deno task bench", ...o.args].join(" "),
    runs: o.runs,
    sizes,
    load: { start, end: await loadavg() },
    io: { start: ioStart, end: await ioPressure() },
    fsync,
    cores: navigator.hardwareConcurrency,
  };
  console.log(
    o.json
      ? JSON.stringify(
        { schema: "marsh-bench-checkpoints/1", ...result, targets: rowsOf(result) },
        null,
        2,
      )
      : renderCheckpoints(result),
  );
}
