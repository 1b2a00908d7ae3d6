/**
 * Test helpers for the layered snapshot store (layers_test.ts,
 * layer_seal_test.ts): a project sandbox with an open store, a stack
 * mounted read-only as a split's base would be, and Git's tree id of the
 * live tree to compare a snapshot's root id with. Real files and real overlay
 * mounts (the tests run as root).
 *
 * @module
 */

import { gitOk, put, run, type Sandbox, sandbox } from "../_testing.ts";
import { Dir } from "../fd/dir.ts";
import { type LayerSnapshot, type LayerSnapshotOptions, LayerStore } from "./layers.ts";

/** A project sandbox with an open store. */
export interface LayerProject extends Disposable {
  readonly sb: Sandbox;
  readonly root: Dir;
  readonly store: LayerStore;
  /** `<root>/.marsh/layers`. */
  readonly layersPath: string;
  /** A `tracked` snapshot of the whole project but `.marsh`, without ignore rules. */
  snap(opts?: Partial<LayerSnapshotOptions>): LayerSnapshot;
}

/** A sandbox (temp dirs named with `prefix`) holding `files`, with `.marsh` and an open store. */
export function layerProject(prefix: string, files: Record<string, string> = {}): LayerProject {
  const sb = sandbox(prefix);
  Deno.mkdirSync(`${sb.root}/.marsh`);
  for (const [rel, data] of Object.entries(files)) put(sb.root, rel, data);
  const root = Dir.openAbsolute(sb.root);
  let store: LayerStore;
  {
    using marsh = root.openDir(".marsh");
    store = LayerStore.open(marsh);
  }
  return {
    sb,
    root,
    store,
    layersPath: `${sb.root}/.marsh/layers`,
    snap(opts = {}) {
      return store.snapshot({
        source: root,
        ignore: null,
        skipTop: new Set([".marsh"]),
        chain: "tracked",
        ...opts,
      });
    },
    [Symbol.dispose]() {
      store.close();
      root.close();
      sb[Symbol.dispose]();
    },
  };
}

/** Mounts a stack read-only, as a split's base would be; unmounted on dispose. */
export async function mountStack(
  p: LayerProject,
  layers: readonly string[],
): Promise<AsyncDisposable & { path: string }> {
  const lowers = layers.map((id) => `${p.layersPath}/${id}/data`).reverse();
  if (lowers.length === 1) {
    p.store.emptyLayer().close();
    lowers.push(`${p.layersPath}/.empty`);
  }
  const path = Deno.makeTempDirSync({ dir: p.sb.top, prefix: "mnt-" });
  const opts = { home: p.sb.home };
  await run(
    "mount",
    ["-t", "overlay", "overlay", "-o", `ro,lowerdir=${lowers.join(":")}`, path],
    opts,
  );
  return {
    path,
    async [Symbol.asyncDispose]() {
      await run("umount", [path], opts);
      Deno.removeSync(path);
    },
  };
}

/**
 * `git write-tree` of the live tree (less `.marsh`) through the bare Git dir
 * `gitDir` (made on first use), so the project itself needs no repository.
 */
export async function gitTree(p: LayerProject, gitDir: string): Promise<string> {
  const opts = { home: p.sb.home };
  try {
    Deno.statSync(gitDir);
  } catch (error) {
    if (!(error instanceof Deno.errors.NotFound)) throw error;
    await gitOk(p.sb.top, ["init", "-q", "--bare", gitDir], opts);
    Deno.writeTextFileSync(`${gitDir}/info/exclude`, "/.marsh/\n");
  }
  const base = ["-c", "core.bare=false", `--git-dir=${gitDir}`, `--work-tree=${p.sb.root}`];
  await gitOk(p.sb.root, [...base, "add", "-A"], opts);
  return (await gitOk(p.sb.root, [...base, "write-tree"], opts)).trim();
}
