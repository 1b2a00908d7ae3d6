/**
 * The marsh engine as the benchmarks see it: the split workspace, driven in
 * the harness's own process (the same code the split-filesystem service
 * runs), so the harness's in-process sampler sees its memory.
 *
 * Needs `--allow-ffi`.
 *
 * @module
 */

import { SplitWorkspace } from "../splitfs/workspace.ts";
import type { MarshOps, OpReport } from "./marsh_ops_types.ts";

const open = new Map<string, SplitWorkspace>();
let counter = 0;

function workspace(splitDir: string): SplitWorkspace {
  const ws = open.get(splitDir);
  if (!ws) throw new Error(`no open split at ${splitDir}`);
  return ws;
}

/** The engine operations the benchmarks time. */
export const marshOps: MarshOps = {
  snapshot(root: string): Promise<OpReport & { readonly splitDir: string }> {
    const ws = SplitWorkspace.create({ root, id: `bench-${Deno.pid}-${counter++}`, env: {} });
    open.set(ws.dirPath, ws);
    return Promise.resolve({ splitDir: ws.dirPath });
  },
  fork(splitDir: string, label: string): Promise<OpReport & { readonly forkDir: string }> {
    return Promise.resolve({ forkDir: workspace(splitDir).fork(label).path });
  },
  capture(splitDir: string, label: string): Promise<OpReport> {
    workspace(splitDir).capture(label);
    return Promise.resolve({});
  },
  cleanup(splitDir: string): Promise<void> {
    workspace(splitDir).remove();
    open.delete(splitDir);
    return Promise.resolve();
  },
};
