/**
 * What the daemon puts in a Kit attempt's capability dir (docs/rules.md "The job capability"): the
 * link stubs, the link script, `context.md`, and the empty mount points the
 * worker binds the socket, Deno and the in-job client onto. `job.json` is the
 * worker's (it alone reads the image's `PATH` and `ENV`). The dir is made fresh per
 * attempt (`O_EXCL`), under the attempt's 0700 directory in the control dir;
 * inside the container it is a read-only bind.
 *
 * Needs read and write on the control dir.
 *
 * @module
 */

import {
  CAP_FILES,
  CAP_SOCKET,
  type JobJsonBase,
  linkScript,
  stubScript,
} from "../protocol/job_capability.ts";
import { bundleJobClient } from "../job/bundle.ts";
import { isLinkName } from "../model/kit_name.ts";
import { contextText } from "../model/job_context.ts";
import {
  JOB_DEPTH,
  JOB_FAN_OUT,
  JOB_SAME_KIT,
  JOB_TREE_TOTAL,
  POOL_SIZE,
} from "../model/limits.ts";

/** `job.json` as the daemon knows it: the worker adds `path`, `env` and `forwarded`. */
export type { JobJsonBase };

/**
 * The job's `job.json` fields the daemon decides. `spawn` is the job's
 * recorded spawn set (its lineage's); absent, every registered name
 * (cross-Kit spawning is allowed by default, docs/rules.md "Spawn sets").
 */
export function jobJsonBase(
  job: string,
  name: string,
  registered: readonly string[],
  spawn?: readonly string[],
): JobJsonBase {
  const names = [...new Set(registered)].filter((n) => isLinkName(n) && n !== "marsh").sort();
  return {
    version: 1,
    job,
    name,
    // Only names that have a link: a set recorded before a `kits rm` keeps no dangling name.
    spawn: spawn === undefined ? names : names.filter((n) => spawn.includes(n)),
    registered: names,
    socket: CAP_SOCKET,
    // The job tree's limits (docs/rules.md "Admission"), not a split's.
    limits: {
      pool: POOL_SIZE,
      depth: JOB_DEPTH,
      same_kit: JOB_SAME_KIT,
      fan_out: JOB_FAN_OUT,
      total: JOB_TREE_TOTAL,
    },
  };
}

/**
 * The job's agent context (docs/rules.md "The job capability"), at most 60 lines: its name and
 * spawn set, how to start a child, split, fanout, see and narrow, the limits, confinement and
 * when not to spawn. One source with the generic text `marsh context` prints outside a job.
 */
export function jobContext(base: JobJsonBase): string {
  return contextText(base);
}

function writeNew(path: string, text: string, mode: number): void {
  // createNew: a leftover never passes for this attempt's file.
  Deno.writeTextFileSync(path, text, { createNew: true, mode });
  Deno.chmodSync(path, mode);
}

/**
 * Makes `dir` (which must not exist) with the stubs for `marsh` and every
 * registered name, the link script for a job whose own name is `base.name`,
 * `context.md`, and empty mount points for the socket, Deno and the client.
 * Readable by the image's user, whoever it is.
 */
export function writeCapDir(dir: string, base: JobJsonBase): void {
  Deno.mkdirSync(dir, { mode: 0o755 });
  Deno.chmodSync(dir, 0o755);
  const bin = `${dir}/${CAP_FILES.bin}`;
  Deno.mkdirSync(bin, { mode: 0o755 });
  Deno.chmodSync(bin, 0o755);
  for (const name of ["marsh", ...base.registered]) {
    writeNew(`${bin}/${name}`, stubScript(name), 0o755);
  }
  writeNew(`${dir}/${CAP_FILES.link}`, linkScript(base.name), 0o755);
  writeNew(`${dir}/${CAP_FILES.context}`, jobContext(base), 0o644);
  for (const point of [CAP_FILES.socket, CAP_FILES.deno, CAP_FILES.client]) {
    writeNew(`${dir}/${point}`, "", 0o644);
  }
}

/**
 * The bundled in-job client (`job/main.ts`), built once per daemon process
 * into the control dir on the first Kit launch. A failed build is not
 * remembered: the next launch tries again (and fails its attempt the same
 * way, never running a job without its `/run/marsh`).
 */
export class JobClientBundle {
  readonly #out: string;
  readonly #deno: string;
  #ready: Promise<string> | null = null;

  constructor(home: string, deno: string) {
    this.#out = `${home}/lib/marsh-job.js`;
    this.#deno = deno;
  }

  /** The bundle's path, once it is built. */
  ensure(): Promise<string> {
    if (this.#ready === null) {
      const ready = (async () => {
        Deno.mkdirSync(this.#out.slice(0, this.#out.lastIndexOf("/")), {
          recursive: true,
          mode: 0o700,
        });
        await bundleJobClient(this.#deno, this.#out);
        return this.#out;
      })();
      ready.catch(() => {
        if (this.#ready === ready) this.#ready = null;
      });
      this.#ready = ready;
    }
    return this.#ready;
  }
}
