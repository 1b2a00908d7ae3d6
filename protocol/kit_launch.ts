/**
 * The launch of one argv branch as a Kit container (docs/rules.md "Branches"): what the daemon
 * tells the worker, and the one parser that validates it at the boundary. The worker turns it into
 * exactly one container (`worker/kit_container.ts`).
 *
 * @module
 */

import { isEnvEntryName, isEnvName } from "../model/env_name.ts";
import { isLinkName, KIT_NAME_RULE, MAX_KIT_NAME } from "../model/kit_name.ts";
import { KIT_NETWORK_RULE } from "../model/kit_rules.ts";
import { MAX_WALL_S } from "../model/limits.ts";
import { CAP_SOCKET, type JobJsonBase } from "./job_capability.ts";
import { ATTEMPT_ID, MAX_OUTPUT_LIMIT, MAX_PATH_BYTES } from "./launch_fields.ts";

/** Most arguments in `argv`. */
export const MAX_ARGS = 65_536;
/** Most bytes of `argv`, counted like `execve` does (each argument plus its NUL). */
export const MAX_ARGV_BYTES = 1024 * 1024;
/** Most entries in `env`, and most bytes of its `NAME=VALUE` entries. */
export const MAX_ENV_ENTRIES = 4096;
export const MAX_ENV_BYTES = 1024 * 1024;
/** Most object directories bound read-only. */
export const MAX_OBJECT_DIRS = 16;
/** Longest job, split or label id carried into a container label. */
export const MAX_ID_BYTES = 256;
/** Most names in a capability's `spawn` and `registered` lists. */
export const MAX_LINK_NAMES = 4096;

/** A registered Kit command as the worker needs it. */
export interface KitSpec {
  /** The registered command name; `argv[0]` of a launch. */
  readonly name: string;
  /** The image reference (`marsh-kit/<name>:<tag>`) or id. */
  readonly image: string;
  /**
   * The kit's command in the image. Set: the container's `ENTRYPOINT`, and it
   * gets `argv[1..]`. `null`: the image's own entrypoint (if any) stays and
   * the command is `argv`, so `argv[0]` (the kit name) must be a program on the
   * image's `PATH` (or an entrypoint script must `exec "$@"`).
   */
  readonly entrypoint: readonly string[] | null;
  /**
   * Docker network mode: `none` unless the kit says otherwise (docs/architecture.md
   * "Platform choices").
   */
  readonly network: string;
  /** Names passed from the caller's env, when the caller has them (`isReservedEnvName` of `model/env_name.ts` never). */
  readonly env: readonly string[];
  /** Wall clock in seconds, from the container's start. */
  readonly wallS: number;
  /** The host directory bound read-write at the image user's home. */
  readonly home: string;
}

/** One argv branch attempt (`::: LABEL CMD ARGS...`) to run as a Kit container. */
export interface KitLaunch {
  readonly job: string;
  /** Names the container (`marsh-<attempt>`) and its labels; {@linkcode ATTEMPT_ID}. */
  readonly attempt: string;
  readonly split: string;
  readonly label: string;
  readonly kit: KitSpec;
  /** `CMD ARGS` verbatim; `CMD` is the kit name. */
  readonly argv: readonly string[];
  /**
   * The variables the job receives (`daemon/job_env_forward.ts`). The worker
   * checks them again: one passes when it may cross to a job
   * (`crossesToJob` of `model/job_env.ts`) or is one of `kit.env`, never when
   * it is reserved (`isReservedEnvName`).
   */
  readonly env: Readonly<Record<string, string>>;
  /** Absolute host path of the fork root. */
  readonly fork: string;
  /** Absolute path inside the fork (the same path inside the container). */
  readonly cwd: string;
  /** `<split>/.admin/<label>` for Git projects, else `null`. */
  readonly admin: string | null;
  /** `store.git/objects` and the user's `.git/objects`, bound read-only. */
  readonly objectDirs: readonly string[];
  /** The spool file (host path), or `null` for empty stdin. */
  readonly stdin: string | null;
  /** Host files the worker creates (`O_CREAT | O_EXCL`, mode 0600). */
  readonly stdout: string;
  readonly stderr: string;
  /** Bytes of stdout and stderr together that are kept; more stops the container. */
  readonly outputLimit: number;
  /**
   * The job capability bound at `/run/marsh` (docs/rules.md "The job capability"); `null` = none.
   */
  /**
   * The container's `uid:gid`: the forks' owner (the daemon's user), so the
   * fork is writable whatever the image's `USER`, what the job writes is
   * that user's, and Git in the container sees no dubious ownership. `null`:
   * the image's user.
   */
  readonly user: string | null;
  readonly cap: KitCap | null;
  /**
   * `files` (the default): `stdout` and `stderr` are new files and `stdin` a
   * spool file. `fifos`: all three (stdin when not null) are FIFOs the daemon
   * made and relays live (`marsh run`, docs/rules.md "Running a registered
   * command as a job"); the worker opens them and creates nothing.
   */
  readonly stdio?: "files" | "fifos";
  /**
   * Paths inside `fork` bound read-only over it at their own paths, each only
   * if it exists (a host `marsh run`'s project `.git` and `.marsh`: a job must
   * not plant hooks the host's Git runs).
   */
  readonly readOnly?: readonly string[];
}

