/**
 * A test world for Kit branches: a {@linkcode Sandbox} whose CLI and daemon
 * use the test engine ({@linkcode ensureEngine}), with the fixture Kit
 * registered as `fixture` (entrypoint `env`, so `fixture sh -c …` runs
 * `sh -c …` in the image). Every container its splits made is removed at
 * its end.
 *
 * @module
 */

import assert from "node:assert/strict";
import type { Manifest } from "../protocol/manifest.ts";
import { Sandbox, show } from "./_acceptance.ts";
import { ensureEngine, fixtureKit, listContainers, removeContainers } from "./_engine.ts";

/**
 * One job as the tests read it: `marsh jobs --json`'s `marsh.jobs/v1` job
 * with `marsh jobs show --json`'s status and container, in the record's
 * words (`kit` is the command, `args` starts with it, `split` and `label`
 * are its lineage's, `""` for a job no split started).
 */
export interface JobJson {
  id: string;
  kit: string;
  split: string;
  label: string;
  state: string;
  status: string | null;
  code: number | null;
  container: string | null;
  cleanup: string;
  args: string[];
  created_unix_ms: number;
  started_unix_ms: number | null;
  finished_unix_ms: number | null;
  lineage: Record<string, unknown>;
}

/** One job of `marsh.jobs/v1`. */
interface JobV1 {
  job_id: string;
  command: string;
  args: string[];
  state: string;
  cleanup: string;
  exit_code: number | null;
  created_unix_ms: number;
  started_unix_ms: number | null;
  finished_unix_ms: number | null;
  lineage: { split?: string; label?: string } & Record<string, unknown>;
}

/** A sandbox whose CLI and daemon use the test engine, with Kit `fixture` registered. */
export class World implements AsyncDisposable {
  readonly splits: string[] = [];
  private constructor(readonly sb: Sandbox, readonly socket: string, readonly ref: string) {}

  static async create(
    files?: Record<string, string>,
    env: Record<string, string> = {},
  ): Promise<World> {
    const socket = await ensureEngine();
    const { ref } = await fixtureKit(socket);
    const sb = await Sandbox.create({
      env: { DOCKER_HOST: `unix://${socket}`, ...env },
      ...(files ? { files } : {}),
    });
    const w = new World(sb, socket, ref);
    // `env` runs CMD's arguments: `fixture sh -c …` runs `sh -c …` in the image.
    const add = await sb.marsh(["kits", "add", "fixture", "--image", ref, "--entrypoint", "env"]);
    assert.equal(add.code, 0, show(add));
    return w;
  }

  /** `marsh split ARGS` to its end; remembers the split for the teardown. */
  async split(args: string[], opts: { cwd?: string; stdin?: string } = {}) {
    const r = await this.sb.marsh(["split", ...args], opts);
    const m = /"id":"([a-z0-9]+)"/.exec(r.stdout);
    if (m) this.splits.push(m[1]!);
    return r;
  }

  async manifest(id: string): Promise<Manifest> {
    const s = await this.sb.split(id);
    assert.ok(s, `split ${id}`);
    return s;
  }

  /** Every job (`marsh jobs --json`), each with its status and container (`marsh jobs show`). */
  async jobs(): Promise<JobJson[]> {
    const r = await this.sb.marsh(["jobs", "--json"]);
    assert.equal(r.code, 0, show(r));
    const doc = JSON.parse(r.stdout) as { schema: string; jobs: JobV1[] };
    assert.equal(doc.schema, "marsh.jobs/v1");
    return await Promise.all(doc.jobs.map(async (j) => {
      const s = await this.sb.marsh(["jobs", "show", j.job_id, "--json"]);
      assert.equal(s.code, 0, show(s));
      const shown = JSON.parse(s.stdout) as { status: string | null; container: string | null };
      return {
        id: j.job_id,
        kit: j.command,
        split: j.lineage.split ?? "",
        label: j.lineage.label ?? "",
        state: j.state,
        status: shown.status,
        code: j.exit_code,
        container: shown.container,
        cleanup: j.cleanup,
        args: [j.command, ...j.args],
        created_unix_ms: j.created_unix_ms,
        started_unix_ms: j.started_unix_ms,
        finished_unix_ms: j.finished_unix_ms,
        lineage: j.lineage,
      };
    }));
  }

  /**
   * This daemon's containers of split `id` (`run` for `marsh run` jobs). Owner-scoped: the test
   * engine is shared by test files running in parallel, and `run` is every daemon's label.
   */
  containersOf(id: string) {
    return listContainers(this.socket, [`marsh.split=${id}`, `marsh.owner=${this.sb.home}`]);
  }

  async [Symbol.asyncDispose](): Promise<void> {
    try {
      await this.sb[Symbol.asyncDispose]();
    } finally {
      for (const id of this.splits) {
        await removeContainers(this.socket, [`marsh.split=${id}`, `marsh.owner=${this.sb.home}`]);
      }
    }
  }
}

/** Pids of live processes whose command line holds every one of `needles` (through ps). */
export async function pidsNaming(...needles: string[]): Promise<number[]> {
  const out = await new Deno.Command("ps", { args: ["-eo", "pid=,stat=,args="], stdout: "piped" })
    .output();
  const pids: number[] = [];
  for (const line of new TextDecoder().decode(out.stdout).split("\n")) {
    const m = /^\s*(\d+)\s+(\S+)\s+(.*)$/.exec(line);
    if (!m || m[2]!.startsWith("Z") || m[3]!.startsWith("ps ")) continue;
    if (needles.every((n) => m[3]!.includes(n))) pids.push(Number(m[1]));
  }
  return pids;
}
