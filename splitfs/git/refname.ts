/**
 * Git's ref-name rules (`check_refname_format`), as data checks with no I/O,
 * shared by the snapshot's reading of the caller's refs and the verification
 * of a fork's admin dir.
 *
 * @module
 */

const RESERVED_IN_REFS = "~^:?*[\\";

/**
 * Git's `check_refname_format`, plus the `refs/` prefix Git requires of HEAD's
 * target: a name that passes cannot name a path outside `.git/refs/`.
 */
export function isValidRefName(name: string): boolean {
  if (!name.startsWith("refs/") || name.endsWith("/") || name.endsWith(".")) return false;
  if (name.includes("..") || name.includes("@{") || name.includes("//")) return false;
  for (let i = 0; i < name.length; i++) {
    const c = name.charCodeAt(i);
    // Control characters, space, DEL, and the characters of revision syntax.
    if (c <= 0x20 || c === 0x7f || RESERVED_IN_REFS.includes(name[i]!)) return false;
  }
  for (const component of name.split("/")) {
    if (component === "" || component.startsWith(".") || component.endsWith(".lock")) {
      return false;
    }
  }
  return true;
}
