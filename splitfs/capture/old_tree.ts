/**
 * The old side of a comparison: a live directory walk, or — for a split's
 * base, which is immutable once snapshotted — the stats the snapshot
 * recorded, so capture stats only the fork and opens a base directory only
 * to read a changed file's old bytes.
 *
 * Needs `--allow-ffi=<libc path>`.
 *
 * @module
 */

import type { Dir, Stat } from "../fd/dir.ts";

/** Per directory (relative path, "" at the root): its entries' stats, by name. */
export type StatIndex = Map<string, Map<string, Stat>>;

/** One directory of the old tree. */
export class OldTree implements Disposable {
  readonly #root: Dir;
  readonly #rel: string;
  readonly #index: StatIndex | null;
  #dir: Dir | null;
  readonly #ownsDir: boolean;

  private constructor(
    root: Dir,
    rel: string,
    index: StatIndex | null,
    dir: Dir | null,
    owns: boolean,
  ) {
    this.#root = root;
    this.#rel = rel;
    this.#index = index;
    this.#dir = dir;
    this.#ownsDir = owns;
  }

  /** Walks `dir` itself (borrowed, not closed). */
  static live(dir: Dir): OldTree {
    return new OldTree(dir, "", null, dir, false);
  }

  /** Answers from `index`; `root` (borrowed) is opened below only to read bytes. */
  static indexed(root: Dir, index: StatIndex): OldTree {
    return new OldTree(root, "", index, root, false);
  }

  /** The entry names. */
  names(): string[] {
    if (this.#index) return [...(this.#index.get(this.#rel)?.keys() ?? [])];
    return this.dir().entries().map((e) => e.name);
  }

  /** An entry's stat without following a symlink, or `null`. */
  stat(name: string): Stat | null {
    if (this.#index) return this.#index.get(this.#rel)?.get(name) ?? null;
    return this.dir().statAt(name);
  }

  /** A subdirectory. */
  child(name: string): OldTree {
    const rel = this.#rel === "" ? name : `${this.#rel}/${name}`;
    if (this.#index) return new OldTree(this.#root, rel, this.#index, null, true);
    return new OldTree(this.#root, rel, null, this.dir().openDir(name), true);
  }

  /** The real directory, opened through no-follow descriptors on first use. */
  dir(): Dir {
    this.#dir ??= this.#root.openPath(this.#rel);
    return this.#dir;
  }

  close(): void {
    if (this.#ownsDir) this.#dir?.close();
    this.#dir = null;
  }

  [Symbol.dispose](): void {
    this.close();
  }
}
