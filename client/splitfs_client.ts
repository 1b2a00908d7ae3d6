/**
 * Starts the split-filesystem service (`splitfs/main.ts`) as a child process
 * with its own narrow permissions and talks to it in frames. The caller holds
 * no FFI and reads no project file itself.
 *
 * Needs `--allow-run=<deno>` and `--allow-env=MARSH_DENO`.
 *
 * @module
 */

import { Buffer } from "node:buffer";
import { encodeFrame, readFrames } from "../protocol/frame.ts";
import { splitfsFlags } from "../protocol/permissions.ts";
import { parseSplitfsReply, type SplitfsRequest } from "../protocol/splitfs.ts";

/** An error reply from the service. */
export class SplitfsError extends Error {
  override name = "SplitfsError";
  constructor(readonly kind: "input" | "rejected" | "internal", message: string) {
    super(message);
  }
}

/** The Deno executable to start services with: the launcher's pinned one. */
export function denoPath(): string {
  return Deno.env.get("MARSH_DENO") ?? Deno.execPath();
}

const repo = new URL("../", import.meta.url);

/**
 * Runs one request in a fresh service process, calling `onChunk` for each
 * output chunk, and resolves with the number of changed paths.
 *
 * @throws {SplitfsError} when the service answers with an error
 */
export async function runSplitfs(
  request: SplitfsRequest,
  onChunk: (bytes: Uint8Array) => Promise<void> | void,
): Promise<number> {
  const child = new Deno.Command(denoPath(), {
    args: [
      "run",
      ...splitfsFlags(),
      `--config=${new URL("deno.json", repo).pathname}`,
      new URL("splitfs/main.ts", repo).pathname,
    ],
    stdin: "piped",
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  const writer = child.stdin.getWriter();
  await writer.write(encodeFrame(request));
  await writer.close();
  let result: number | undefined;
  let failure: SplitfsError | undefined;
  for await (const frame of readFrames(child.stdout)) {
    const reply = parseSplitfsReply(frame);
    if (reply.t === "chunk") await onChunk(Buffer.from(reply.data, "base64"));
    else if (reply.t === "done") result = reply.changed;
    else failure = new SplitfsError(reply.kind, reply.message);
  }
  const status = await child.status;
  if (failure) throw failure;
  if (result === undefined) {
    throw new SplitfsError(
      "internal",
      `split-filesystem service exited with status ${status.code}`,
    );
  }
  return result;
}
