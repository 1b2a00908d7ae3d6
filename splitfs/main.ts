/**
 * The split-filesystem service: the only process with FFI. It reads request
 * frames on stdin and answers on stdout (protocol/splitfs.ts), one request
 * at a time, until stdin closes.
 *
 * Run as: `deno run --allow-ffi=<libc> --allow-env=HOME,XDG_CONFIG_HOME splitfs/main.ts`
 * (`--progress-ms=N` sets the least interval between `progress` replies;
 * default 250).
 *
 * @module
 */

import { Buffer } from "node:buffer";
import { encodeFrame, FrameError, readFrames } from "../protocol/frame.ts";
import {
  type ErrorReply,
  parseSplitfsRequest,
  ProtocolError,
  type SplitfsReply,
  type SplitfsRequest,
} from "../protocol/splitfs.ts";
import { diffDirs } from "./diff.ts";
import { InvalidNameError, SymlinkRefusedError, TooLargeError, WrongKindError } from "./dir.ts";
import { RefusedError, RejectedError, SnapshotError, WorkspaceReplacedError } from "./errors.ts";
import { FsError } from "./ffi.ts";
import { GitMetadataError } from "./git_source.ts";
import { LayerError } from "./layers.ts";
import { MountError } from "./overlay.ts";
import { locateProject } from "./project_root.ts";
import { collectLayers, probeForks, SplitWorkspace } from "./workspace.ts";

const CHUNK = 256 * 1024;
const DEFAULT_PROGRESS_MS = 250;

/** Writes a frame to stdout synchronously: the engine is synchronous and streams as it goes. */
function send(reply: SplitfsReply): void {
  const bytes = encodeFrame(reply);
  let off = 0;
  while (off < bytes.length) off += Deno.stdout.writeSync(bytes.subarray(off));
}

/**
 * Copies output into one CHUNK-byte buffer and sends it as it fills. It
 * copies because producers reuse their buffers (the rendering's read buffer).
 */
