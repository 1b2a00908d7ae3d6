/**
 * Where the engine's time goes, for the benchmark's breakdown
 * (`deno task bench`, docs/engine.md "Performance"): the layer store and the
 * fork code add their phases' milliseconds here while a recorder is on.
 * Off (the default, and always in the service), a phase costs one
 * comparison and nothing is kept.
 *
 * Pure: needs no permission.
 *
 * @module
 */

let sink: Map<string, number> | null = null;

/**
 * Starts recording: until {@linkcode stopPhases}, every phase ended adds its
 * time under its name to the returned map (cleared first if recording).
 */
export function recordPhases(): Map<string, number> {
  sink = new Map();
  return sink;
}

/** Stops recording; the map {@linkcode recordPhases} returned keeps what it holds. */
export function stopPhases(): void {
  sink = null;
}

/** A phase's start: pass it to {@linkcode phaseEnd}. 0 when nothing records. */
export function phaseStart(): number {
  return sink === null ? 0 : performance.now();
}

/** Adds the time since `start` to phase `name`, when recording. */
export function phaseEnd(name: string, start: number): void {
  if (sink !== null) sink.set(name, (sink.get(name) ?? 0) + performance.now() - start);
}
