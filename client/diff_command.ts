/**
 * `marsh diff OLD_DIR NEW_DIR`: prints the patch that turns OLD_DIR into
 * NEW_DIR (or, with `--files`, the changed-paths list). Exit 0 when the trees
 * are identical, 1 when they differ, 2 on error.
 *
 * @module
 */

import { type DoneReply } from "../protocol/splitfs.ts";
import { SplitfsError, SplitfsService } from "../protocol/splitfs_client.ts";

/** What the command needs from its surroundings, so tests can drive it. */
export interface DiffIo {
  readonly cwd: string;
  write(bytes: Uint8Array): Promise<void>;
  error(line: string): void;
}

function absolute(cwd: string, p: string): string {
  return p.startsWith("/") ? p : `${cwd}/${p}`;
}

/** Runs the diff and returns the exit status. */
export async function diffCommand(
  oldDir: string,
  newDir: string,
  opts: { files: boolean },
  io: DiffIo,
): Promise<number> {
  try {
    await using service = SplitfsService.start();
    const done = await service.request<DoneReply>(
      {
        v: 1,
        t: "diff",
        old: absolute(io.cwd, oldDir),
        new: absolute(io.cwd, newDir),
        files: opts.files,
      },
      (bytes) => io.write(bytes),
    );
    return done.changed === 0 ? 0 : 1;
  } catch (error) {
    if (error instanceof SplitfsError) {
      io.error(`marsh diff: ${error.kind === "rejected" ? "refused: " : ""}${error.message}`);
      return 2;
    }
    throw error;
  }
}
