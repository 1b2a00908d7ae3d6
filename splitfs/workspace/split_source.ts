/**
 * Where a split's Git metadata comes from, read as data: the user's split
 * indexes, and for a nested split (docs/engine.md, "Snapshot") its creator
 * branch's fork and that fork's admin dir. Every directory is opened no-follow
 * from the project root's descriptor.
 *
 * Needs `--allow-ffi=<libc path>`.
 *
 * @module
 */

import { SHARED_INDEX_NAME } from "../fork/admin.ts";
import type { Dir } from "../fd/dir.ts";
import { SnapshotError } from "../errors.ts";
import { parseGitConfig } from "../git/git_config.ts";
import type { ReadFile } from "../git/git_reader.ts";
import {
  GitMetadataError,
  type GitSource,
  MAX_CONFIG_BYTES,
  MAX_INDEX_BYTES,
  readGitSource,
} from "../git/git_source.ts";
import { type IgnoreInputs, loadIgnoreInputs, MAX_EXCLUDES_BYTES } from "../git/ignore_load.ts";
import { readRel } from "../fd/read_rel.ts";
import { GIT_NAME } from "../layers/snapshot.ts";
import { isGone } from "./split_held.ts";
import type { SplitParent } from "../../protocol/splitfs_fields.ts";
import { ADMIN_DIR, MARSH_DIR, SPLIT_DIR } from "../../model/layout.ts";

/**
 * A split index (`core.splitIndex`) keeps most entries in
 * `.git/sharedindex.<id>`; the fork's Git cannot read its index without them.
 * They are read as data under the index's own bound, from the Git dir at
 * `rel` under `from` (`.git`, or a creator fork's admin dir).
 */
export function readSharedIndexes(from: Dir, rel: string): Map<string, Uint8Array> {
  const found = new Map<string, Uint8Array>();
  using gitDir = from.openPath(rel);
  let total = 0;
  for (const e of gitDir.entries()) {
    if (!SHARED_INDEX_NAME.test(e.name)) continue;
    const bytes = gitDir.readFile(e.name, MAX_INDEX_BYTES - total);
    total += bytes.length;
    found.set(e.name, bytes);
  }
  return found;
}

/**
 * The creator split's directories a nested split needs, opened no-follow from the root.
 *
 * @throws {SnapshotError} when the creator branch's fork is missing or not a directory
 */
export function openNestedSource(
  rootDir: Dir,
  root: string,
  parent: SplitParent,
): { marsh: Dir; splits: Dir; parentDir: Dir; fork: Dir } {
  const forkRel = `${MARSH_DIR}/${SPLIT_DIR}/${parent.split}/${parent.label}`;
  const got: Dir[] = [];
  try {
    let cur = rootDir;
    for (const name of forkRel.split("/")) {
      cur = cur.openDir(name);
      got.push(cur);
    }
    const [marsh, splits, parentDir, fork] = got as [Dir, Dir, Dir, Dir];
    return { marsh, splits, parentDir, fork };
  } catch (error) {
    for (const d of got.reverse()) d.close();
    if (isGone(error)) {
      throw new SnapshotError(
        `the creator branch's fork is missing or not a directory: ${root}/${forkRel}`,
        { cause: error },
      );
    }
    throw error;
  }
}

/**
 * A nested split's Git metadata, read as data from its creator fork's admin
 * dir `<parent split>/.admin/<label>/` (HEAD names `refs/heads/marsh-split`,
 * which a commit in the fork moves; the index is the fork's own). Ignore
 * inputs: the creator fork's `info/exclude` and the global excludes as the
 * user's own `.git/config` and global config locate them.
 */
export function readNestedGit(
  rootDir: Dir,
  root: string,
  parentDir: Dir,
  parent: SplitParent,
  isGit: boolean,
  env: { readonly HOME?: string; readonly XDG_CONFIG_HOME?: string },
): {
  git: GitSource | null;
  ignore: IgnoreInputs | null;
  sharedIndexes: Map<string, Uint8Array>;
  forkObjects: boolean;
} {
  const none = { git: null, ignore: null, sharedIndexes: new Map(), forkObjects: false };
  if (!isGit) return none;
  const adminRel = `${ADMIN_DIR}/${parent.label}`;
  const read: ReadFile = (rel, max) => {
    // readGitSource reads only `.git/...`: the admin dir is the fork's `.git`.
    if (!rel.startsWith(`${GIT_NAME}/`)) throw new Error(`not a Git dir path: ${rel}`);
    return readRel(parentDir, `${adminRel}/${rel.slice(GIT_NAME.length + 1)}`, max);
  };
  let git: GitSource | null;
  try {
    git = readGitSource(read);
  } catch (error) {
    if (error instanceof GitMetadataError) {
      throw new GitMetadataError(
        error.path,
        `${error.message} (in the creator fork's Git dir ${adminRel})`,
        { cause: error },
      );
    }
    throw error;
  }
  if (git === null) return none;
  const userConfigBytes = readRel(rootDir, `${GIT_NAME}/config`, MAX_CONFIG_BYTES);
  const ignore = loadIgnoreInputs(
    rootDir,
    root,
    { config: userConfigBytes === null ? null : parseGitConfig(userConfigBytes) },
    env,
    readRel(parentDir, `${adminRel}/info/exclude`, MAX_EXCLUDES_BYTES),
  );
  const sharedIndexes = git.index ? readSharedIndexes(parentDir, adminRel) : new Map();
  let forkObjects = false;
  {
    using admin = parentDir.openPath(adminRel);
    forkObjects = admin.statAt("objects")?.kind === "dir";
  }
  return { git, ignore, sharedIndexes, forkObjects };
}