/** Most {@linkcode KitLaunch.readOnly} paths. */
export const MAX_READ_ONLY = 16;

/**
 * What the worker binds at `/run/marsh` for one attempt
 * (`protocol/job_capability.ts`). None of it may lie in the fork, the admin
 * dir or the kit home: what the container can write must not reach it.
 */
export interface KitCap {
  /** Host cap dir made by the daemon (bin/, link, context.md, and empty placeholder files cap.sock, deno, marsh.js); bound read-only at /run/marsh. */
  readonly dir: string;
  /** Host path of the attempt's Unix socket (the daemon listens on it), bound over /run/marsh/cap.sock. */
  readonly socket: string;
  /** Host Deno executable, bound read-only at /run/marsh/deno. */
  readonly deno: string;
  /** Host bundled in-job client, bound read-only at /run/marsh/marsh.js. */
  readonly client: string;
  /**
   * job.json without `path`, `env` and `forwarded`: the worker adds them
   * (jobPath of the image's PATH; the starting environment's digests) and
   * writes `<dir>/job.json`.
   */
  readonly job: JobJsonBase;
  /**
   * The daemon's environment digest key, {@linkcode ENV_KEY_HEX}
   * (`protocol/job_env_digest.ts`): the worker digests the starting
   * variables with it and never passes it on.
   */
  readonly envKey: string;
}

/** A digest key in a launch: 32 bytes as lowercase hex. */
export const ENV_KEY_HEX = /^[0-9a-f]{64}$/;

/** A value that is not a valid {@linkcode KitLaunch}. */
export class KitLaunchProtocolError extends Error {
  override name = "KitLaunchProtocolError";
}

const enc = new TextEncoder();

function isObject(x: unknown): x is Record<string, unknown> {
  return typeof x === "object" && x !== null && !Array.isArray(x);
}

function fail(what: string): never {
  throw new KitLaunchProtocolError(`malformed kit launch: ${what}`);
}

function bytes(s: string): number {
  return enc.encode(s).length;
}

function str(x: Record<string, unknown>, key: string, max: number, where = ""): string {
  const v = x[key];
  if (typeof v !== "string" || v === "") fail(`${where}${key} must be a non-empty string`);
  if (v.length > max || bytes(v) > max) fail(`${where}${key} is longer than ${max} bytes`);
  if (v.includes("\0")) fail(`${where}${key} contains a NUL byte`);
  return v;
}

/**
 * Whether `p` is an absolute path with no `.`, `..` or empty component: a
 * mount source the engine resolves as written, so none may climb out.
 */
export function isCleanAbsolute(p: string): boolean {
  if (!p.startsWith("/") || p.includes("\0") || bytes(p) > MAX_PATH_BYTES) return false;
  if (p === "/") return true;
  return p.slice(1).split("/").every((c) => c !== "" && c !== "." && c !== "..");
}

function path(x: Record<string, unknown>, key: string, where = ""): string {
  const v = x[key];
  if (typeof v !== "string" || !isCleanAbsolute(v)) {
    fail(`${where}${key} must be an absolute path without ".", ".." or empty components`);
  }
  return v;
}

function optPath(x: Record<string, unknown>, key: string): string | null {
  return x[key] === null ? null : path(x, key);
}

function stringList(v: unknown, what: string, maxItems: number, maxBytes: number): string[] {
  if (!Array.isArray(v)) fail(`${what} must be an array of strings`);
  if (v.length > maxItems) fail(`${what} has more than ${maxItems} entries`);
  let total = 0;
  const out: string[] = [];
  for (const s of v) {
    if (typeof s !== "string" || s.includes("\0")) fail(`${what} must hold strings without NUL`);
    total += bytes(s) + 1;
    if (total > maxBytes) fail(`${what} is larger than ${maxBytes} bytes`);
    out.push(s);
  }
  return out;
}

