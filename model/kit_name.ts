/**
 * The Kit-name rule: which names `marsh kit build` builds and `marsh kits add`
 * registers (`docs/kits.md`), and which names a job's links carry. A pure
 * rule that the engine, the journal, the daemon, the worker's frame contracts
 * and the in-job client all apply, so it lives here, importing nothing: each
 * caller turns a problem into its own error.
 *
 * @module
 */

/** The longest Kit name. */
export const MAX_KIT_NAME = 63;
/** Kit names: 1–63 lowercase letters, digits and `-`, starting with a letter. */
export const KIT_NAME_RULE = /^[a-z][a-z0-9-]{0,62}$/;
/** {@linkcode KIT_NAME_RULE} in words, for messages and help texts. */
export const KIT_NAME_WORDS =
  `1-${MAX_KIT_NAME} lowercase letters, digits and '-', starting with a letter`;

/** What is wrong with `name` as a Kit name, for the user; null when it obeys {@linkcode KIT_NAME_RULE}. */
export function kitNameProblem(name: string): string | null {
  if (KIT_NAME_RULE.test(name)) return null;
  return `invalid kit name ${JSON.stringify(name)}: use ${KIT_NAME_WORDS} (e.g. fixture)`;
}

/**
 * Names a registered Kit command may not take: they would shadow marsh
 * itself or the shells a job's image keeps (`docs/kits.md`, "Registering Kits").
 */
export const RESERVED_KIT_NAMES: readonly string[] = ["marsh", "bash", "sh", "env"];

/**
 * What is wrong with `name` as a registered Kit command: the Kit-name rule,
 * and none of {@linkcode RESERVED_KIT_NAMES}; null when it is fine.
 */
export function kitCommandProblem(name: string): string | null {
  const problem = kitNameProblem(name);
  if (problem !== null) return problem;
  if (RESERVED_KIT_NAMES.includes(name)) {
    return `invalid kit name ${JSON.stringify(name)}: it would shadow ${name}; ` +
      `${RESERVED_KIT_NAMES.join(", ")} are reserved`;
  }
  return null;
}

/**
 * Whether `name` may be a job link's name (`/run/marsh/bin/NAME`): `marsh`
 * or a Kit name. `marsh` obeys {@linkcode KIT_NAME_RULE} too, so the link
 * rule is the Kit-name rule.
 */
export function isLinkName(name: string): boolean {
  return KIT_NAME_RULE.test(name);
}
