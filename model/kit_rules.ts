/**
 * Kit registrations (`docs/kits.md`, "Registering Kits"): what a registered
 * Kit command is, and the rules every registration obeys. One module, so the CLI (early, friendly
 * refusals), the daemon (the authority) and the journal (the last check
 * before a row is written) refuse the same things with the same words.
 *
 * Importing this module does nothing; it needs no permission.
 *
 * @module
 */

import { isEnvName, KIT_SET_ENV_NAMES, RESERVED_ENV_PREFIXES } from "./env_name.ts";
import { kitCommandProblem } from "./kit_name.ts";
import { DEFAULT_WALL_S, MAX_WALL_S } from "./limits.ts";

/** A registered Kit command: the name a split's argv branch (and any job) can start. */
export interface KitRecord {
  /** The command name (`KIT_NAME_RULE` of `model/kit_name.ts`). */
  readonly name: string;
  /** The image reference as the user gave it (`marsh-kit/claude:0123abcd4567`). */
  readonly image: string;
  /** The engine's id for it when it was registered (`sha256:<64 hex>`). */
  readonly imageId: string;
  /** Replaces the image's entrypoint; null keeps the image's own. */
  readonly entrypoint: readonly string[] | null;
  /** `none` (the default), `host`, or the name of an engine network. */
  readonly network: string;
  /** Names of the caller's variables passed into the Kit's containers. */
  readonly env: readonly string[];
  /** The wall-clock limit of one job, in seconds. */
  readonly wallS: number;
  /** The host directory mounted read-write at the image user's home. */
  readonly home: string;
  readonly createdMs: number;
}

/** `--network` when none is given (`docs/kits.md`, "Registering Kits"). */
export const DEFAULT_KIT_NETWORK = "none";
/** An engine network's name (Docker's rule). */
export const KIT_NETWORK_RULE = /^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,127}$/;
/** At most this many `--env` names per Kit. */
export const MAX_KIT_ENV = 64;
/** At most this many entrypoint words, each at most {@linkcode MAX_WORD} characters. */
export const MAX_ENTRYPOINT = 64;
const MAX_WORD = 4096;
const MAX_IMAGE = 255;
const MAX_PATH = 4096;
const IMAGE_ID = /^sha256:[0-9a-f]{64}$/;

/**
 * A registration that breaks a rule. It is a `TypeError` (the journal's
 * error for a record the types forbid); its message is for the user:
 * what is wrong and what to give instead.
 */
export class KitRuleError extends TypeError {
  override name = "KitRuleError";
}

/**
 * Checks a Kit command name: the Kit-name rule and none of
 * `RESERVED_KIT_NAMES` (`kitCommandProblem` of `model/kit_name.ts`).
 *
 * @throws {KitRuleError} naming the rule
 */
export function checkKitName(name: string): void {
  const problem = kitCommandProblem(name);
  if (problem !== null) throw new KitRuleError(problem);
}

/** @throws {KitRuleError} unless `network` is `none`, `host` or an engine network's name */
export function checkKitNetwork(network: string): void {
  if (!KIT_NETWORK_RULE.test(network)) {
    throw new KitRuleError(
      `invalid --network ${JSON.stringify(network)}: use none (the default), host, ` +
        "or the name of an engine network (letters, digits, '_', '.' and '-', starting with a letter or digit)",
    );
  }
}

/**
 * @throws {KitRuleError} unless `name` is a variable name outside `MARSH_*`
 *   and `DOCKER_*`, and neither `HOME` nor `PATH` (the worker sets those)
 */
