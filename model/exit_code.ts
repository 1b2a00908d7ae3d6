/**
 * A process's exit as a shell reports it (docs/rules.md, "States and
 * records"): its code, or 128 plus the signal's number when a signal ended
 * it. One rule for a branch's `exited N` and a compare test's exit.
 *
 * Pure: needs no permission.
 *
 * @module
 */

const SIGNAL_NUMBERS: Readonly<Record<string, number>> = {
  SIGHUP: 1,
  SIGINT: 2,
  SIGQUIT: 3,
  SIGABRT: 6,
  SIGKILL: 9,
  SIGSEGV: 11,
  SIGPIPE: 13,
  SIGALRM: 14,
  SIGTERM: 15,
};

/** `code`, or 128 + the number of `signal` (128 for a signal not named here). */
export function exitCodeOf(code: number | null, signal: string | null): number {
  if (code !== null) return code;
  return 128 + (signal ? SIGNAL_NUMBERS[signal] ?? 0 : 0);
}
