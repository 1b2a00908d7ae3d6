/**
 * Test helper: job records and launch requests for the job tree's journal
 * tests and their racing child processes.
 *
 * @module
 */

import type { JobRecord } from "./records.ts";
import type { AdmissionConfig, LaunchRequest } from "../model/job_admission.ts";

/** Registered names the tests use. */
export const NAMES = ["claude", "codex", "fixture"];

/** A pool big enough that only the rule under test refuses. */
export const WIDE: AdmissionConfig = { pool: 1_000_000, treeKitVms: 4, wallS: null };

/** A queued job record with no split (`marsh run`, a link). */
export function jobRecord(id: string, kit = "codex"): JobRecord {
  return {
    id,
    kit,
    args: [kit, "exec", "x"],
    split: "",
    label: "",
    session: "sess",
    state: "queued",
    cleanup: "none",
    attempt: null,
    container: null,
    status: null,
    code: null,
    createdMs: 1_000,
    startedMs: null,
    finishedMs: null,
  };
}

/** A launch of `name` by `parent` (a job id, or null for the session). */
export function launch(id: string, parent: string | null, name = "codex"): LaunchRequest {
  return {
    id,
    name,
    kit: `kit-${name}`,
    kitWallS: 3600,
    parent: parent === null ? { kind: "session", id: "sess" } : { kind: "job", id: parent },
    branch: null,
    via: parent === null ? "session" : "link",
    narrow: {},
    registered: NAMES,
    tty: false,
    nowMs: 1_000,
  };
}
