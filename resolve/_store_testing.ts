/**
 * Test helpers for the small-tree planner (`resolve/small_trees_test.ts`,
 * `daemon/git_planner_test.ts`): a bare store standing in for a split's
 * `store.git`, blobs written into it by real Git (`git hash-object -w`),
 * and merge inputs built from them. Imported only by tests.
 *
 * @module
 */

import type { Signature } from "../model/resolution_plan.ts";
import type { PathInputs } from "../protocol/splitfs_resolve.ts";
import { gitOk } from "../splitfs/_testing.ts";

const enc = new TextEncoder();

/** A temp dir with `store.git` (bare), a private `HOME`, and a `tmp/` for the planner. */
export class TestStore implements Disposable {
  /** The temp dir holding everything. */
  readonly top: string;
  /** `store.git/objects`, as a split's merge inputs name it. */
  readonly objects: string;
  /** An empty dir the planner may make its scratch repository in. */
  readonly tmp: string;
  readonly #home: string;
  #n = 0;

  private constructor(top: string) {
    this.top = top;
    this.objects = `${top}/store.git/objects`;
    this.tmp = `${top}/tmp`;
    this.#home = `${top}/home`;
  }

  /** Makes the store. */
  static async create(): Promise<TestStore> {
    const top = Deno.realPathSync(Deno.makeTempDirSync({ prefix: "marsh-small-trees-" }));
    const s = new TestStore(top);
    Deno.mkdirSync(s.tmp);
    Deno.mkdirSync(s.#home);
    await gitOk(top, ["init", "-q", "--bare", `${top}/store.git`], { home: s.#home });
    return s;
  }

  /** Writes `data` as a blob with `git hash-object -w` and returns its id. */
  async blob(data: string | Uint8Array): Promise<string> {
    const file = `${this.top}/blob-${this.#n++}`;
    Deno.writeFileSync(file, typeof data === "string" ? enc.encode(data) : data);
    try {
      return (await gitOk(this.top, [
        "--git-dir",
        `${this.top}/store.git`,
        "hash-object",
        "-w",
        "--no-filters",
        file,
      ], { home: this.#home })).trim();
    } finally {
      Deno.removeSync(file);
    }
  }

  /** A file signature whose blob is in the store. */
  async file(data: string | Uint8Array, mode = 0o644): Promise<Signature> {
    return { kind: "file", mode, blob: await this.blob(data) };
  }

  /** A blob's bytes, read back from the store. */
  async cat(id: string): Promise<string> {
    return await gitOk(this.top, ["--git-dir", `${this.top}/store.git`, "cat-file", "blob", id], {
      home: this.#home,
    });
  }

  [Symbol.dispose](): void {
    Deno.removeSync(this.top, { recursive: true });
  }
}

/** The absent signature. */
export const NONE: Signature = { kind: "absent" };

/** One path's inputs. */
export function inputs(
  path: string,
  base: Signature,
  source: Signature,
  branch: Signature,
  blocked?: string,
): PathInputs {
  return { path, base, source, branch, ...(blocked === undefined ? {} : { blocked }) };
}

/** `n` numbered lines, some replaced. */
export function lines(n: number, edit: Record<number, string> = {}): string {
  return Array.from({ length: n }, (_, i) => edit[i + 1] ?? `line ${i + 1}`).join("\n") + "\n";
}
