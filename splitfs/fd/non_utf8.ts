/**
 * Names that are not UTF-8 in the walks of a project tree (snapshot,
 * capture). A patch, the protocol and every message carry UTF-8 only, so
 * such a name cannot enter a snapshot or a patch; yet one the ignore rules
 * exclude would enter neither anyway, and Git does not show it either. So
 * an ignored one is passed over like any ignored path, and any other is
 * refused with its bytes shown and what to do (docs/engine.md, "Descriptor-
 * based I/O").
 *
 * Needs `--allow-ffi=<libc path>`.
 *
 * @module
 */

import { type Dir, type EntryKind, type InvalidEntry, InvalidNameError } from "./dir.ts";
import { decodeEscaped } from "./escaped_utf8.ts";
import type { IgnoreScope } from "../git/ignore_rules.ts";

/** What to do about a name that is not UTF-8 where ignore rules apply. */
export const FIX_IGNORABLE = "rename it, or ignore it (.gitignore): marsh carries only UTF-8 names";
/** What to do about one where no ignore rules apply (no Git, `--with-ignored`, `marsh diff`). */
export const FIX_RENAME = "rename it: marsh carries only UTF-8 names";

/** A name that is not UTF-8 that a walk passes over, and why. */
export interface PassedInvalid extends InvalidEntry {
  readonly kind: EntryKind;
  /** `special`: a FIFO, socket or device, which no walk admits whatever its name. */
  readonly why: "ignored" | "special";
  /** Its path from the root as messages show it (other bytes as `\xNN`). */
  readonly shownPath: string;
}

/**
 * Sorts out `invalid`, the names that are not UTF-8 listed in `dir` (at
 * `rel` from the root): those that `scope`, that directory's rules,
 * excludes, and special files, are returned; one gone since the listing is
 * left out.
 *
 * @throws {InvalidNameError} for the first other one (in byte order), with
 *   the fix in its message; with `scope` `null`, for any file, directory or symlink
 */
export function passInvalid(
  dir: Dir,
  rel: string,
  invalid: readonly InvalidEntry[],
  scope: IgnoreScope | null,
): PassedInvalid[] {
  const out: PassedInvalid[] = [];
  for (const e of [...invalid].sort((a, b) => compareBytes(a.raw, b.raw))) {
    const kind = e.kind ?? dir.statAtRaw(e.raw)?.kind;
    if (kind === undefined) continue;
    const shownPath = rel === "" ? e.shown : `${rel}/${e.shown}`;
    if (kind !== "file" && kind !== "dir" && kind !== "symlink") {
      out.push({ ...e, kind, why: "special", shownPath });
      continue;
    }
    if (scope === null) throw new InvalidNameError(dir.path, e.shown, { fix: FIX_RENAME });
    const escaped = decodeEscaped(e.raw);
    if (!scope.isIgnored(rel === "" ? escaped : `${rel}/${escaped}`, kind === "dir")) {
      throw new InvalidNameError(dir.path, e.shown, { fix: FIX_IGNORABLE });
    }
    out.push({ ...e, kind, why: "ignored", shownPath });
  }
  return out;
}

function compareBytes(a: Uint8Array, b: Uint8Array): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return a[i]! - b[i]!;
  return a.length - b.length;
}
