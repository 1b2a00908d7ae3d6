/**
 * Which commands an argv branch may start (docs/rules.md "Branches": CMD must be a registered Kit):
 * a split whose argv branch names an unregistered CMD is refused at setup (status 2, nothing runs),
 * and the refusal lists the registered names.
 *
 * Needs nothing beyond the journal it is given.
 *
 * @module
 */

import type { BranchSpec } from "../protocol/daemon.ts";
import { ADD_HINT, registeredNames } from "./kits.ts";

/**
 * The refusal for the first argv branch (in declaration order) whose CMD
 * is not a registered Kit command, or null when every argv branch's is.
 * Shell branches are not looked at. The journal (a `Journal`, or anything
 * that lists Kits) is read once, and only when there is an argv branch.
 *
 * `unknown Kit command "X" in branch "L"; registered: a, b (add one with: marsh kits add NAME --image IMAGE)`
 */
export function checkArgvBranches(
  branches: readonly BranchSpec[],
  journal: { listKits(): readonly { readonly name: string }[] },
): string | null {
  let names: Set<string> | null = null;
  let listed: readonly { readonly name: string }[] = [];
  for (const b of branches) {
    if (b.kind !== "argv") continue;
    if (names === null) {
      listed = journal.listKits();
      names = new Set(listed.map((k) => k.name));
    }
    const cmd = b.argv[0] ?? "";
    if (!names.has(cmd)) {
      return `unknown Kit command ${JSON.stringify(cmd)} in branch ${JSON.stringify(b.label)}; ${
        registeredNames(listed)
      } (${ADD_HINT})`;
    }
  }
  return null;
}
