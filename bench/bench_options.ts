/**
 * The command line of `deno task bench` (bench/main.ts): its flags, their
 * defaults, and which tables and sizes they select.
 *
 * @module
 */

import { parseArgs } from "node:util";
import type { ForkPolicy } from "./marsh_ops_types.ts";
import { SPLIT_BRANCHES } from "./split_e2e.ts";
import { KIT_BRANCHES, KIT_RUNS } from "./kit_e2e.ts";
import { CLI_RUNS } from "./cli.ts";

/** The usage line, printed by --help and after a bad command line. */
export const USAGE =
  "Usage: deno task bench [--sizes=1000,10000,100000] [--runs=N] [--seed=N] [--json] " +
  "[--split] [--strategies=auto,copy] [--branches=4] [--kit] [--kit-runs=10] [--kit-branches=1,4]" +
  "\n       deno task bench --cli [--cli-runs=21] [--json]" +
  "\n       deno task bench --resolve [--sizes=10000,100000] [--runs=11] [--seed=N] [--json]" +
  "\n       deno task bench --checkpoints [--sizes=10000,100000] [--runs=30] " +
  "[--serial=1,10,100] [--seed=N] [--json]" +
  "\n       deno task bench --tree [--runs=10] [--json]";
const DEFAULT_SIZES = [1_000, 10_000, 100_000];
/** The fork policies the per-size tables compare, in column order. */
export const POLICIES: readonly ForkPolicy[] = ["auto", "copy"];
/** Without --strategies, copy runs below this many files only. */
export const COPY_DEFAULT_BELOW = 100_000;
/** The end-to-end table runs on requested sizes of at least this many files. */
export const SPLIT_MIN_FILES = 10_000;
/** Sizes from here up get an end-to-end table only when --sizes names them. */
const SPLIT_ASKED_FROM = 100_000;
/** Its timed runs per branch count, unless --runs says otherwise. */
export const SPLIT_RUNS = 3;

/** A bad command line; the top level prints it with the usage and exits 2. */
export class UsageError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "UsageError";
  }
}

/** The parsed command line. */
export interface Options {
  readonly sizes: readonly number[];
  /** Whether --sizes was given (the end-to-end table runs on 100k only then). */
  readonly sizesGiven: boolean;
  /** Null: 5 runs, 3 from 100k files up. */
  readonly runs: number | null;
  readonly seed: number;
  readonly json: boolean;
  readonly help: boolean;
  /** Only the end-to-end split table. */
  readonly split: boolean;
  /** Null: auto everywhere, copy below {@linkcode COPY_DEFAULT_BELOW} files. */
  readonly strategies: readonly ForkPolicy[] | null;
  /** Branch counts of the end-to-end table. */
  readonly branches: readonly number[];
  /** Only the Kit table (with --split, the end-to-end table too). */
  readonly kit: boolean;
  /** Timed runs of the Kit table. */
  readonly kitRuns: number;
  /** Branch counts of the Kit table. */
  readonly kitBranches: readonly number[];
  /** Only the CLI start-up table (bench/cli.ts), with this many runs; null: not asked for. */
  readonly cliRuns: number | null;
  /** Only the resolution table (bench/resolve.ts). */
  readonly resolve: boolean;
  /** Only the checkpoint tables (bench/checkpoints.ts). */
  readonly checkpoints: boolean;
  /** Their serial series' counts. */
  readonly serial: readonly number[];
  /** Only `marsh run` against `docker run --rm` (bench/tree.ts). */
  readonly tree: boolean;
}

/** The checkpoint tables' sizes without --sizes. */
export const CHECKPOINT_SIZES: readonly number[] = [10_000, 100_000];
/** Their timed runs without --runs. */
export const CHECKPOINT_RUNS = 30;
/** Their serial counts without --serial (1,000 takes some minutes more: ask for it). */
const CHECKPOINT_SERIAL = [1, 10, 100];

function positiveInt(flag: string, text: string): number {
  if (!/^[0-9]+$/.test(text) || Number(text) < 1 || !Number.isSafeInteger(Number(text))) {
    throw new UsageError(`Invalid value for --${flag}: "${text}" is not a positive integer`);
  }
  return Number(text);
}