export function checkKitEnvName(name: string): void {
  if (!isEnvName(name)) {
    throw new KitRuleError(
      `invalid --env ${JSON.stringify(name)}: give a variable's name ` +
        "(letters, digits and '_', not starting with a digit), not NAME=VALUE",
    );
  }
  const upper = name.toUpperCase();
  const set = KIT_SET_ENV_NAMES.find((n) => n === upper);
  if (set !== undefined) {
    throw new KitRuleError(
      `--env ${name} is refused: a Kit's ${set} is set in its container ` +
        `(${set === "HOME" ? "its home directory" : "the image's PATH after marsh's links"})`,
    );
  }
  const prefix = RESERVED_ENV_PREFIXES.find((p) => upper.startsWith(p));
  if (prefix !== undefined) {
    throw new KitRuleError(
      `--env ${name} is refused: ${prefix}* variables are marsh's and the engine's own, ` +
        "never passed into a Kit",
    );
  }
}

/** @throws {KitRuleError} when `names` has a bad name, a duplicate, or more than {@linkcode MAX_KIT_ENV} */
export function checkKitEnv(names: readonly string[]): void {
  if (names.length > MAX_KIT_ENV) {
    throw new KitRuleError(`too many --env names: ${names.length} (at most ${MAX_KIT_ENV})`);
  }
  const seen = new Set<string>();
  for (const n of names) {
    checkKitEnvName(n);
    if (seen.has(n)) throw new KitRuleError(`--env ${n} is given twice`);
    seen.add(n);
  }
}

/** @throws {KitRuleError} unless `wallS` is a whole number of seconds from 1 to `MAX_WALL_S` */
export function checkKitWall(wallS: number): void {
  if (!Number.isSafeInteger(wallS) || wallS < 1 || wallS > MAX_WALL_S) {
    throw new KitRuleError(wallMessage(String(wallS)));
  }
}

function wallMessage(got: string): string {
  return `invalid --wall ${
    JSON.stringify(got)
  }: give a whole number of seconds from 1 to ${MAX_WALL_S} (default ${DEFAULT_WALL_S})`;
}

/**
 * `--wall SECONDS` as typed: digits only (no sign, fraction or exponent).
 *
 * @throws {KitRuleError} for anything else, or a value outside 1..`MAX_WALL_S`
 */
export function parseKitWall(text: string): number {
  if (!/^[0-9]{1,9}$/.test(text)) throw new KitRuleError(wallMessage(text));
  const n = Number(text);
  if (n < 1 || n > MAX_WALL_S) throw new KitRuleError(wallMessage(text));
  return n;
}

/** @throws {KitRuleError} unless `words` is a non-empty list of non-empty words without NUL */
export function checkKitEntrypoint(words: readonly string[]): void {
  if (
    words.length === 0 || words.length > MAX_ENTRYPOINT ||
    !words.every((w) => typeof w === "string" && w.length > 0 && w.length <= MAX_WORD)
  ) {
    throw new KitRuleError(
      `invalid --entrypoint: give 1-${MAX_ENTRYPOINT} non-empty words, ` +
        `e.g. --entrypoint '["claude","--verbose"]'`,
    );
  }
  if (words.some((w) => w.includes("\0"))) {
    throw new KitRuleError("invalid --entrypoint: a word holds a NUL byte");
  }
}

/**
 * `--entrypoint` as typed: a JSON array of strings (`'["claude","-p"]'`),
 * or a single word (`/usr/local/bin/claude`).
 *
 * @throws {KitRuleError} for malformed JSON, a non-array, or several words not written as JSON
 */
export function parseKitEntrypoint(text: string): string[] {
  if (text.trimStart().startsWith("[")) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch (cause) {
      throw new KitRuleError(
        `invalid --entrypoint ${JSON.stringify(text)}: not a JSON array of strings (${
          (cause as Error).message
        })`,
        { cause },
      );
    }
    if (!Array.isArray(parsed) || !parsed.every((w) => typeof w === "string")) {
      throw new KitRuleError(
        `invalid --entrypoint ${JSON.stringify(text)}: not a JSON array of strings`,
      );
    }
    checkKitEntrypoint(parsed);
    return parsed;
  }
  if (text === "" || /\s/.test(text)) {
    throw new KitRuleError(
      `invalid --entrypoint ${JSON.stringify(text)}: give one word, or several as a JSON array: ` +
        `--entrypoint '${JSON.stringify(text.trim().split(/\s+/).filter((w) => w !== ""))}'`,
    );
  }
  checkKitEntrypoint([text]);
  return [text];
}

