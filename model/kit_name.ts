/**
 * The Kit-name rule: which names `marsh kit build` builds and `marsh kits add`
 * registers (`docs/kits.md`). A pure rule that the engine, the journal and the
 * frame contracts all apply, so it lives here, importing nothing: each caller
 * turns a problem into its own error.
 *
 * @module
 */

/** Kit names: 1–63 lowercase letters, digits and `-`, starting with a letter. */
export const KIT_NAME_RULE = /^[a-z][a-z0-9-]{0,62}$/;

/** What is wrong with `name` as a Kit name, for the user; null when it obeys {@linkcode KIT_NAME_RULE}. */
export function kitNameProblem(name: string): string | null {
  if (KIT_NAME_RULE.test(name)) return null;
  return `invalid kit name ${
    JSON.stringify(name)
  }: use 1-63 lowercase letters, digits and '-', starting with a letter (e.g. fixture)`;
}
