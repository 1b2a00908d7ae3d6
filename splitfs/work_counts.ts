/**
 * How much work an operation's steps do, counted rather than timed
 * (docs/checkpoints.md "Measured: the op path"): directory entries listed,
 * files read, index records built, hashed and decoded, barriers issued.
 * A test compares the counts of one small operation at two tree sizes, so a
 * step that starts walking the tree again fails it on any machine, however
 * loaded. Off (the default, and always in the service), a count costs one
 * comparison and nothing is kept.
 *
 * Pure: needs no permission.
 *
 * @module
 */

let sink: Map<string, number> | null = null;

/** What is counted. */
export const WORK = {
  listed: "directory entries listed",
  statted: "entries stat'd",
  read: "bytes read from files",
  built: "index records built",
  hashed: "index records hashed into tree ids",
  diffed: "index records compared by the delta",
  decoded: "index bytes decoded",
  fsync: "fsync calls",
  syncfs: "syncfs calls",
} as const;

/**
 * Starts counting: until {@linkcode stopWork}, every count adds to the
 * returned map (a new one each call).
 */
export function recordWork(): Map<string, number> {
  sink = new Map();
  return sink;
}

/** Stops counting; the map {@linkcode recordWork} returned keeps what it holds. */
export function stopWork(): void {
  sink = null;
}

/** Adds `n` to count `name`, when counting. */
export function countWork(name: string, n = 1): void {
  if (sink !== null) sink.set(name, (sink.get(name) ?? 0) + n);
}
