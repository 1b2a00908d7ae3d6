/**
 * A Kit attempt's capability, as every Kit launch makes it (a split argv
 * branch's job and a `marsh run` job alike; docs/rules.md "The job
 * capability"): the `/run/marsh` dir written fresh under the attempt's
 * directory, and the attempt's `cap.sock` opened with the job's authority.
 * What the worker binds at `/run/marsh` is the returned {@linkcode KitCap}.
 *
 * @module
 */

import { Buffer } from "node:buffer";
import type { KitCap, KitSpec } from "../protocol/kit_launch.ts";
import type { KitRecord } from "../model/kit_rules.ts";
import type { Authority } from "./conn.ts";
import { jobJsonBase, writeCapDir } from "./job_capability.ts";

/** What opening a capability needs of the daemon. */
export interface JobCapDeps {
  /** The bundled in-job client, built on the first Kit launch. */
  readonly jobClient: { ensure(): Promise<string> };
  /** The host's Deno executable, bound at `/run/marsh/deno`. */
  readonly deno: string;
  readonly sockets: {
    openJob(authority: Extract<Authority, { kind: "job" }>): string;
    close(path: string): void;
  };
  /** Every registered name (each gets a link). */
  registered(): readonly string[];
  /**
   * This daemon's environment digest key (`daemon/env_key.ts`): the worker
   * digests the job's starting variables with it for `job.json`.
   */
  readonly envKey: Uint8Array;
}

/** One attempt's capability to make. */
export interface JobCapSpec {
  /** The attempt's directory: the cap dir is `<dir>/run`, which must not exist. */
  readonly dir: string;
  /** The job's Kit name. */
  readonly name: string;
  /** The job's recorded spawn set; absent: every registered name. */
  readonly spawn?: readonly string[];
  /** The socket's authority: the job, its attempt and its view. */
  readonly authority: Extract<Authority, { kind: "job" }>;
}

/**
 * Writes the attempt's cap dir and opens its socket. Nothing is left open
 * when it throws: a job never runs without its `/run/marsh`.
 *
 * @returns the capability for the worker and the socket's host path (close it at the job's end)
 */
export async function openJobCap(
  d: JobCapDeps,
  spec: JobCapSpec,
): Promise<{ readonly cap: KitCap; readonly socket: string }> {
  const client = await d.jobClient.ensure();
  const base = jobJsonBase(spec.authority.job, spec.name, d.registered(), spec.spawn);
  writeCapDir(`${spec.dir}/run`, base);
  const socket = d.sockets.openJob(spec.authority);
  return {
    cap: {
      dir: `${spec.dir}/run`,
      socket,
      deno: d.deno,
      client,
      job: base,
      envKey: Buffer.from(d.envKey).toString("hex"),
    },
    socket,
  };
}

/**
 * What the worker is told of a registered Kit for one launch. The image is the id checked at
 * registration: a re-tagged image does not change a Kit.
 */
export function kitSpec(kit: KitRecord, wallS: number): KitSpec {
  return {
    name: kit.name,
    image: kit.imageId,
    entrypoint: kit.entrypoint,
    network: kit.network,
    env: kit.env,
    wallS,
    home: kit.home,
  };
}
