/**
 * Which names an environment variable may have, and which of them marsh
 * keeps for itself (`docs/guide.md`, "What a shell branch sees";
 * `docs/kits.md`, "Registering Kits"). Two rules, for two questions:
 *
 * - {@linkcode isEnvEntryName}: can this be the name of an entry in a
 *   process's environment at all? Any non-empty string without `=` or NUL:
 *   `execve` takes `NAME=VALUE` strings and nothing more, and a caller's
 *   environment (from `env 'A.B=1' …`) may hold such names. Every frame that
 *   carries an environment checks this.
 * - {@linkcode ENV_NAME_RULE}: is this a variable's name that marsh may be
 *   asked to pass by name (`marsh kits add --env NAME`, a launch's Kit `env`
 *   list, `job.json`'s `forwarded`)? A shell's variable name: letters,
 *   digits and `_`, not starting with a digit, at most
 *   {@linkcode MAX_ENV_NAME} characters.
 *
 * Pure, importing nothing: the CLI, the daemon, the worker's frame contracts
 * and the journal all apply them.
 *
 * @module
 */

/** The longest name `--env` may give. */
export const MAX_ENV_NAME = 128;

/**
 * A variable's name marsh may pass by name: letters, digits and `_`, not
 * starting with a digit, 1 to {@linkcode MAX_ENV_NAME} characters.
 */
export const ENV_NAME_RULE = /^[A-Za-z_][A-Za-z0-9_]{0,127}$/;

/** Whether `name` obeys {@linkcode ENV_NAME_RULE}. */
export function isEnvName(name: string): boolean {
  return ENV_NAME_RULE.test(name);
}

/** Whether `name` can name an entry of a process's environment: non-empty, no `=`, no NUL. */
export function isEnvEntryName(name: string): boolean {
  return name !== "" && !name.includes("=") && !name.includes("\0");
}

/**
 * marsh's and the engine's own variables: never passed to a branch or a
 * Kit. The shell branches' filter (`model/env_filter.ts`), the Kit registry
 * (`model/kit_rules.ts`) and the worker's Kit launch all use this list.
 */
export const RESERVED_ENV_PREFIXES = ["MARSH_", "DOCKER_"] as const;

/**
 * Variables a Kit's container gets from marsh, never from the caller: its
 * `HOME`, and the image's own `PATH` with `/run/marsh/bin` in front
 * (`docs/kits.md`, "The job capability: how `/run/marsh` is made").
 */
export const KIT_SET_ENV_NAMES = ["HOME", "PATH"] as const;

/**
 * Names a Kit's `env` list never passes from the caller, compared
 * case-insensitively: {@linkcode KIT_SET_ENV_NAMES} and
 * {@linkcode RESERVED_ENV_PREFIXES} (`MARSH_JOB` and `MARSH_ENTRY`, which
 * the worker sets, among them). The registry refuses the same names.
 */
export function isReservedEnvName(name: string): boolean {
  const upper = name.toUpperCase();
  return (KIT_SET_ENV_NAMES as readonly string[]).includes(upper) ||
    RESERVED_ENV_PREFIXES.some((p) => upper.startsWith(p));
}
