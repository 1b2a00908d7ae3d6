/**
 * The serial series of `deno task bench --checkpoints` (bench/checkpoints.ts):
 * operations one after another in one session, read at 1, 10, 100 and 1,000
 * (`--serial`): latency drift (the first tenth against the last), `marsh
 * log` lookup time, the journal's and the layer store's growth per
 * operation, and the daemon's resident memory.
 *
 * Two series: no-change operations (`marsh op -- true`) up to the largest
 * count, and operations changing one file each up to {@linkcode CHANGED_CAP}:
 * each adds a layer to the session's stack, and the service takes stacks of
 * at most 64 layers until compaction is built (docs/checkpoints.md
 * "Compaction").
 *
 * @module
 */

import { added, layerBytes, layerIds, type Marsh } from "./checkpoints_marsh.ts";
import { type Drift, drift, slope } from "./checkpoints_stats.ts";

/** The most changed operations in a row timed: past 32 layers a background compaction runs beside them. */
export const CHANGED_CAP = 60;

/** One reading of a series, after `count` operations. */
export interface SerialPoint {
  readonly count: number;
  /** `marsh log --json --all` of the session, wall time (the CLI's start included). */
  readonly logMs: number;
  readonly logEntries: number;
  /** The journal's pages in use (`dbstat`). */
  readonly journalBytes: number;
  /** Its rows' payload. */
  readonly journalPayload: number;
  /** Layer bytes the series added so far (files' sizes). */
  readonly layerBytes: number;
  readonly rssKiB: { readonly daemon: number; readonly tree: number };
}

/** One series. */
export interface Series {
  readonly kind: "no-change" | "changed";
  readonly points: readonly SerialPoint[];
  /** Wall time of `marsh op` over the whole series. */
  readonly wall: Drift;
  /** Daemon side, drain to the head's CAS, from `timing_ms`. */
  readonly cas: Drift | null;
  /** Each step's drift (`timing_ms`), over the operations that have it. */
  readonly phases: Readonly<Record<string, Drift>>;
  /** Journal pages' bytes per operation (least squares over the points). */
  readonly journalSlope: number | null;
  /** Journal rows' payload bytes per operation. */
  readonly payloadSlope: number | null;
  /** Layer bytes per operation. */
  readonly layerSlope: number | null;
}

/** Both series at one size. */
export interface SerialResult {
  readonly files: number;
  readonly noChange: Series;
  readonly changed: Series;
  /** Counts asked for that the changed series cannot reach (past {@linkcode CHANGED_CAP}). */
  readonly changedSkipped: readonly number[];
}

async function series(
  m: Marsh,
  session: string,
  kind: Series["kind"],
  counts: readonly number[],
  log: (line: string) => void,
): Promise<Series> {
  const max = Math.max(...counts);
  const before = await layerIds(m.project);
  const walls: number[] = [], ids: string[] = [];
  const points: SerialPoint[] = [];
  for (let i = 1; i <= max; i++) {
    const argv = kind === "no-change"
      ? ["true"]
      : ["sh", "-c", 'echo "$0" > serial.txt', `op ${i}`];
    const r = await m.op(argv, session);
    walls.push(r.ms);
    ids.push(r.id);
    if (!counts.includes(i)) continue;
    const l = await m.log({ all: true, session });
    const bytes = await layerBytes(m.project, added(before, await layerIds(m.project)));
    const journal = await m.journalBytes();
    points.push({
      count: i,
      logMs: l.ms,
      logEntries: l.entries.length,
      journalBytes: journal.pages,
      journalPayload: journal.payload,
      layerBytes: bytes.payload + bytes.tree + bytes.root,
      rssKiB: await m.rssKiB(),
    });
    log(`checkpoints: serial ${kind}: ${i} operations`);
  }
  const byId = new Map((await m.log({ all: true, session })).entries.map((e) => [e.checkpoint, e]));
  const cas: number[] = [];
  const steps: Record<string, number[]> = {};
  for (const id of ids) {
    const t = byId.get(id)?.timing_ms;
    if (t?.bind !== undefined) {
      cas.push((t.drain ?? 0) + (t.capture ?? 0) + (t.intent ?? 0) + (t.seal ?? 0) + t.bind);
    }
    for (const [k, v] of Object.entries(t ?? {})) (steps[k] ??= []).push(v);
  }
  const phases: Record<string, Drift> = {};
  for (const [k, v] of Object.entries(steps)) phases[k] = drift(v);
  const xs = points.map((p) => p.count);
  const fit = (ys: number[]) => xs.length >= 2 ? slope(xs, ys) : null;
  return {
    kind,
    points,
    wall: drift(walls),
    cas: cas.length === ids.length ? drift(cas) : null,
    phases,
    journalSlope: fit(points.map((p) => p.journalBytes)),
    payloadSlope: fit(points.map((p) => p.journalPayload)),
    layerSlope: fit(points.map((p) => p.layerBytes)),
  };
}

/**
 * Runs both series in two sessions forked from `startId` (the snapshot: a
 * one-layer stack), each removed after.
 */
export async function measureSerial(o: {
  readonly m: Marsh;
  readonly files: number;
  readonly counts: readonly number[];
  readonly startId: string;
  readonly log: (line: string) => void;
}): Promise<SerialResult> {
  const { m } = o;
  const run = async (kind: Series["kind"], counts: readonly number[]) => {
    const name = `serial-${kind}`;
    await m.run(["fork", "--from", o.startId, name]);
    try {
      return await series(m, name, kind, counts, o.log);
    } finally {
      await m.run(["session", "rm", name]);
    }
  };
  const noChange = await run("no-change", o.counts);
  const reachable = o.counts.filter((c) => c <= CHANGED_CAP);
  const changedSkipped = o.counts.filter((c) => c > CHANGED_CAP);
  const changed = await run(
    "changed",
    changedSkipped.length > 0 ? [...reachable, CHANGED_CAP] : reachable,
  );
  return { files: o.files, noChange, changed, changedSkipped };
}
