/**
 * Who created a split, from the authority of the connection that asked
 * (docs/rules.md "States and records"): the host, a shell branch's session, or a Kit job. Only a
 * split's creator (or the host, for the host's own splits) may join it,
 * list it, read its logs or cancel it.
 *
 * @module
 */

import type { Creator } from "../journal/records.ts";
import type { Authority } from "./conn.ts";

/** The creator a split made over a connection with `auth` gets. */
export function creatorOf(auth: Authority): Creator {
  if (auth.kind === "host") return { kind: "host" };
  if (auth.kind === "job") return { kind: "job", id: auth.job };
  return { kind: "session", id: auth.session };
}

/** Whether two creators are the same one. */
export function sameCreator(a: Creator, b: Creator): boolean {
  return a.kind === b.kind && (a.kind === "host" || a.id === (b as { id: string }).id);
}

/** Whether `auth` may see a split made by `creator`: the host sees every split. */
export function mayView(auth: Authority, creator: Creator): boolean {
  return auth.kind === "host" || sameCreator(creatorOf(auth), creator);
}
