/**
 * The real `./marsh` CLI against a private daemon, for `deno task bench
 * --checkpoints` (bench/checkpoints.ts): commands timed by wall clock, their
 * `--json` replies, the daemon's resident memory, and the bytes a session
 * adds to the project's layer store and to the journal.
 *
 * @module
 */

import { join } from "node:path";
import type { LogEntryInfo } from "../protocol/daemon_session.ts";

const MARSH = new URL("../marsh", import.meta.url).pathname;
/** No command here should take this long (a 100k-file snapshot included). */
const TIMEOUT_MS = 10 * 60_000;

/** One command's end. */
export interface Ran {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
  /** Wall clock from spawn to exit, in ms. */
  readonly ms: number;
}

/** The checkpoint line `marsh op` prints on stderr. */
const CHECKPOINT_LINE = /marsh: checkpoint ([0-9a-f]{64}) \(/;

/** The `marsh` CLI with its own `MARSH_HOME`, run in one project. */
export class Marsh {
  readonly env: Record<string, string>;
  /** The daemon's pid once started. */
  pid: number | null = null;

  constructor(readonly home: string, readonly project: string) {
    const env = Deno.env.toObject();
    // A MARSH_SOCK or MARSH_SESSION of the caller's would send the CLI elsewhere.
    for (const k of Object.keys(env)) {
      if (k.startsWith("MARSH_") && k !== "MARSH_DENO") delete env[k];
    }
    this.env = { ...env, MARSH_HOME: home, DENO_NO_UPDATE_CHECK: "1" };
  }

  /** Runs `marsh ARGS` and returns how it ended, whatever its status. */
  async try(args: readonly string[], cwd = this.project): Promise<Ran> {
    const t0 = performance.now();
    const out = await new Deno.Command(MARSH, {
      args: [...args],
      cwd,
      env: this.env,
      clearEnv: true,
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
      signal: AbortSignal.timeout(TIMEOUT_MS),
    }).output();
    const ms = performance.now() - t0;
    const dec = new TextDecoder();
    return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr), ms };
  }

  /** Runs `marsh ARGS`, which must succeed. */
  async run(args: readonly string[], cwd = this.project): Promise<Ran> {
    const r = await this.try(args, cwd);
    if (r.code !== 0) {
      throw new Error(`marsh ${args.join(" ")} exited ${r.code}: ${r.stderr.trim()}`);
    }
    return r;
  }

  /** Runs `marsh ARGS --json` and parses its stdout, with the wall time. */
  async json<T>(args: readonly string[]): Promise<{ reply: T; ms: number }> {
    const r = await this.run([...args, "--json"]);
    return { reply: JSON.parse(r.stdout) as T, ms: r.ms };
  }

  /** Starts the daemon (its pid noted). */
  async start(): Promise<void> {
    const r = await this.run(["daemon", "start"]);
    const m = /\(pid ([0-9]+)\)/.exec(r.stdout + r.stderr);
    if (m === null) throw new Error(`marsh daemon start printed no pid: ${r.stdout}${r.stderr}`);
    this.pid = Number(m[1]);
  }

  /** Stops the daemon (the bench's own). */
  async stop(): Promise<void> {
    await this.run(["daemon", "stop"]);
  }

  /** `marsh op [--session S] -- ARGV`, which must succeed; the checkpoint id and the wall time. */
  async op(argv: readonly string[], session?: string): Promise<{ id: string; ms: number }> {
    const r = await this.run(["op", ...(session ? ["--session", session] : []), "--", ...argv]);
    const m = CHECKPOINT_LINE.exec(r.stderr);
    if (m === null) {
      throw new Error(`marsh op ${argv.join(" ")} printed no checkpoint: ${r.stderr}`);
    }
    return { id: m[1]!, ms: r.ms };
  }

  /** `marsh log --json [--all] [--session S]`: the entries, and the wall time. */
  async log(
    opts: { all?: boolean; session?: string } = {},
  ): Promise<{ entries: LogEntryInfo[]; ms: number }> {
    const args = ["log", ...(opts.all ? ["--all"] : [])];
    if (opts.session) args.push("--session", opts.session);
    const { reply, ms } = await this.json<{ entries: LogEntryInfo[] }>(args);
    return { entries: reply.entries, ms };
  }

  /**
   * The journal's bytes in use: its pages (`dbstat`'s `pgsize`, the write-ahead
   * log's newer pages included) and its rows' payload, read with `sqlite3`
   * read-only. The files' sizes would count the write-ahead log's traffic (whole
   * pages per transaction until SQLite checkpoints it), not what is kept.
   */
  async journalBytes(): Promise<{ pages: number; payload: number }> {
    const db = join(this.home, "journal.db");
    const out = await new Deno.Command("sqlite3", {
      args: [`file:${db}?mode=ro`, "SELECT sum(pgsize), sum(payload) FROM dbstat;"],
    }).output();
    if (!out.success) {
      throw new Error(
        `sqlite3 could not read the journal's dbstat: ${new TextDecoder().decode(out.stderr)}` +
          " (the bench needs the sqlite3 command: apt-get install sqlite3)",
      );
    }
    const [pages, payload] = new TextDecoder().decode(out.stdout).trim().split("|").map(Number);
    return { pages: pages ?? 0, payload: payload ?? 0 };
  }

  /** The daemon's resident set and that of its whole process tree, in KiB. */
  async rssKiB(): Promise<{ daemon: number; tree: number }> {
    if (this.pid === null) throw new Error("the daemon is not started");
    return await treeRss(this.pid);
  }
}

