/**
 * The marsh engine as the benchmarks see it: the split workspace, driven in
 * the harness's own process (the same code the split-filesystem service
 * runs), so the harness's in-process sampler sees its memory. The layer
 * store's index cache is per process, so a re-snapshot here finds the
 * previous layer's index in memory, as the long-lived service does.
 *
 * Needs `--allow-ffi`, read/write on the tree, and `--allow-run` for
 * `chmod` and `rm` (removing the engine's state).
 *
 * @module
 */

import { join } from "node:path";
import { Dir } from "../splitfs/fd/dir.ts";
import { LayerStore } from "../splitfs/layers/layers.ts";
import { LAYERS_DIR, MARSH_DIR } from "../model/layout.ts";
import { readMounts } from "../splitfs/fd/mountinfo.ts";
import { SplitWorkspace } from "../splitfs/workspace/workspace.ts";
import { runChecked } from "./_command.ts";
import type { ForkPolicy, MarshOps, OpReport, SnapshotReport } from "./marsh_ops_types.ts";

const open = new Map<string, SplitWorkspace>();
let counter = 0;

function workspace(splitDir: string): SplitWorkspace {
  const ws = open.get(splitDir);
  if (!ws) throw new Error(`No open split at "${splitDir}"`);
  return ws;
}

function mountsUnder(root: string): string[] {
  const real = Deno.realPathSync(root);
  return readMounts().map((m) => m.mountPoint).filter((p) =>
    p === real || p.startsWith(`${real}/`)
  );
}

/** Removes `path` (a tree of the engine's state) after checking nothing under it is mounted. */
async function removeUnmounted(root: string, path: string): Promise<void> {
  const mounted = mountsUnder(root);
  if (mounted.length > 0) {
    throw new Error(`Still mounted under "${root}", not removing "${path}": ${mounted.join(", ")}`);
  }
  try {
    await Deno.lstat(path);
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return;
    throw err;
  }
  // Sealed layers are 0o555: a non-root user cannot delete inside them without this.
  await runChecked({ cmd: "chmod", args: ["-R", "u+w", "--", path] });
  await runChecked({ cmd: "rm", args: ["-rf", "--", path] });
}

/** The engine operations the benchmarks time. */
export const marshOps: MarshOps = {
  snapshot(root: string, forks: ForkPolicy): Promise<SnapshotReport> {
    const ws = SplitWorkspace.create({
      root,
      id: `bench-${Deno.pid}-${counter++}`,
      env: {},
      forks,
    });
    open.set(ws.dirPath, ws);
    const layers = ws.layers;
    const snap = ws.snapshot;
    return Promise.resolve({
      splitDir: ws.dirPath,
      forkChoice: ws.forkChoice,
      layers: layers === null
        ? null
        : { count: layers.layers.length, rootId: layers.rootId, copied: layers.copied },
      files: snap.files + snap.symlinks,
      engineMs: ws.timing.snapshotMs,
    });
  },
  fork(splitDir: string, label: string): Promise<OpReport & { readonly forkDir: string }> {
    return Promise.resolve({ forkDir: workspace(splitDir).fork(label).path });
  },
  capture(splitDir: string, label: string): Promise<OpReport & { readonly files: number }> {
    return Promise.resolve({ files: workspace(splitDir).capture(label).files });
  },
  sealCheck(root: string): Promise<OpReport> {
    using dir = Dir.openAbsolute(root);
    using marsh = dir.openDir(MARSH_DIR);
    using store = LayerStore.open(marsh);
    const problem = store.checkHead("tracked");
    if (problem !== null) throw new Error(`The seal check failed: ${problem}`);
    return Promise.resolve({});
  },
  cleanup(splitDir: string): Promise<void> {
    workspace(splitDir).remove();
    open.delete(splitDir);
    return Promise.resolve();
  },
  forgetSnapshots(root: string): Promise<void> {
    return removeUnmounted(root, join(root, MARSH_DIR, LAYERS_DIR));
  },
  removeState(root: string): Promise<void> {
    return removeUnmounted(root, join(root, MARSH_DIR));
  },
  mountsUnder,
};
