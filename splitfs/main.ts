/**
 * The split-filesystem service: the only process with FFI. It reads request
 * frames on stdin and answers on stdout (protocol/splitfs.ts), one request
 * at a time, until stdin closes.
 *
 * Run as the `splitfs` entrypoint of protocol/entrypoints.ts:
 * `deno run --allow-ffi=<libc> splitfs/main.ts` (`--progress-ms=N` sets the least interval between `progress` replies;
 * default 250). `--parent=PID`: the pid of the process that starts it; the
 * service dies with it (splitfs/lifeline.ts). `--home=DIR`: the daemon's
 * control dir, written with the parent's pid into each project lock it takes
 * (splitfs/project_lock.ts) so a refused second daemon can name it.
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
  splitfsToWire,
} from "../protocol/splitfs.ts";
import { diffDirs } from "./capture/diff.ts";
import { InvalidNameError, SymlinkRefusedError, TooLargeError, WrongKindError } from "./fd/dir.ts";
import { RefusedError, RejectedError, SnapshotError, WorkspaceReplacedError } from "./errors.ts";
import { FsError } from "./fd/ffi.ts";
import { GitMetadataError } from "./git/git_source.ts";
import { LayerError } from "./layers/layers.ts";
import { MARSH_DIR, SPLIT_DIR, splitIdProblem } from "../model/layout.ts";
import { MountPointError } from "./fd/mount_boundary.ts";
import { ObjectExportError } from "./git/object_export.ts";
import { dieWithParent, OrphanedError } from "./lifeline.ts";
import { MountError } from "./fork/overlay.ts";
import { killProcess, processStart } from "./fd/processes.ts";
import { ProjectLocks } from "./project_lock.ts";
import { locateProject } from "./project_root.ts";
import { purgeProject } from "./layers/purge.ts";
import { unmountSplit } from "./fork/split_mounts.ts";
import { probeForks } from "./fork/fork_choice.ts";
import { collectLayers } from "./workspace/split_gc.ts";
import { SplitWorkspace } from "./workspace/workspace.ts";
import { handleResolution } from "./resolve/frames.ts";
import { handleExport } from "./export/frames.ts";
import { handleCheckout } from "./checkout/frames.ts";
import { ExportError } from "./export/export_errors.ts";
import { handleSession } from "./session/frames.ts";
import { ProjectRecovery } from "./resolve/recovery.ts";

const CHUNK = 256 * 1024;
const DEFAULT_PROGRESS_MS = 250;

/** Writes a frame to stdout synchronously: the engine is synchronous and streams as it goes. */
function send(reply: SplitfsReply): void {
  const bytes = encodeFrame(splitfsToWire(reply));
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
/** Set at start from the arguments; empty (writing no holder) until then. */
let locks = new ProjectLocks(null);
/** Recovers a project's interrupted resolutions once its lock is first held (docs/resolution.md). */
const recovery = new ProjectRecovery(() => locks);

function workspace(id: string): SplitWorkspace {
  const ws = splits.get(id);
  if (!ws) throw new ProtocolError(`no open split ${id} in this service`);
  return ws;
}

const wire = (id: readonly [bigint, bigint]) => [String(id[0]), String(id[1])] as const;
const unwire = (id: readonly [string, string]) => [BigInt(id[0]), BigInt(id[1])] as const;

async function handle(req: SplitfsRequest, progressMs: number): Promise<void> {
  switch (req.t) {
    case "merge-inputs":
    case "apply-plan":
    case "undo-resolution":
    case "recover-resolutions":
      send(await handleResolution(req, { workspace, recovery }));
      return;
    case "export-root":
    case "checkpoint-patch":
      send(handleExport(req, new ChunkSender()));
      return;
    case "session-open":
    case "view-mount":
    case "op-prepare":
    case "op-capture":
    case "op-seal":
    case "op-drop":
    case "layer-check":
    case "session-close":
    case "compact":
    case "compact-drop":
      send(
        await handleSession(req, {
          locks,
          atFirstHold: (root) => recovery.atFirstHold(root),
          progress: progressSender(progressMs),
        }),
      );
      return;
    case "checkout-plan":
    case "checkout-apply":
      send(await handleCheckout(req, recovery));
      return;
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
      await recovery.atFirstHold(found.root);
      // A nested split's creator is normally open here: its object dirs are known exactly.
      const creator = req.parent ? splits.get(req.parent.split) : undefined;
      const ws = SplitWorkspace.create({
        root: found.root,
        id: req.id,
        env: req.env,
        progress: progressSender(progressMs),
        withIgnored: req.withIgnored,
        forks: req.forks,
        onMarsh: (marsh) => locks.hold(marsh, found.root),
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
          ...(ws.layers?.untrusted ? { untrusted: ws.layers.untrusted } : {}),
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
        ...(c.rejected === null ? {} : { rejected: c.rejected }),
      });
      return;
    }
    case "remove":
      workspace(req.id).remove();
      splits.delete(req.id);
      send({ v: 1, t: "ok" });
      return;
    case "drop-fork":
      workspace(req.id).dropFork(req.label);
      send({ v: 1, t: "ok" });
      return;
    case "release":
      workspace(req.id).close();
      splits.delete(req.id);
      send({ v: 1, t: "ok" });
      return;
    case "unmount": {
      const problem = splitIdProblem(req.id);
      if (problem) throw new RefusedError(problem);
      // Our own descriptors in its mounts would keep them busy.
      if (splits.has(req.id)) throw new ProtocolError(`split ${req.id} is open: release it first`);
      const dir = `${req.root}/${MARSH_DIR}/${SPLIT_DIR}/${req.id}`;
      unmountSplit(dir, `marsh splits rm ${req.id}`);
      send({ v: 1, t: "ok" });
      return;
    }
    case "publish":
      workspace(req.id).publish(req.label, req.status, { stdout: req.stdout, stderr: req.stderr });
      send({ v: 1, t: "ok" });
      return;
    case "manifest":
      workspace(req.id).writeManifest(req.json);
      send({ v: 1, t: "ok" });
      return;
    case "out-check":
      send({ v: 1, t: "out-checked", missing: workspace(req.id).missingOut(req.branches) });
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
      const root = locateProject(req.cwd).root;
      await recovery.atFirstHold(root);
      const r = collectLayers(root, req.dryRun, req.keep ?? [], req.keepExact ?? []);
      send({ v: 1, t: "collected", ...r });
      return;
    }
    case "purge": {
      await recovery.atFirstHold(req.root);
      const r = purgeProject(req.root, locks, { known: new Set(req.known), dryRun: req.dryRun });
      send({ v: 1, t: "purged", ...r });
      return;
    }
    case "export-objects": {
      const r = workspace(req.id).exportObjects(req.labels, req.parent ?? null);
      send({
        v: 1,
        t: "exported",
        target: r?.target ?? null,
        written: r?.written ?? 0,
        present: r?.present ?? 0,
      });
      return;
    }
    case "reopen": {
      if (splits.has(req.id)) throw new ProtocolError(`split ${req.id} is already open`);
      await recovery.atFirstHold(req.root);
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
    case "out-read": {
      const out = new ChunkSender();
      const bytes = workspace(req.id).readOut(req.label, req.name, (b) => out.push(b));
      out.flush();
      send({ v: 1, t: "done", changed: bytes });
      return;
    }
    case "branch-stats":
      send({ v: 1, t: "branch-stats", branches: workspace(req.id).branchStats(req.labels) });
      return;
    case "plan-fs":
      send(workspace(req.id).planFs(req));
      return;
    case "compare-fork":
      send({ v: 1, t: "compare-forked", ...workspace(req.id).tests.make(req.label) });
      return;
    case "compare-out":
      workspace(req.id).tests.publish(req.label, req);
      send({ v: 1, t: "ok" });
      return;
    case "compare-drop":
      workspace(req.id).tests.drop(req.label);
      send({ v: 1, t: "ok" });
      return;
    case "proc-starts":
      send({ v: 1, t: "proc-starts", starts: req.pids.map(processStart) });
      return;
    case "proc-kill":
      for (const p of req.processes) killProcess(p);
      send({ v: 1, t: "ok" });
      return;
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
    error instanceof MountError || error instanceof LayerError ||
    error instanceof MountPointError || error instanceof ObjectExportError ||
    error instanceof ExportError
  ) {
    return { v: 1, t: "error", kind: "input", message: error.message };
  }
  // Anything else is a fault in marsh: keep the class name, it helps a report.
  return { v: 1, t: "error", kind: "internal", message: String(error) };
}