/**
 * The resident set of `pid` and of it with every descendant, in KiB (`ps`:
 * Deno reads `/proc` only with every permission).
 */
export async function treeRss(pid: number): Promise<{ daemon: number; tree: number }> {
  const out = await new Deno.Command("ps", { args: ["-e", "-o", "pid=,ppid=,rss="] }).output();
  if (!out.success) throw new Error("ps -e -o pid=,ppid=,rss= failed");
  const children = new Map<number, number[]>();
  const rss = new Map<number, number>();
  for (const line of new TextDecoder().decode(out.stdout).split("\n")) {
    const [p, pp, r] = line.trim().split(/\s+/).map(Number);
    if (p === undefined || pp === undefined || r === undefined || Number.isNaN(p)) continue;
    rss.set(p, r);
    children.set(pp, [...(children.get(pp) ?? []), p]);
  }
  let tree = 0;
  const todo = [pid];
  while (todo.length > 0) {
    const p = todo.pop()!;
    tree += rss.get(p) ?? 0;
    todo.push(...(children.get(p) ?? []));
  }
  return { daemon: rss.get(pid) ?? 0, tree };
}

/** The layer ids in `<project>/.marsh/layers/`. */
export async function layerIds(project: string): Promise<Set<string>> {
  const out = new Set<string>();
  try {
    for await (const e of Deno.readDir(join(project, ".marsh", "layers"))) {
      if (e.isDirectory) out.add(e.name);
    }
  } catch (error) {
    if (!(error instanceof Deno.errors.NotFound)) throw error;
  }
  return out;
}

/** A layer's bytes by the storage equation's terms (regular files' sizes). */
export interface LayerBytes {
  /** Under `data/`: the whole changed files. */
  readonly payload: number;
  /** `index` and `stat`. */
  readonly tree: number;
  /** `meta.json` and `SEALED`. */
  readonly root: number;
}

async function fileBytes(dir: string): Promise<number> {
  let n = 0;
  for await (const e of Deno.readDir(dir)) {
    const p = join(dir, e.name);
    if (e.isDirectory) n += await fileBytes(p);
    else if (e.isFile) n += (await Deno.lstat(p)).size;
  }
  return n;
}

/** The bytes of the layers of `ids` in `project`'s store, summed by term. */
export async function layerBytes(project: string, ids: Iterable<string>): Promise<LayerBytes> {
  let payload = 0, tree = 0, root = 0;
  for (const id of ids) {
    const dir = join(project, ".marsh", "layers", id);
    payload += await fileBytes(join(dir, "data"));
    for (const f of ["index", "stat"]) tree += (await Deno.lstat(join(dir, f))).size;
    for (const f of ["meta.json", "SEALED"]) root += (await Deno.lstat(join(dir, f))).size;
  }
  return { payload, tree, root };
}

/** The layers in `after` and not in `before`. */
export function added(before: ReadonlySet<string>, after: ReadonlySet<string>): string[] {
  return [...after].filter((id) => !before.has(id));
}