function parseKit(v: unknown): KitSpec {
  if (!isObject(v)) fail("kit must be an object");
  const name = str(v, "name", MAX_KIT_NAME, "kit.");
  if (!KIT_NAME_RULE.test(name)) fail(`kit.name must match ${KIT_NAME_RULE.source}`);
  const entrypoint = v.entrypoint === null
    ? null
    : stringList(v.entrypoint, "kit.entrypoint", 64, 64 * 1024);
  const network = str(v, "network", 128, "kit.");
  if (!KIT_NETWORK_RULE.test(network)) fail(`kit.network must match ${KIT_NETWORK_RULE.source}`);
  const env = stringList(v.env, "kit.env", MAX_ENV_ENTRIES, MAX_ENV_BYTES);
  for (const n of env) {
    // A reserved name is not refused here (the registry decides what it
    // accepts); the worker just never passes one.
    if (!isEnvName(n)) fail(`kit.env name ${JSON.stringify(n)} is not a variable name`);
  }
  const wallS = v.wallS;
  if (
    typeof wallS !== "number" || !Number.isSafeInteger(wallS) || wallS < 1 || wallS > MAX_WALL_S
  ) {
    fail(`kit.wallS must be an integer from 1 to ${MAX_WALL_S}`);
  }
  return {
    name,
    image: str(v, "image", 512, "kit."),
    entrypoint,
    network,
    env,
    wallS,
    home: path(v, "home", "kit."),
  };
}

function parseEnv(v: unknown, what = "env"): Record<string, string> {
  if (!isObject(v)) fail(`${what} must be an object`);
  const out: Record<string, string> = {};
  let entries = 0, total = 0;
  for (const [name, value] of Object.entries(v)) {
    if (++entries > MAX_ENV_ENTRIES) fail(`${what} has more than ${MAX_ENV_ENTRIES} entries`);
    if (!isEnvEntryName(name)) {
      fail(`${what} name ${JSON.stringify(name)} is not a variable name`);
    }
    if (typeof value !== "string" || value.includes("\0")) {
      fail(`${what} value of ${name} must be a string without NUL`);
    }
    total += bytes(name) + bytes(value) + 2;
    if (total > MAX_ENV_BYTES) fail(`${what} is larger than ${MAX_ENV_BYTES} bytes`);
    out[name] = value;
  }
  return out;
}

function nameList(v: unknown, what: string): string[] {
  const names = stringList(v, what, MAX_LINK_NAMES, MAX_LINK_NAMES * 64);
  for (const n of names) {
    if (!isLinkName(n)) {
      fail(`${what} name ${JSON.stringify(n)} must match ${KIT_NAME_RULE.source}`);
    }
  }
  if (new Set(names).size !== names.length) fail(`${what} names a command twice`);
  return names;
}

const LIMITS = ["pool", "depth", "same_kit", "fan_out", "total"] as const;

function parseJob(v: unknown): JobJsonBase {
  if (!isObject(v)) fail("cap.job must be an object");
  if (v.version !== 1) fail("cap.job.version must be 1");
  for (const key of ["path", "env", "forwarded"]) {
    if (key in v) fail(`cap.job.${key} is the worker's to set`);
  }
  const job = str(v, "job", MAX_ID_BYTES, "cap.job.");
  const name = str(v, "name", MAX_KIT_NAME, "cap.job.");
  if (!isLinkName(name)) fail(`cap.job.name must match ${KIT_NAME_RULE.source}`);
  const spawn = nameList(v.spawn, "cap.job.spawn");
  const registered = nameList(v.registered, "cap.job.registered");
  if (v.socket !== CAP_SOCKET) fail(`cap.job.socket must be ${CAP_SOCKET}`);
  if (!isObject(v.limits)) fail("cap.job.limits must be an object");
  const limits: Record<(typeof LIMITS)[number], number> = {
    pool: 0,
    depth: 0,
    same_kit: 0,
    fan_out: 0,
    total: 0,
  };
  for (const key of LIMITS) {
    const n = v.limits[key];
    if (typeof n !== "number" || !Number.isSafeInteger(n) || n < 0) {
      fail(`cap.job.limits.${key} must be a non-negative integer`);
    }
    limits[key] = n;
  }
  return {
    version: 1,
    job,
    name,
    spawn,
    registered,
    socket: CAP_SOCKET,
    limits,
  };
}

function parseCap(
  v: unknown,
  launch: { job: string; kit: KitSpec; fork: string; admin: string | null },
): KitCap | null {
  if (v === null) return null;
  if (!isObject(v)) fail("cap must be null or an object");
  const cap = {
    dir: path(v, "dir", "cap."),
    socket: path(v, "socket", "cap."),
    deno: path(v, "deno", "cap."),
    client: path(v, "client", "cap."),
  };
  const writable = [launch.fork, launch.kit.home, ...(launch.admin === null ? [] : [launch.admin])];
  for (const [key, p] of Object.entries(cap)) {
    if (p === "/") fail(`cap.${key} may not be /`);
    const inside = writable.find((w) => isWithin(p, w) || isWithin(w, p));
    if (inside !== undefined) fail(`cap.${key} may not overlap ${inside}`);
  }
  const job = parseJob(v.job);
  const envKey = v.envKey;
  if (typeof envKey !== "string" || !ENV_KEY_HEX.test(envKey)) {
    fail("cap.envKey must be 64 lowercase hex digits");
  }
  if (job.job !== launch.job) fail(`cap.job.job must be the launch's job ${launch.job}`);
  if (job.name !== launch.kit.name) {
    fail(`cap.job.name must be the kit name ${JSON.stringify(launch.kit.name)}`);
  }
  return { ...cap, job, envKey };
}

