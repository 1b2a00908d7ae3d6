/**
 * `marsh context` (docs/guide.md, "Inside a Kit job: /run/marsh, marsh split and marsh join"):
 * prints the agent context. Inside a Kit job,
 * the job's own `/run/marsh/context.md`; anywhere else the generic text from the same source
 * (`model/job_context.ts`). It only prints: it never writes a file.
 *
 * Needs read on the context file inside a job; nothing outside one.
 *
 * @module
 */

import { contextText } from "../model/job_context.ts";
import { CliError } from "./cli_error.ts";
import type { CliIo } from "./io.ts";

/** Stdout closed before the text was written. */
const STDOUT_GONE = 1;

/**
 * Prints the context and returns the exit status.
 *
 * @param file the job's `context.md`; undefined outside a job
 * @throws {CliError} (status 2) when the job's file cannot be read
 */
export async function contextCommand(file: string | undefined, io: CliIo): Promise<number> {
  let text: string;
  if (file === undefined) {
    text = contextText(null);
  } else {
    try {
      text = await Deno.readTextFile(file);
    } catch (cause) {
      const why = cause instanceof Error ? cause.message : String(cause);
      throw new CliError(
        `marsh context: cannot read ${file}: ${why}; the job's capability dir is incomplete, so its setup failed: run the job again`,
        2,
        { cause },
      );
    }
  }
  return await io.write(new TextEncoder().encode(text)) ? 0 : STDOUT_GONE;
}
