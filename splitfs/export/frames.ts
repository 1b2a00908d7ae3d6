/**
 * The service's promotion frames (protocol/splitfs_export.ts;
 * docs/checkpoints.md "Checkout and commit"): `export-root` and
 * `checkpoint-patch`, answered from a project's sealed layers.
 *
 * Needs `--allow-ffi=<libc path>`.
 *
 * @module
 */

import type { SplitfsReply } from "../../protocol/splitfs.ts";
import { type ExportRequest, MAX_PATCH_PATHS } from "../../protocol/splitfs_export.ts";
import { Dir } from "../fd/dir.ts";
import { UnsupportedGitExport } from "./export_errors.ts";
import { exportRoot } from "./export_root.ts";
import { writeStackPatch } from "./stack_patch.ts";

/** Where streamed patch text goes: pieces (copied by the sink), then a flush before the final reply. */
export interface ChunkSink {
  push(bytes: Uint8Array): void;
  flush(): void;
}

/**
 * Answers one promotion frame. An entry Git cannot store is an
 * `export-unsupported` answer; other errors are thrown, for the service's
 * own mapping (`ExportError` and `LayerError` are the caller's input).
 */
export function handleExport(req: ExportRequest, chunks: ChunkSink): SplitfsReply {
  using root = Dir.openAbsolute(req.root);
  switch (req.t) {
    case "export-root":
      try {
        return { v: 1, t: "root-exported", ...exportRoot(root, req.layers, req.rootId) };
      } catch (error) {
        if (!(error instanceof UnsupportedGitExport)) throw error;
        return {
          v: 1,
          t: "export-unsupported",
          path: error.path,
          kind: error.kind,
          message: error.message,
        };
      }
    case "checkpoint-patch": {
      const r = writeStackPatch(
        root,
        req.from,
        req.to,
        req.patch ? (b) => chunks.push(b) : null,
        MAX_PATCH_PATHS,
      );
      chunks.flush();
      return { v: 1, t: "checkpoint-patched", changed: r.changed, paths: r.paths, bytes: r.bytes };
    }
  }
}