function intList(flag: string, text: string): number[] {
  return [...new Set(text.split(",").map((s) => positiveInt(flag, s.trim())))];
}

function policyList(text: string): ForkPolicy[] {
  const out: ForkPolicy[] = [];
  for (const s of text.split(",").map((p) => p.trim())) {
    const p = POLICIES.find((q) => q === s);
    if (p === undefined) {
      throw new UsageError(`Invalid value for --strategies: "${s}" is not one of auto, copy`);
    }
    if (!out.includes(p)) out.push(p);
  }
  return out;
}

/**
 * Parses the command line.
 *
 * @throws {UsageError} on an unknown flag or a bad value.
 */
export function parseOptions(args: readonly string[]): Options {
  let values;
  try {
    ({ values } = parseArgs({
      args: [...args],
      strict: true,
      allowPositionals: false,
      options: {
        sizes: { type: "string" },
        runs: { type: "string" },
        seed: { type: "string" },
        json: { type: "boolean" },
        help: { type: "boolean", short: "h" },
        split: { type: "boolean" },
        strategies: { type: "string" },
        branches: { type: "string" },
        kit: { type: "boolean" },
        "kit-runs": { type: "string" },
        "kit-branches": { type: "string" },
        cli: { type: "boolean" },
        "cli-runs": { type: "string" },
        resolve: { type: "boolean" },
        checkpoints: { type: "boolean" },
        serial: { type: "string" },
        tree: { type: "boolean" },
      },
    }));
  } catch (err) {
    throw new UsageError(err instanceof Error ? err.message : String(err), { cause: err });
  }
  return {
    sizes: values.sizes === undefined ? DEFAULT_SIZES : intList("sizes", values.sizes),
    sizesGiven: values.sizes !== undefined,
    runs: values.runs === undefined ? null : positiveInt("runs", values.runs),
    seed: values.seed === undefined ? 1 : positiveInt("seed", values.seed),
    json: values.json ?? false,
    help: values.help ?? false,
    split: values.split ?? false,
    strategies: values.strategies === undefined ? null : policyList(values.strategies),
    branches: values.branches === undefined ? SPLIT_BRANCHES : intList("branches", values.branches),
    kit: values.kit ?? false,
    kitRuns: values["kit-runs"] === undefined
      ? KIT_RUNS
      : positiveInt("kit-runs", values["kit-runs"]),
    kitBranches: values["kit-branches"] === undefined
      ? KIT_BRANCHES
      : intList("kit-branches", values["kit-branches"]),
    cliRuns: !values.cli
      ? null
      : values["cli-runs"] === undefined
      ? CLI_RUNS
      : positiveInt("cli-runs", values["cli-runs"]),
    resolve: values.resolve ?? false,
    checkpoints: values.checkpoints ?? false,
    serial: values.serial === undefined
      ? CHECKPOINT_SERIAL
      : intList("serial", values.serial).sort((a, b) => a - b),
    tree: values.tree ?? false,
  };
}

/** The fork policies measured at `files` files. */
export function policiesAt(options: Options, files: number): ForkPolicy[] {
  return options.strategies === null
    ? POLICIES.filter((p) => p === "auto" || files < COPY_DEFAULT_BELOW)
    : [...options.strategies];
}

/** Whether only some tables were asked for (--split, --kit): the per-size tables are not. */
export function onlySome(options: Options): boolean {
  return options.split || options.kit;
}

/** Whether the end-to-end split table runs: unless only the Kit table was asked for. */
export function splitWanted(options: Options): boolean {
  return options.split || !options.kit;
}

/** Whether the Kit table runs: unless only the end-to-end split table was asked for. */
export function kitWanted(options: Options): boolean {
  return options.kit || !options.split;
}

/** The sizes of the end-to-end table. */
export function splitSizes(options: Options): number[] {
  if (!splitWanted(options)) return [];
  const sizes = options.sizes.filter((f) =>
    f >= SPLIT_MIN_FILES && (f < SPLIT_ASKED_FROM || options.sizesGiven)
  );
  return sizes.length === 0 && options.split ? [SPLIT_MIN_FILES] : sizes;
}