class ChunkSender {
  readonly #buf = Buffer.alloc(CHUNK);
  #size = 0;
  push(b: Uint8Array): void {
    for (let off = 0; off < b.length;) {
      const take = Math.min(b.length - off, CHUNK - this.#size);
      this.#buf.set(b.subarray(off, off + take), this.#size);
      this.#size += take;
      off += take;
      if (this.#size === CHUNK) this.flush();
    }
  }
  flush(): void {
    if (this.#size === 0) return;
    send({ v: 1, t: "chunk", data: this.#buf.toString("base64", 0, this.#size) });
    this.#size = 0;
  }
}

/** A progress callback that sends a `progress` reply at most every `intervalMs`. */
function progressSender(intervalMs: number): (p: { files: number; bytes: number }) => void {
  let last = performance.now();
  return (p) => {
    const now = performance.now();
    if (now - last < intervalMs) return;
    last = now;
    send({ v: 1, t: "progress", files: p.files, bytes: p.bytes });
  };
}

const splits = new Map<string, SplitWorkspace>();

function workspace(id: string): SplitWorkspace {
  const ws = splits.get(id);
  if (!ws) throw new ProtocolError(`no open split ${id} in this service`);
  return ws;
}

const wire = (id: readonly [bigint, bigint]) => [String(id[0]), String(id[1])] as const;
const unwire = (id: readonly [string, string]) => [BigInt(id[0]), BigInt(id[1])] as const;

function handle(req: SplitfsRequest, progressMs: number): void {
  switch (req.t) {
    case "diff": {
      const out = new ChunkSender();
      const enc = new TextEncoder();
      const summary = diffDirs(req.old, req.new, {
        patch: (b) => {
          if (!req.files) out.push(b);
        },
        files: (line) => {
          if (req.files) out.push(enc.encode(line));
        },
      });
      out.flush();
      send({ v: 1, t: "done", changed: summary.files });
      return;
    }
    case "locate": {
      const found = locateProject(req.cwd, req.parent);
      send({ v: 1, t: "located", root: found.root, cwd: found.cwd });
      return;
    }
    case "create": {
      if (splits.has(req.id)) throw new ProtocolError(`split ${req.id} is already open`);
      const found = locateProject(req.cwd, req.parent);
      // A nested split's creator is normally open here: its object dirs are known exactly.
      const creator = req.parent ? splits.get(req.parent.split) : undefined;
      const ws = SplitWorkspace.create({
        root: found.root,
        id: req.id,
        env: req.env,
        progress: progressSender(progressMs),
        withIgnored: req.withIgnored,
        forks: req.forks,
        ...(req.parent
          ? {
            parent: {
              ...req.parent,
              ...(creator && creator.root === found.root ? { objectDirs: creator.objectDirs } : {}),
            },
          }
          : {}),
      });
      const fork = ws.forkChoice;
      splits.set(req.id, ws);
      send({
        v: 1,
        t: "created",
        root: ws.root,
        cwd: found.cwd,
        dir: ws.dirPath,
        identity: wire(ws.identity),
        git: ws.git ? { head: ws.git.head, objects: ws.objectDirs } : null,
        snapshot: {
          files: ws.snapshot.files,
          bytes: ws.snapshot.bytes,
          ms: Math.round(ws.timing.snapshotMs),
          strategy: ws.snapshot.strategy,
          rootId: ws.layers?.rootId ?? null,
          layers: ws.layers?.layers.length ?? 0,
          copied: ws.layers?.copied ?? ws.snapshot.files,
        },
        forks: fork,
        withIgnored: req.withIgnored,
      });
      return;
    }
    case "fork": {
      const t0 = performance.now();
      const f = workspace(req.id).fork(req.label, { progress: progressSender(progressMs) });
      send({
        v: 1,
        t: "forked",
        label: f.label,
        path: f.path,
        strategy: f.strategy,
        identity: wire(f.identity),
        ms: Math.round(performance.now() - t0),
      });
      return;
    }
    case "capture": {
      const t0 = performance.now();
      const c = workspace(req.id).capture(req.label);
      send({
        v: 1,
        t: "captured",
        label: req.label,
        files: c.files,
        changedBytes: c.changedBytes,
        ms: Math.round(performance.now() - t0),
      });
      return;
    }
    case "remove-fork":
      workspace(req.id).removeFork(req.label);
      send({ v: 1, t: "ok" });
      return;
    case "remove":
      workspace(req.id).remove();
      splits.delete(req.id);
      send({ v: 1, t: "ok" });
      return;
    case "release":
      workspace(req.id).close();
      splits.delete(req.id);
      send({ v: 1, t: "ok" });
      return;
    case "publish":
      workspace(req.id).publish(req.label, req.status, { stdout: req.stdout, stderr: req.stderr });
      send({ v: 1, t: "ok" });
      return;
    case "manifest":
      workspace(req.id).writeManifest(req.json);
      send({ v: 1, t: "ok" });
      return;
    case "render": {
      const out = new ChunkSender();
      const changed = workspace(req.id).render(req.branches, req.terminal, (b) => out.push(b));
      out.flush();
      send({ v: 1, t: "done", changed });
      return;
    }
    case "probe": {
      const choice = req.forks === "copy"
        ? { strategy: "copy", reason: "copy forks were asked for (MARSH_FORKS=copy)" }
        : probeForks(req.dir);
      send({ v: 1, t: "probed", ...choice });
      return;
    }
    case "gc": {
      const r = collectLayers(locateProject(req.cwd).root, req.dryRun);
      send({ v: 1, t: "collected", ...r });
      return;
    }
    case "reopen": {
      if (splits.has(req.id)) throw new ProtocolError(`split ${req.id} is already open`);
      const ws = SplitWorkspace.open({
        root: req.root,
        id: req.id,
        identity: unwire(req.identity),
        forks: req.forks.map((f) => ({
          label: f.label,
          identity: unwire(f.identity),
          ...(f.strategy === undefined ? {} : { strategy: f.strategy }),
        })),
        git: req.git,
      });
      splits.set(req.id, ws);
      send({ v: 1, t: "ok" });
      return;
    }
  }
}

function toError(error: unknown): ErrorReply {
  if (error instanceof RejectedError) {
    return { v: 1, t: "error", kind: "rejected", message: error.reason };
  }
  if (error instanceof WorkspaceReplacedError) {
    return { v: 1, t: "error", kind: "replaced", message: error.message };
  }
  if (
    error instanceof FsError || error instanceof SymlinkRefusedError ||
    error instanceof WrongKindError || error instanceof TooLargeError ||
    error instanceof SnapshotError || error instanceof ProtocolError ||
    error instanceof RefusedError || error instanceof TypeError ||
    error instanceof InvalidNameError || error instanceof GitMetadataError ||
    error instanceof MountError || error instanceof LayerError
  ) {
    return { v: 1, t: "error", kind: "input", message: error.message };
  }
  // Anything else is a fault in marsh: keep the class name, it helps a report.
  return { v: 1, t: "error", kind: "internal", message: String(error) };
}

/** `--progress-ms=N`, the only argument. */
function parseArgs(args: readonly string[]): { progressMs: number } {
  let progressMs = DEFAULT_PROGRESS_MS;
  for (const arg of args) {
    const m = /^--progress-ms=(\d{1,6})$/.exec(arg);
    if (!m) throw new TypeError(`unknown argument: ${JSON.stringify(arg)}`);
    progressMs = Number(m[1]);
  }
  return { progressMs };
}

if (import.meta.main) {
  const { progressMs } = parseArgs(Deno.args);
  try {
    for await (const frame of readFrames(Deno.stdin.readable)) {
      try {
        handle(parseSplitfsRequest(frame), progressMs);
      } catch (error) {
        send(toError(error));
      }
    }
  } catch (error) {
    // A malformed frame ends the conversation: answer once, then exit.
    if (!(error instanceof FrameError)) throw error;
    send({ v: 1, t: "error", kind: "input", message: error.message });
    Deno.exit(2);
  }
}
