/**
 * Seeds for the property tests (fast-check): {@linkcode assertProperty}
 * runs `fc.assert` with a seed it prints, `MARSH_SEED` when that is set,
 * else a fresh random one; when the property fails, the error ends with
 * the command that runs the same cases again (docs/engine.md, "Tests on a
 * bare machine"). The same seed draws the same values, so a failure seen
 * once, in any run, can be replayed.
 *
 * `MARSH_SEED` is read when this module loads (a test may run with no
 * permissions at all), and only when `--allow-env` grants it.
 *
 * @module
 */

import fc from "fast-check";

/** The repository root, to name a test file relative to it. */
const ROOT = new URL("../", import.meta.url).href;

/** The seeds fast-check takes here: 32-bit signed integers. */
const SEED_MIN = -(2 ** 31);
const SEED_MAX = 2 ** 31 - 1;

/**
 * Parses a `MARSH_SEED` value.
 *
 * @throws {Error} unless it is an integer fast-check can take
 */
export function parseSeed(raw: string): number {
  const n = Number(raw);
  if (!/^-?\d+$/.test(raw.trim()) || n < SEED_MIN || n > SEED_MAX) {
    throw new Error(
      `MARSH_SEED=${raw}: expected the integer a property test printed (${SEED_MIN} to ${SEED_MAX})`,
    );
  }
  return n;
}

function seedFromEnv(): number | undefined {
  const allowed = Deno.permissions.querySync({ name: "env", variable: "MARSH_SEED" });
  if (allowed.state !== "granted") return undefined;
  const raw = Deno.env.get("MARSH_SEED");
  return raw === undefined || raw === "" ? undefined : parseSeed(raw);
}

/** `MARSH_SEED`, when it is set. */
const ENV_SEED = seedFromEnv();

/** The seed the next property runs with: `MARSH_SEED`, else a random one. */
export function nextSeed(): number {
  return ENV_SEED ?? Math.floor(Math.random() * SEED_MAX);
}

function quote(s: string): string {
  return `'${s.replaceAll("'", `'\\''`)}'`;
}

/** The command that re-runs test `t` with `seed`. */
export function reproduceCommand(t: Pick<Deno.TestContext, "name" | "origin">, seed: number) {
  const file = t.origin.startsWith(ROOT) ? t.origin.slice(ROOT.length) : t.origin;
  return `MARSH_SEED=${seed} ./bin/deno test -A ${quote(decodeURI(file))} --filter ${
    quote(t.name)
  }`;
}

function explained(error: unknown, t: Deno.TestContext, seed: number): Error {
  const message = error instanceof Error ? error.message : String(error);
  return new Error(`${message}\n\nReproduce with: ${reproduceCommand(t, seed)}`, {
    cause: error,
  });
}

/**
 * `fc.assert(property, params)` with a seed: prints it, and on failure
 * throws fast-check's report followed by the command that reproduces it.
 *
 * @param t the running test (its name and file go into that command)
 */
export function assertProperty<Ts>(
  t: Deno.TestContext,
  property: fc.IAsyncProperty<Ts>,
  params?: fc.Parameters<Ts>,
): Promise<void>;
export function assertProperty<Ts>(
  t: Deno.TestContext,
  property: fc.IProperty<Ts>,
  params?: fc.Parameters<Ts>,
): void;
export function assertProperty<Ts>(
  t: Deno.TestContext,
  property: fc.IRawProperty<Ts>,
  params: fc.Parameters<Ts> = {},
): Promise<void> | void {
  const seed = nextSeed();
  console.log(`property seed ${seed} (MARSH_SEED=${seed} re-runs it)`);
  let result: Promise<void> | void;
  try {
    result = fc.assert(property, { ...params, seed });
  } catch (error) {
    throw explained(error, t, seed);
  }
  if (result instanceof Promise) {
    return result.catch((error: unknown) => {
      throw explained(error, t, seed);
    });
  }
}
