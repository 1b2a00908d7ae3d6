/**
 * What the CLI's commands need from their process, so that `main.ts` stays
 * the only place that touches signals and exits, and the commands can be
 * driven by other callers.
 *
 * @module
 */

/** The process's standard streams and surroundings. */
export interface CliIo {
  /** The caller's working directory. */
  cwd(): string;
  /** The exported environment (in a job: its offer for a child, `job/env_offer.ts`). */
  env(): Record<string, string>;
  /**
   * In a job only: the starting digests the offer carries (docs/rules.md,
   * "Environment forwarding"); sent with a launch as `envDigests`.
   */
  envDigests?(): Record<string, string>;
  readonly stdin: ReadableStream<Uint8Array>;
  readonly stdinIsTerminal: boolean;
  readonly stdoutIsTerminal: boolean;
  /** Progress lines go to stderr only when it is a terminal, never to a pipe or file. */
  readonly stderrIsTerminal: boolean;
  /** Writes all of `bytes` to stdout; false when its reader has gone (broken pipe). */
  write(bytes: Uint8Array): Promise<boolean>;
  /** Writes one line to stderr. */
  error(line: string): void;
}

/** Signal delivery, owned by `main.ts`. */
export interface Signals {
  /**
   * Runs `body` with every Ctrl-C (SIGINT) delivered to `onInterrupt`
   * instead of ending the process; the default comes back afterwards.
   */
  trapInterrupts<T>(onInterrupt: () => void, body: () => Promise<T>): Promise<T>;
  /**
   * Runs `body` with each of `names` delivered to `onSignal` instead of
   * ending the process; the defaults come back afterwards.
   */
  trapSignals<T>(
    names: readonly Deno.Signal[],
    onSignal: (name: Deno.Signal) => void,
    body: () => Promise<T>,
  ): Promise<T>;
}
