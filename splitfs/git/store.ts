/**
 * `store.git`: a bare repository skeleton whose loose objects hold the pre-
 * and post-image blobs of captured changes, so `git apply --3way` finds them.
 *
 * Needs `--allow-ffi=<libc path>`.
 *
 * @module
 */

import { blobId } from "../../patch/blob_id.ts";
import { looseObject } from "../../patch/loose_object.ts";
import type { Dir } from "../fd/dir.ts";
import { E, FsError } from "../fd/ffi.ts";

const enc = new TextEncoder();

/** An open object store; blobs are written once, content-addressed. */
export class ObjectStore implements Disposable {
  #objects: Dir;
  readonly #fanout = new Map<string, Dir>();

  private constructor(objects: Dir) {
    this.#objects = objects;
  }

  /** Creates `name` (a bare repository skeleton) under `parent` and opens it. */
  static create(parent: Dir, name: string): ObjectStore {
    parent.mkdir(name, 0o755);
    using repo = parent.openDir(name);
    repo.writeNewFile("HEAD", enc.encode("ref: refs/heads/main\n"));
    repo.writeNewFile(
      "config",
      enc.encode("[core]\n\trepositoryformatversion = 0\n\tbare = true\n"),
    );
    repo.ensureDir("refs").close();
    const objects = repo.ensureDir("objects");
    objects.ensureDir("info").close();
    objects.ensureDir("pack").close();
    return new ObjectStore(objects);
  }

  /** Opens an existing store's `objects/`. */
  static open(parent: Dir, name: string): ObjectStore {
    return new ObjectStore(parent.openPath(`${name}/objects`));
  }

  /** Writes a blob unless present; returns its id. */
  /** Whether the store holds object `id` (its fanout dirs are kept open for the next asks). */
  has(id: string): boolean {
    const fan = id.slice(0, 2);
    let dir = this.#fanout.get(fan);
    if (dir === undefined) {
      if (this.#objects.statAt(fan)?.kind !== "dir") return false;
      dir = this.#objects.openDir(fan);
      this.#fanout.set(fan, dir);
    }
    return dir.statAt(id.slice(2))?.kind === "file";
  }

  writeBlob(bytes: Uint8Array): string {
    const id = blobId(bytes);
    const [fan, rest] = [id.slice(0, 2), id.slice(2)];
    let dir = this.#fanout.get(fan);
    if (dir === undefined) {
      dir = this.#objects.ensureDir(fan);
      this.#fanout.set(fan, dir);
    }
    // Hash first: compressing a blob the store already holds is the expensive part.
    if (dir.statAt(rest) !== null) return id;
    const obj = looseObject(bytes);
    try {
      dir.writeNewFile(rest, obj.compressed, 0o444);
    } catch (error) {
      if (!(error instanceof FsError && error.errno === E.EEXIST)) throw error;
    }
    return obj.id;
  }

  close(): void {
    for (const d of this.#fanout.values()) d.close();
    this.#fanout.clear();
    this.#objects.close();
  }

  [Symbol.dispose](): void {
    this.close();
  }
}