interface Args {
  readonly progressMs: number;
  readonly parent: number | null;
  readonly home: string | null;
}

/** `--progress-ms=N`, `--parent=PID`, `--home=DIR`. */
function parseArgs(args: readonly string[]): Args {
  let progressMs = DEFAULT_PROGRESS_MS;
  let parent: number | null = null;
  let home: string | null = null;
  for (const arg of args) {
    const m = /^--(progress-ms|parent)=(\d{1,9})$/.exec(arg);
    if (m?.[1] === "progress-ms") progressMs = Number(m[2]);
    else if (m?.[1] === "parent" && Number(m[2]) > 0) parent = Number(m[2]);
    else if (arg.startsWith("--home=/") && !arg.includes("\0")) home = arg.slice("--home=".length);
    else throw new TypeError(`unknown argument: ${JSON.stringify(arg)}`);
  }
  return { progressMs, parent, home };
}

if (import.meta.main) {
  const { progressMs, parent, home } = parseArgs(Deno.args);
  if (parent !== null) {
    try {
      dieWithParent(parent);
    } catch (error) {
      if (!(error instanceof OrphanedError)) throw error;
      console.error(`marsh splitfs: ${error.message}; exiting`);
      Deno.exit(1);
    }
  }
  locks = new ProjectLocks(parent !== null && home !== null ? { pid: parent, home } : null);
  try {
    for await (const frame of readFrames(Deno.stdin.readable)) {
      try {
        await handle(parseSplitfsRequest(frame), progressMs);
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
