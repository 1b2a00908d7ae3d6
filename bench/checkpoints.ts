/**
 * `deno task bench --checkpoints` (issue 14 §5, docs/checkpoints.md
 * "Measured"): checkpoint sessions through the real CLI, daemon, worker
 * and split-filesystem service on the generated trees (bench/tree_gen.ts),
 * one private daemon per size. Per size: a small operation's daemon-side
 * time from the drain to the head's compare-and-swap (the steps' times from
 * `marsh log --json`'s `timing_ms`), `marsh op -- true` against `bash -c
 * true` plus `marsh status`, rollback, view remount and fork (the replies'
 * `head_ms`, `fork_ms`, `view_ms`, and the CLI's wall time), the storage of
 * a no-change operation, a fork and a small operation, a return to earlier
 * content; then serial series (bench/checkpoints_series.ts) and concurrency
 * (bench/checkpoints_concurrency.ts). The project's tree is checked clean at
 * the end (sessions write only its `.marsh/`, removed after).
 *
 * @module
 */

import { join } from "node:path";
import type { HardenedGit } from "./_git.ts";
import { marshOps } from "./marsh_ops.ts";
import { cachedTree, dirtyReason, TREE_CACHE } from "./tree_cache.ts";
import { added, type LayerBytes, layerBytes, layerIds, Marsh } from "./checkpoints_marsh.ts";
import { median, percentile, type StorageTerms } from "./checkpoints_stats.ts";
import { measureSerial, type SerialResult } from "./checkpoints_series.ts";
import { type ConcurrencyResult, measureConcurrency } from "./checkpoints_concurrency.ts";
import type { LogEntryInfo, RolledBackReply } from "../protocol/daemon_session.ts";

/** The session the bench runs its operations in. */
export const SESSION = "bench";
/** Files a small operation changes. */
export const SMALL_FILES = 5;
/** A changed-operation run goes back to the start (untimed rollback) past this stack depth. */
const RESET_DEPTH = 40;

/** p50 and p99 of a series, in ms. */
export interface Pct {
  readonly p50: number;
  readonly p99: number;
  readonly n: number;
}

function pct(xs: readonly number[]): Pct {
  return { p50: percentile(xs, 50), p99: percentile(xs, 99), n: xs.length };
}

/** The drain-to-CAS time of a log entry: the steps up to the bind, summed; null untimed. */
export function casMs(e: LogEntryInfo): number | null {
  const t = e.timing_ms;
  if (t === null || t === undefined || t.bind === undefined) return null;
  return (t.drain ?? 0) + (t.capture ?? 0) + (t.intent ?? 0) + (t.seal ?? 0) + t.bind;
}

/** What one size measured. */
export interface SizeCheckpoints {
  readonly files: number;
  readonly snapshotMs: number;
  readonly small: {
    /** Daemon side, drain to the head's CAS. */
    readonly cas: Pct;
    /** Each step's median, in ms. */
    readonly phases: Readonly<Record<string, number>>;
    /** `marsh op` wall time (the CLI's start and the command included). */
    readonly wall: Pct;
  };
  readonly noop: {
    readonly opTrueMs: number;
    readonly bashTrueMs: number;
    readonly statusMs: number;
    /** `opTrueMs / (bashTrueMs + statusMs)`. */
    readonly ratio: number;
    /** Daemon side of the no-change ops, drain to CAS. */
    readonly cas: Pct;
  };
  readonly rollback: { readonly head: Pct; readonly view: Pct; readonly wall: Pct };
  readonly fork: { readonly fork: Pct; readonly view: Pct; readonly wall: Pct };
  readonly storage: {
    readonly noChangeLayers: number;
    readonly noChangeLayerBytes: number;
    readonly forkLayers: number;
    readonly forkLayerBytes: number;
    readonly small: StorageTerms;
    readonly smallChangedBytes: number;
    /** The journal's pages the small op added (its rows' payload is the equation's term). */
    readonly smallJournalPages: number;
    readonly smallLayers: number;
    /** The root after writing A, B, then A again: the first and third must be the same. */
    readonly returned: { readonly first: string; readonly second: string; readonly third: string };
  };
  readonly serial: SerialResult;
  readonly concurrency: ConcurrencyResult;
  readonly warnings: readonly string[];
}

/** The `--checkpoints` options. */
export interface CheckpointsOptions {
  readonly sizes: readonly number[];
  /** Timed runs of each figure (small ops, rollbacks, forks, `op -- true`). */
  readonly runs: number;
  /** The serial series' counts (e.g. 1, 10, 100, 1000). */
  readonly serial: readonly number[];
  readonly seed: number;
  readonly git: HardenedGit;
  readonly log: (line: string) => void;
}

