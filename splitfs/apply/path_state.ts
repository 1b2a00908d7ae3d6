/**
 * What a project path holds now, read without following a symlink: the
 * applier's re-check and its restore point (docs/resolution.md, "The
 * applier"). A file's content id is its Git blob id, hashed from the bytes.
 *
 * Needs `--allow-ffi=<libc path>`.
 *
 * @module
 */

import type { Dir, Stat } from "../fd/dir.ts";
import { fatalUtf8 } from "../fd/file_names.ts";
import { sameSignature, type Signature } from "../../model/resolution_plan.ts";
import { blobIdOfFile, openParent } from "./fs_extra.ts";
import type { Prior } from "./intent_log.ts";

/** A path's state: a {@linkcode Prior}, or something no plan can hold (a FIFO, a socket). */
export type Found = Prior | { readonly kind: "other"; readonly what: string };

/**
 * A file's or symlink's identity when it was read: inode, size, mtime and
 * permission bits. The applier compares it once the entry is in the backup,
 * so a write between the re-check and the move is caught.
 */
export function identityOf(st: Stat): string {
  return `${st.ino}:${st.size}:${st.mtimeNs}:${st.perm}`;
}

/**
 * What `rel` holds under `root`. A path below a symlink or a file is absent
 * (nothing there is reachable without following it). `hexLength` picks the
 * blob id's hash (40: SHA-1, 64: SHA-256).
 */
export function readState(
  root: Dir,
  rel: string,
  hexLength: number,
): Found & { readonly identity?: string } {
  const p = openParent(root, rel);
  if (!p.ok) return { kind: "absent" };
  using dir = p.dir;
  const st = dir.statAt(p.name);
  if (st === null) return { kind: "absent" };
  switch (st.kind) {
    case "dir":
      return { kind: "dir", perm: st.perm };
    case "symlink": {
      try {
        const target = fatalUtf8.decode(dir.readlink(p.name));
        return { kind: "symlink", target, identity: identityOf(st) };
      } catch (error) {
        if (!(error instanceof TypeError)) throw error;
        return { kind: "other", what: "a symlink whose target is not UTF-8" };
      }
    }
    case "file": {
      using f = dir.openFile(p.name);
      const fst = f.stat();
      return {
        kind: "file",
        perm: fst.perm,
        blob: blobIdOfFile(f, hexLength),
        identity: identityOf(fst),
      };
    }
    default:
      return { kind: "other", what: `a ${st.kind}` };
  }
}

/**
 * The plan's signature of a state; `gitModes` reduces a file's permission
 * bits to Git's 644 or 755 (the owner's executable bit), as the `--git`
 * scope's plans hold them. `null` for a kind no plan can hold.
 */
export function signatureOf(s: Found, gitModes: boolean): Signature | null {
  switch (s.kind) {
    case "absent":
      return { kind: "absent" };
    case "dir":
      return { kind: "dir" };
    case "symlink":
      return { kind: "symlink", target: s.target };
    case "file":
      return {
        kind: "file",
        mode: gitModes ? (s.perm & 0o100 ? 0o755 : 0o644) : s.perm,
        blob: s.blob,
      };
    case "other":
      return null;
  }
}

/** Whether `found` is the state `want` describes. */
export function matches(found: Found, want: Signature, gitModes: boolean): boolean {
  const sig = signatureOf(found, gitModes);
  return sig !== null && sameSignature(sig, want);
}

/** A state in a few words, for messages: `file 0644 1a2b3c4d5e`, `symlink -> x`, `absent`. */
export function describeState(s: Found | Signature): string {
  switch (s.kind) {
    case "absent":
      return "absent";
    case "dir":
      return "a directory";
    case "symlink":
      return `symlink -> ${s.target}`;
    case "file": {
      const mode = "perm" in s ? s.perm : s.mode;
      return `file ${mode.toString(8).padStart(4, "0")} ${s.blob.slice(0, 10)}`;
    }
    case "other":
      return s.what;
  }
}
