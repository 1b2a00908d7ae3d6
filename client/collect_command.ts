/**
 * `marsh collect [--json] [--timing] [--stderr]` (docs/guide.md, "marsh fanout and marsh
 * collect"): reads the one `marsh.fanout/v1` line `marsh fanout` wrote and renders its branches in
 * declaration order with join's renderer (`patch/branch_rendering.ts`): per branch the header, its
 * stdout, a failed branch's stderr under `== LABEL stderr ==` (every branch's with `--stderr`),
 * all on stdout. Exits with the first nonzero branch status.
 *
 * Needs no permission beyond its streams.
 *
 * @module
 */

import {
  FANOUT_LINE_LIMIT,
  type FanoutRecord,
  firstFailure,
  parseFanoutLine,
} from "../model/fanout.ts";
import { runTime } from "../model/job_lineage.ts";
import { BranchRendering, type Emit } from "../patch/branch_rendering.ts";
import { CliError, USAGE } from "./cli_error.ts";
import type { CliIo } from "./io.ts";
import { concatBytes } from "../model/bytes.ts";

/** `collect --json`'s `schema`. */
export const COLLECT_SCHEMA = "marsh.collect/v1";

/** What the rendering shows beyond each branch's header and stdout. */
export interface RenderOptions {
  /** Each header ends with the branch's run time, `(12.3s)`. */
  readonly timing: boolean;
  /** Successful branches' stderr too (a failed branch's is always shown). */
  readonly stderr: boolean;
}

/** `marsh collect`'s options. */
export interface CollectOptions extends RenderOptions {
  /** The `marsh.collect/v1` document instead of the rendering. */
  readonly json: boolean;
}

/** Stdout closed before everything was written: as `marsh join` reports it. */
const STDOUT_GONE = 1;

/** Renders a fanout's branches in declaration order (`terminal`: control bytes escaped). */
export function renderFanout(
  r: FanoutRecord,
  opts: RenderOptions,
  terminal: boolean,
  emit: Emit,
): void {
  const rendering = new BranchRendering(emit, terminal);
  for (const b of r.branches) {
    rendering.header(b.label, b.status, opts.timing ? runTime(b.finishedMs - b.startedMs) : null);
    rendering.body(b.stdout);
    if (b.exit !== 0 || opts.stderr) rendering.stderr(b.label, b.stderr);
    rendering.end();
  }
  rendering.finish();
}

/**
 * The `marsh.collect/v1` document: the fanout line's fields with each branch's
 * `stdout` and `stderr` as text (invalid UTF-8 becomes U+FFFD; the line keeps
 * the bytes) and its run time `ms`.
 */
export function collectDocument(r: FanoutRecord): Record<string, unknown> {
  const dec = new TextDecoder();
  return {
    schema: COLLECT_SCHEMA,
    fanout_id: r.id,
    status: firstFailure(r.branches.map((b) => b.exit)),
    signal: r.signal,
    created_unix_ms: r.createdMs,
    finished_unix_ms: r.finishedMs,
    branches: r.branches.map((b) => ({
      label: b.label,
      kind: b.kind,
      ...(b.kind === "shell" ? { string: b.string } : { argv: b.argv }),
      exit: b.exit,
      status: b.status,
      ms: b.finishedMs - b.startedMs,
      stdout: dec.decode(b.stdout),
      stderr: dec.decode(b.stderr),
    })),
  };
}

/** Reads all of `stream`, refusing more than `limit` bytes. */
async function readAll(stream: ReadableStream<Uint8Array>, limit: number): Promise<Uint8Array> {
  const chunks: Uint8Array[] = [];
  let n = 0;
  for await (const chunk of stream) {
    n += chunk.length;
    if (n > limit) {
      throw new CliError(
        `marsh collect: stdin holds more than ${limit} bytes, more than any fanout line; pipe marsh fanout into it: marsh fanout ::: a CMD... | marsh collect`,
      );
    }
    chunks.push(chunk);
  }
  return concatBytes(chunks);
}

/**
 * Reads the fanout line from stdin.
 *
 * @throws {CliError} (status 2) for a terminal, nothing, several lines or a line that is not one
 */
export async function readFanoutLine(io: CliIo): Promise<FanoutRecord> {
  if (io.stdinIsTerminal) {
    throw new CliError(
      "marsh collect: stdin is a terminal; pipe marsh fanout into it: marsh fanout ::: a CMD... | marsh collect",
    );
  }
  const bytes = await readAll(io.stdin, FANOUT_LINE_LIMIT);
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch (cause) {
    throw new CliError(
      "marsh collect: stdin is not a marsh.fanout/v1 line: it is not UTF-8",
      USAGE,
      {
        cause,
      },
    );
  }
  const line = text.endsWith("\n") ? text.slice(0, -1) : text;
  if (line.trim() === "") {
    throw new CliError(
      "marsh collect: nothing on stdin; marsh fanout writes one line there: marsh fanout ::: a CMD... | marsh collect (if fanout failed, its message says why)",
    );
  }
  if (line.includes("\n")) {
    throw new CliError(
      "marsh collect: stdin holds more than one line; it reads the one line of one marsh fanout",
    );
  }
  try {
    return parseFanoutLine(line);
  } catch (cause) {
    const why = cause instanceof Error ? cause.message : String(cause);
    throw new CliError(`marsh collect: stdin is not a marsh.fanout/v1 line: ${why}`, USAGE, {
      cause,
    });
  }
}

/**
 * Runs `marsh collect` and returns its exit status: the first nonzero branch
 * status, 1 when stdout closed first.
 *
 * @throws {CliError} (status 2) for input that is not one fanout line
 */
export async function collectCommand(opts: CollectOptions, io: CliIo): Promise<number> {
  const record = await readFanoutLine(io);
  const status = firstFailure(record.branches.map((b) => b.exit));
  if (opts.json) {
    const line = `${JSON.stringify(collectDocument(record))}\n`;
    return await io.write(new TextEncoder().encode(line)) ? status : STDOUT_GONE;
  }
  return await writeRendering(record, opts, io) ? status : STDOUT_GONE;
}

/** Writes the rendering to stdout; false when its reader has gone. */
export async function writeRendering(
  record: FanoutRecord,
  opts: RenderOptions,
  io: CliIo,
): Promise<boolean> {
  const pieces: Uint8Array[] = [];
  // The renderer may reuse its buffers: copy each piece, then write them in one go.
  renderFanout(record, opts, io.stdoutIsTerminal, (bytes) => pieces.push(bytes.slice()));
  return await io.write(concatBytes(pieces));
}