/** @throws {KitRuleError} unless `image` is a plausible image reference (the engine has the last word) */
export function checkKitImage(image: string): void {
  if (
    image === "" || image.length > MAX_IMAGE || /[\s\p{Cc}]/u.test(image) || image.startsWith("-")
  ) {
    throw new KitRuleError(
      `invalid --image ${
        JSON.stringify(image)
      }: give an image reference such as marsh-kit/fixture:0123abcd4567 or an image id`,
    );
  }
}

/** @throws {KitRuleError} unless `id` is `sha256:<64 hex>` */
export function checkKitImageId(id: string): void {
  if (!IMAGE_ID.test(id)) {
    throw new KitRuleError(`invalid image id ${JSON.stringify(id)}: expected sha256:<64 hex>`);
  }
}

/**
 * Checks a home directory's path as text: absolute, normalized (no `.`,
 * `..` or empty component), no NUL or comma, no `.marsh` component (a
 * project's state, which a Kit must never hold open read-write), and
 * not the control dir, one of its parents, or a path inside it other than
 * under `<control dir>/kits/`. Whether it exists is checked where the
 * file system may be read (`docker/kit_check_main.ts`), which checks the
 * real path too (naming the path the user gave as `given`).
 *
 * @throws {KitRuleError} naming what is wrong
 */
export function checkKitHome(path: string, controlDir: string, given: string = path): void {
  const shown = given === path
    ? JSON.stringify(path)
    : `${JSON.stringify(given)} (resolves to ${JSON.stringify(path)})`;
  const bad = (why: string) => new KitRuleError(`invalid --home ${shown}: ${why}`);
  if (!path.startsWith("/")) throw bad("give an absolute path");
  if (path.length > MAX_PATH || path.includes("\0") || path.includes(",")) {
    throw bad("the path may not hold a NUL byte or a comma");
  }
  const parts = path === "/" ? [] : path.slice(1).split("/");
  if (parts.some((p) => p === "" || p === "." || p === "..")) {
    throw bad("give a normalized path (no '.', '..' or '//')");
  }
  if (parts.includes(".marsh")) {
    throw bad("it is inside a project's .marsh directory, which only marsh may write");
  }
  const inside = (dir: string, p: string) =>
    p === dir || p.startsWith(dir === "/" ? "/" : `${dir}/`);
  if (inside(path, controlDir)) {
    throw bad(`it holds marsh's control dir ${controlDir}`);
  }
  if (inside(controlDir, path) && !path.startsWith(`${controlDir}/kits/`)) {
    throw bad(`it is inside marsh's control dir ${controlDir}`);
  }
}

/** The default home of Kit `name`: `<control dir>/kits/<name>/home`. */
export function defaultKitHome(controlDir: string, name: string): string {
  return `${controlDir}/kits/${name}/home`;
}

/**
 * Checks every field of a record (the home as an absolute path; the
 * control-dir rules are the daemon's, which knows its control dir).
 *
 * @throws {KitRuleError} for the first field that breaks its rule
 */
export function checkKitRecord(k: KitRecord): void {
  checkKitName(k.name);
  checkKitImage(k.image);
  checkKitImageId(k.imageId);
  if (k.entrypoint !== null) checkKitEntrypoint(k.entrypoint);
  checkKitNetwork(k.network);
  checkKitEnv(k.env);
  checkKitWall(k.wallS);
  if (typeof k.home !== "string" || !k.home.startsWith("/") || k.home.includes("\0")) {
    throw new KitRuleError(`invalid home ${JSON.stringify(k.home)}: expected an absolute path`);
  }
  if (!Number.isSafeInteger(k.createdMs) || k.createdMs < 0) {
    throw new KitRuleError(`invalid createdMs ${k.createdMs}: expected Unix milliseconds`);
  }
}