/** `SMALL_FILES` tracked files spread over the tree, by the seed. */
async function pickFiles(git: HardenedGit, dir: string, seed: number): Promise<string[]> {
  const all = (await git.run(dir, ["ls-files", "-z"])).split("\0").filter((p) => p !== "");
  const out: string[] = [];
  const stride = Math.floor(all.length / SMALL_FILES);
  for (let i = 0; i < SMALL_FILES; i++) out.push(all[(i * stride + seed * 7919) % all.length]!);
  return out;
}

/** A small operation's argv: one line appended to each file (the token makes it new). */
function smallArgv(files: readonly string[], token: string): string[] {
  return ["sh", "-c", 'for f; do echo "$0" >> "$f"; done', token, ...files];
}

async function bashTrue(): Promise<number> {
  const t0 = performance.now();
  const out = await new Deno.Command("bash", { args: ["-c", "true"] }).output();
  if (!out.success) throw new Error("bash -c true failed");
  return performance.now() - t0;
}

/** Measures one size end to end; the daemon is stopped and `.marsh/` removed after. */
export async function measureSize(
  o: CheckpointsOptions,
  files: number,
): Promise<SizeCheckpoints> {
  const { git, log } = o;
  const tree = await cachedTree(files, o.seed, git, log);
  const home = await Deno.makeTempDir({ prefix: "marsh-bench-cp-" });
  await Deno.chmod(home, 0o700);
  const m = new Marsh(home, tree.dir);
  const warnings: string[] = [];
  const leftovers: string[] = [];
  let started = false;
  let result: SizeCheckpoints;
  try {
    await m.start();
    started = true;
    log(`checkpoints: ${files} files: marsh session start (the snapshot)`);
    const snap = await m.run(["session", "start", SESSION]);
    const sess = ["--session", SESSION];
    const startId = (await m.log({ session: SESSION })).entries[0]!.checkpoint;
    const view = join(tree.dir, ".marsh", "session", SESSION, "view");
    const picked = await pickFiles(git, tree.dir, o.seed);
    let depth = 0, n = 0;
    const small = async () => {
      if (depth >= RESET_DEPTH) {
        await m.run(["rollback", ...sess, startId]);
        depth = 0;
      }
      depth++;
      return await m.op(smallArgv(picked, `run ${++n}`), SESSION);
    };

    log(`checkpoints: ${files} files: ${o.runs} small operations (${SMALL_FILES} files)`);
    for (let i = 0; i < 2; i++) await small(); // warm-up
    const smallIds: string[] = [], smallWall: number[] = [];
    for (let i = 0; i < o.runs; i++) {
      const r = await small();
      smallIds.push(r.id);
      smallWall.push(r.ms);
    }
    const timed = async (ids: readonly string[]) => {
      const byId = new Map((await m.log({ all: true, session: SESSION })).entries.map((e) => [
        e.checkpoint,
        e,
      ]));
      return ids.map((id) => {
        const e = byId.get(id);
        if (e === undefined) throw new Error(`checkpoint ${id} is not in marsh log --all`);
        return e;
      });
    };
    const smallEntries = await timed(smallIds);
    const phases: Record<string, number> = {};
    for (const k of ["prepare", "drain", "capture", "intent", "seal", "bind", "drop", "view"]) {
      const xs = smallEntries.map((e) => e.timing_ms?.[k]).filter((x) => x !== undefined);
      if (xs.length > 0) phases[k] = median(xs);
    }
    const smallCas = smallEntries.map(casMs).filter((x) => x !== null);
    if (smallCas.length !== smallIds.length) warnings.push("some small ops had no timing_ms");

    log(`checkpoints: ${files} files: marsh op -- true, bash -c true, marsh status`);
    const opTrue: number[] = [], bash: number[] = [], status: number[] = [], noopIds: string[] = [];
    await m.op(["true"], SESSION);
    await bashTrue();
    await m.run(["status"]);
    for (let i = 0; i < o.runs; i++) {
      const r = await m.op(["true"], SESSION);
      opTrue.push(r.ms);
      noopIds.push(r.id);
      bash.push(await bashTrue());
      status.push((await m.run(["status"])).ms);
    }
    const noopCas = (await timed(noopIds)).map(casMs).filter((x) => x !== null);

    log(`checkpoints: ${files} files: ${o.runs} rollbacks, ${o.runs} forks`);
    const a = (await small()).id, b = (await small()).id;
    const rb = { head: [] as number[], view: [] as number[], wall: [] as number[] };
    for (let i = 0; i <= o.runs; i++) {
      const { reply, ms } = await m.json<Omit<RolledBackReply, "v" | "t">>([
        "rollback",
        ...sess,
        i % 2 === 0 ? a : b,
      ]);
      if (i === 0) continue;
      rb.head.push(reply.head_ms);
      if (reply.view_ms === null) throw new Error(`rollback: ${reply.view_error}`);
      rb.view.push(reply.view_ms);
      rb.wall.push(ms);
    }
    await m.run(["rollback", ...sess, b]);
    const fk = { fork: [] as number[], view: [] as number[], wall: [] as number[] };
    for (let i = 0; i <= o.runs; i++) {
      const { reply, ms } = await m.json<{ fork_ms: number; view_ms: number }>([
        "fork",
        "--from",
        b,
        `fork${i}`,
      ]);
      await m.run(["session", "rm", `fork${i}`]);
      if (i === 0) continue;
      fk.fork.push(reply.fork_ms);
      fk.view.push(reply.view_ms);
      fk.wall.push(ms);
    }

    log(`checkpoints: ${files} files: storage`);
    let ids = await layerIds(tree.dir);
    await m.op(["true"], SESSION);
    const noChange = added(ids, await layerIds(tree.dir));
    const noChangeBytes = await layerBytes(tree.dir, noChange);
    ids = await layerIds(tree.dir);
    await m.run(["fork", "--from", b, "storagefork"]);
    const forked = added(ids, await layerIds(tree.dir));
    const forkBytes = await layerBytes(tree.dir, forked);
    await m.run(["session", "rm", "storagefork"]);
    ids = await layerIds(tree.dir);
    const journal0 = await m.journalBytes();
    await small();
    const journal1 = await m.journalBytes();
    const smallLayers = added(ids, await layerIds(tree.dir));
    const sb: LayerBytes = await layerBytes(tree.dir, smallLayers);
    let changedBytes = 0;
    for (const f of picked) changedBytes += (await Deno.stat(join(view, f))).size;
    const rootOf = async (content: string) => {
      await m.op(["sh", "-c", 'printf %s "$0" > returned.txt', content], SESSION);
      depth++;
      return (await m.log({ session: SESSION })).entries[0]!.root;
    };
    const returned = {
      first: await rootOf("A"),
      second: await rootOf("B"),
      third: await rootOf("A"),
    };
    if (returned.first !== returned.third) {
      warnings.push("returning to earlier content did not give its root id again");
    }

    const serial = await measureSerial({ m, files, counts: o.serial, startId, log });
    const concurrency = await measureConcurrency({ m, files, view, log });
    result = {
      files,
      snapshotMs: snap.ms,
      small: { cas: pct(smallCas), phases, wall: pct(smallWall) },
      noop: {
        opTrueMs: median(opTrue),
        bashTrueMs: median(bash),
        statusMs: median(status),
        ratio: median(opTrue) / (median(bash) + median(status)),
        cas: pct(noopCas),
      },
      rollback: { head: pct(rb.head), view: pct(rb.view), wall: pct(rb.wall) },
      fork: { fork: pct(fk.fork), view: pct(fk.view), wall: pct(fk.wall) },
      storage: {
        noChangeLayers: noChange.length,
        noChangeLayerBytes: noChangeBytes.payload + noChangeBytes.tree + noChangeBytes.root,
        forkLayers: forked.length,
        forkLayerBytes: forkBytes.payload + forkBytes.tree + forkBytes.root,
        small: { ...sb, journal: journal1.payload - journal0.payload, projection: 0, reclaimed: 0 },
        smallJournalPages: journal1.pages - journal0.pages,
        smallChangedBytes: changedBytes,
        smallLayers: smallLayers.length,
        returned,
      },
      serial,
      concurrency,
      warnings,
    };
  } finally {
    if (started) {
      for (
        const s of (await m.json<{ sessions: { name: string }[] }>(["sessions"])).reply.sessions
      ) {
        await m.run(["session", "rm", s.name]);
      }
      await m.stop();
    }
    await Deno.remove(home, { recursive: true });
    const mounted = marshOps.mountsUnder(tree.dir);
    if (mounted.length > 0) leftovers.push(`mounts left under ${tree.dir}: ${mounted.join(", ")}`);
    else await marshOps.removeState(tree.dir);
    const dirty = await dirtyReason(tree.dir, tree.head, git);
    if (dirty !== null) {
      leftovers.push(
        `the sessions changed the project's tree (${dirty}); it is regenerated next time`,
      );
      await Deno.remove(join(TREE_CACHE, `${files}-${o.seed}`, "complete.json"));
    }
    for (const l of leftovers) log(`ERROR: ${l}`);
  }
  if (leftovers.length > 0) throw new Error(leftovers.join("; "));
  return result;
}
