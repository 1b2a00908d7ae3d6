/**
 * Where a capture's time goes, phase by phase, for the benchmark's
 * breakdown (bench/breakdown_capture.ts): a capture given a
 * {@linkcode PhaseClock} adds each phase's wall time to it; without one it
 * reads no clock.
 *
 * @module
 */

/** A capture's phases, in the order they run. */
export const CAPTURE_PHASES = [
  "identity checks",
  "admin verify",
  "upper listing",
  "compare",
  "store blobs",
  "patch text",
  "out files",
] as const;

/** One of {@linkcode CAPTURE_PHASES}. */
export type CapturePhase = typeof CAPTURE_PHASES[number];

/** Milliseconds per phase, summed over what was timed. */
export class PhaseClock {
  readonly ms: Record<CapturePhase, number> = Object.fromEntries(
    CAPTURE_PHASES.map((p) => [p, 0]),
  ) as Record<CapturePhase, number>;

  /** Runs `fn`, adding its wall time to `phase`. */
  time<T>(phase: CapturePhase, fn: () => T): T {
    const t0 = performance.now();
    try {
      return fn();
    } finally {
      this.ms[phase] += performance.now() - t0;
    }
  }
}

/** Runs `fn`, timed as `phase` when there is a clock. */
export function timed<T>(clock: PhaseClock | undefined, phase: CapturePhase, fn: () => T): T {
  return clock ? clock.time(phase, fn) : fn();
}
