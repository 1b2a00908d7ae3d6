/**
 * Spawn sets (docs/rules.md, "Spawn sets"): the registered names a job may
 * start. A child's set is its parent's set, narrowed by `MARSH_SPAWN=a,b`,
 * `--spawn a,b` and `--no-spawn`; nothing widens it. A root job's "parent
 * set" is every registered name.
 *
 * Pure, importing only `model/`: the later model checker reads
 * {@linkcode childSpawnSet} as the `SpawnSetAttenuates` rule.
 *
 * @module
 */

import { isLinkName } from "./kit_name.ts";

/** The variable that narrows the spawn set, read where a job is started. */
export const SPAWN_ENV = "MARSH_SPAWN";
/** `MARSH_SPAWN=none` and `--spawn none`: the empty set. */
export const SPAWN_NONE = "none";

/** How a launch asks to narrow its child's spawn set; each given source narrows. */
export interface SpawnNarrowing {
  /** `MARSH_SPAWN`'s value where the launch was asked for; undefined when unset. */
  readonly env?: string;
  /** `--spawn a,b` as typed (the value after the flag); undefined when not given. */
  readonly flag?: string;
  /** `--no-spawn`. */
  readonly none?: boolean;
}

/** The child's spawn set, and a warning per source that named names the parent lacks. */
export type SpawnSetResult =
  | { readonly ok: true; readonly spawn: readonly string[]; readonly warnings: readonly string[] }
  | { readonly ok: false; readonly message: string };

/**
 * Parses a spawn list (`a,b`, `none`): names separated by commas, spaces
 * around them ignored. An empty value is the empty set, like `none`: a
 * narrowing that cannot be read narrows to nothing rather than widening.
 */
export function parseSpawnList(
  source: string,
  value: string,
): { readonly ok: true; readonly names: readonly string[] } | {
  readonly ok: false;
  readonly message: string;
} {
  const trimmed = value.trim();
  if (trimmed === "" || trimmed === SPAWN_NONE) return { ok: true, names: [] };
  const names: string[] = [];
  for (const raw of trimmed.split(",")) {
    const name = raw.trim();
    if (!isLinkName(name) || name === "marsh") {
      return {
        ok: false,
        message: `${source}: ${
          JSON.stringify(name)
        } is not a registered command's name; use ${source}=NAME,NAME... or ${source}=${SPAWN_NONE}`,
      };
    }
    if (!names.includes(name)) names.push(name);
  }
  return { ok: true, names };
}

/**
 * The child's spawn set: `parent` (deduplicated, sorted) intersected with
 * every narrowing given. `--no-spawn` with `--spawn` is a usage error. A
 * name the parent lacks stays out and is named in a warning ("nothing
 * widens"). Never returns a name that is not in `parent`.
 */
export function childSpawnSet(parent: readonly string[], narrow: SpawnNarrowing): SpawnSetResult {
  if (narrow.none === true && narrow.flag !== undefined) {
    return { ok: false, message: "--spawn and --no-spawn cannot be given together" };
  }
  let set = [...new Set(parent)].sort();
  const warnings: string[] = [];
  const sources: [string, string | undefined][] = [
    [SPAWN_ENV, narrow.env],
    ["--spawn", narrow.flag],
  ];
  for (const [source, value] of sources) {
    if (value === undefined) continue;
    const parsed = parseSpawnList(source, value);
    if (!parsed.ok) return parsed;
    const beyond = parsed.names.filter((n) => !set.includes(n));
    if (beyond.length > 0) {
      const had = set.length === 0 ? "empty" : set.join(", ");
      warnings.push(
        `${source}: ${beyond.join(", ")} left out: a spawn set only narrows (it was: ${had})`,
      );
    }
    set = set.filter((n) => parsed.names.includes(n));
  }
  if (narrow.none === true) set = [];
  return { ok: true, spawn: set, warnings };
}

/** Whether `child` is `parent` or a subset of it: the `SpawnSetAttenuates` invariant. */
export function spawnAttenuates(parent: readonly string[], child: readonly string[]): boolean {
  return child.every((n) => parent.includes(n));
}

/** The refusal of a name outside the spawn set, as the link and `marsh run` print it after `marsh: `. */
export function spawnRefusal(name: string): string {
  return `spawn refused: ${name} not in this job's spawn set (${SPAWN_ENV})`;
}
