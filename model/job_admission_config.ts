/**
 * The daemon's admission settings from its environment (docs/rules.md,
 * "Admission"): `MARSH_TREE_KIT_VMS` (Kit VMs per job tree, 1–64) and
 * `MARSH_JOB_WALL_SECONDS` (a cap on every job's wall time), read once at
 * its start.
 *
 * Pure, importing only `model/`: the caller passes the variables' values.
 *
 * @module
 */

import type { AdmissionConfig } from "./job_admission.ts";
import { JOB_TREE_KIT_VMS, JOB_TREE_KIT_VMS_MAX, MAX_WALL_S, POOL_SIZE } from "./limits.ts";

/** The variable that sets {@linkcode AdmissionConfig.treeKitVms} at the daemon's start. */
export const TREE_KIT_VMS_ENV = "MARSH_TREE_KIT_VMS";
/** The variable that caps every job's wall time at the daemon's start, in seconds. */
export const JOB_WALL_ENV = "MARSH_JOB_WALL_SECONDS";

function wholeIn(raw: string, min: number, max: number): number | null {
  if (!/^\s*\d+\s*$/.test(raw)) return null;
  const n = Number(raw);
  return Number.isSafeInteger(n) && n >= min && n <= max ? n : null;
}

/**
 * The daemon's admission settings from its environment's
 * `MARSH_TREE_KIT_VMS` (1–64) and `MARSH_JOB_WALL_SECONDS` (1–86400); an
 * unset or empty variable keeps the default.
 */
export function admissionConfig(
  env: { readonly treeKitVms?: string; readonly wallS?: string },
): { readonly ok: true; readonly config: AdmissionConfig } | {
  readonly ok: false;
  readonly message: string;
} {
  let treeKitVms = JOB_TREE_KIT_VMS;
  if (env.treeKitVms !== undefined && env.treeKitVms !== "") {
    const n = wholeIn(env.treeKitVms, 1, JOB_TREE_KIT_VMS_MAX);
    if (n === null) {
      return {
        ok: false,
        message:
          `${TREE_KIT_VMS_ENV}=${env.treeKitVms}: expected a whole number from 1 to ${JOB_TREE_KIT_VMS_MAX} (Kit VMs one job tree may use at once); unset it for ${JOB_TREE_KIT_VMS}`,
      };
    }
    treeKitVms = n;
  }
  let wallS: number | null = null;
  if (env.wallS !== undefined && env.wallS !== "") {
    wallS = wholeIn(env.wallS, 1, MAX_WALL_S);
    if (wallS === null) {
      return {
        ok: false,
        message:
          `${JOB_WALL_ENV}=${env.wallS}: expected a whole number of seconds from 1 to ${MAX_WALL_S}; unset it to keep each Kit's own limit`,
      };
    }
  }
  return { ok: true, config: { pool: POOL_SIZE, treeKitVms, wallS } };
}