/** Whether `inner` is `outer` or lies beneath it (both clean absolute paths). */
export function isWithin(inner: string, outer: string): boolean {
  return inner === outer || inner.startsWith(outer === "/" ? "/" : `${outer}/`);
}

/**
 * Validates a kit launch from the daemon. Unknown keys (a frame envelope's
 * `v` and `t`) are ignored.
 *
 * @throws {KitLaunchProtocolError} when `x` is not a valid launch
 */
export function parseKitLaunch(x: unknown): KitLaunch {
  if (!isObject(x)) fail("not an object");
  const attempt = x.attempt;
  if (typeof attempt !== "string" || !ATTEMPT_ID.test(attempt)) {
    fail(`attempt must match ${ATTEMPT_ID.source}`);
  }
  const kit = parseKit(x.kit);
  const argv = stringList(x.argv, "argv", MAX_ARGS, MAX_ARGV_BYTES);
  if (argv[0] !== kit.name) {
    fail(`argv[0] must be the kit name ${JSON.stringify(kit.name)}`);
  }
  const fork = path(x, "fork");
  const cwd = path(x, "cwd");
  if (!isWithin(cwd, fork)) fail("cwd must be the fork or lie inside it");
  if (fork === "/") fail("fork may not be /");
  const admin = optPath(x, "admin");
  if (!Array.isArray(x.objectDirs) || x.objectDirs.length > MAX_OBJECT_DIRS) {
    fail(`objectDirs must be an array of at most ${MAX_OBJECT_DIRS} paths`);
  }
  const objectDirs: string[] = [];
  for (const dir of x.objectDirs) {
    if (typeof dir !== "string" || !isCleanAbsolute(dir)) {
      fail('objectDirs must hold absolute paths without ".", ".." or empty components');
    }
    objectDirs.push(dir);
  }
  const limit = x.outputLimit;
  if (
    typeof limit !== "number" || !Number.isSafeInteger(limit) || limit < 0 ||
    limit > MAX_OUTPUT_LIMIT
  ) {
    fail(`outputLimit must be an integer from 0 to ${MAX_OUTPUT_LIMIT}`);
  }
  const job = str(x, "job", MAX_ID_BYTES);
  return {
    job,
    attempt,
    split: str(x, "split", MAX_ID_BYTES),
    label: str(x, "label", MAX_ID_BYTES),
    kit,
    argv,
    env: parseEnv(x.env),
    fork,
    cwd,
    admin,
    objectDirs,
    stdin: optPath(x, "stdin"),
    stdout: path(x, "stdout"),
    stderr: path(x, "stderr"),
    outputLimit: limit,
    user: parseUser(x.user),
    cap: parseCap(x.cap, { job, kit, fork, admin }),
    ...(x.stdio === undefined ? {} : { stdio: parseStdio(x.stdio) }),
    ...(x.readOnly === undefined ? {} : { readOnly: parseReadOnly(x.readOnly, fork) }),
  };
}

function parseStdio(x: unknown): "files" | "fifos" {
  if (x !== "files" && x !== "fifos") fail('stdio must be "files" or "fifos"');
  return x;
}

function parseReadOnly(x: unknown, fork: string): string[] {
  if (!Array.isArray(x) || x.length > MAX_READ_ONLY) {
    fail(`readOnly must be an array of at most ${MAX_READ_ONLY} paths`);
  }
  return x.map((p) => {
    if (typeof p !== "string" || !isCleanAbsolute(p) || p === fork || !isWithin(p, fork)) {
      fail("readOnly must hold clean absolute paths inside the fork");
    }
    return p;
  });
}

/** A numeric `uid:gid`, each at most 2^32 - 2 (`-1` is no id). */
export const USER_ID = /^(\d{1,10}):(\d{1,10})$/;

function parseUser(x: unknown): string | null {
  if (x === null) return null;
  const m = typeof x === "string" ? USER_ID.exec(x) : null;
  if (!m || [m[1], m[2]].some((n) => Number(n) > 4294967294)) {
    fail("user must be null or a numeric uid:gid");
  }
  return x as string;
}
