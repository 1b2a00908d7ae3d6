/**
 * The job tree in the journal (docs/rules.md, "Admission" and "Lineage"):
 * admission decided and recorded in one `BEGIN IMMEDIATE` transaction, the
 * cancel of a tree, and the counters `marsh status` shows.
 *
 * Spawn is ordered against cancel by the write lock: {@linkcode
 * JobTreeJournal.admit} re-reads the parent's capability, decides with
 * `model/job_admission.ts` and inserts the child in one transaction, and
 * {@linkcode JobTreeJournal.cancelTree} marks a whole subtree cancelling in
 * another. A cancel that takes the lock first leaves a parent that admits
 * nothing; one that takes it later finds the child and marks it too. No
 * order leaves a live child under a cancelling parent.
 *
 * Use it through `Journal.jobTree`; needs what the journal needs.
 *
 * @module
 */

import { jobColumns } from "./_codec.ts";
import type { Connection, Row } from "./_connection.ts";
import {
  type Admission,
  type AdmissionConfig,
  type AdmissionState,
  admit,
  type CapState,
  type LaunchRequest,
  type SlotState,
  type TreeJob,
} from "../model/job_admission.ts";
import { cutArgs, type Lineage, type ListedJob, type ProcessCounts } from "../model/job_lineage.ts";
import type { LineageMarks } from "../model/lineage_marks.ts";
import type { JobRecord } from "./records.ts";
import { cancelScope, type TreeRoot, type TreeScope, treeScope } from "./job_tree_scope.ts";
import {
  HELD_SHELL,
  type HeldShellSlot,
  heldShellSlots,
  recordSupervisor,
  supervisorEnded,
} from "./shell_slots.ts";

export type { TreeRoot, TreeScope } from "./job_tree_scope.ts";
export type { HeldShellSlot } from "./shell_slots.ts";

/** A job's lineage columns as the journal keeps them; null for a job recorded before the job tree. */
export interface JobTreeRow {
  readonly id: string;
  readonly parent: string | null;
  readonly parentJob: string | null;
  readonly root: string | null;
  readonly depth: number | null;
  readonly spawn: readonly string[] | null;
  readonly kitRef: string | null;
  readonly branch: boolean | null;
  readonly deadlineMs: number | null;
  readonly parentDeadline: boolean | null;
  readonly cap: CapState | null;
  /** `lineage.fanout`: the `marsh fanout` branch that started it (display only). */
  readonly fanout: string | null;
  /** `lineage.consumes`: the split its stage after `marsh join` consumes (display only). */
  readonly consumes: string | null;
}

function optInt(row: Row, col: string): number | null {
  const v = row[col];
  return v === null || v === undefined ? null : Number(v);
}

function optText(row: Row, col: string): string | null {
  const v = row[col];
  return v === null || v === undefined ? null : String(v);
}

function treeRow(row: Row): JobTreeRow {
  const spawn = optText(row, "spawn");
  const branch = optInt(row, "branch");
  const pd = optInt(row, "parent_deadline");
  return {
    id: String(row.id),
    parent: optText(row, "parent"),
    parentJob: optText(row, "parent_job"),
    root: optText(row, "root"),
    depth: optInt(row, "depth"),
    spawn: spawn === null ? null : JSON.parse(spawn) as string[],
    kitRef: optText(row, "kit_ref"),
    branch: branch === null ? null : branch === 1,
    deadlineMs: optInt(row, "deadline_ms"),
    parentDeadline: pd === null ? null : pd === 1,
    cap: optText(row, "cap") as CapState | null,
    fanout: optText(row, "fanout"),
    consumes: optText(row, "consumes"),
  };
}

/**
 * A job's pool slot from its record: held `uncertain` while its cleanup
 * is; held while it is queued or running or its container may live;
 * otherwise free.
 */
function slotOf(row: Row): SlotState {
  if (row.cleanup === "uncertain") return "uncertain";
  if (row.cleanup === "live" || row.state === "queued" || row.state === "running") return "live";
  return "free";
}

/** A job row as admission sees it; a job from before the job tree is a root with no rights. */
function treeJob(row: Row): TreeJob {
  const t = treeRow(row);
  return {
    id: t.id,
    name: String(row.kit),
    kit: t.kitRef ?? String(row.kit),
    parent: t.parentJob,
    root: t.root ?? t.id,
    depth: t.depth ?? 1,
    branch: t.branch ?? true,
    spawn: t.spawn ?? [],
    deadlineMs: t.deadlineMs,
    cap: t.cap ?? "revoked",
    slot: slotOf(row),
  };
}

/** Journal access for the job tree, on the journal's one connection. */
export class JobTreeJournal {
  readonly #c: Connection;

  constructor(c: Connection) {
    this.#c = c;
  }

  /**
   * The state admission decides a child of `parentJob` (or a root job,
   * null) from: every job holding a slot or a capability, the parent's
   * ancestors (for the same-Kit walk), the running shell branches' slots,
   * and the launches of the parent's tree. Read inside the caller's
   * transaction.
   */
  #state(parentJob: string | null): AdmissionState {
    const c = this.#c;
    const rows = c.all(
      `SELECT * FROM jobs WHERE cleanup IN ('live', 'uncertain') OR state IN ('queued', 'running')
         OR cap IN ('live', 'cancelling')`,
    );
    if (parentJob !== null) {
      rows.push(...c.all(
        `WITH RECURSIVE up(id) AS (
           SELECT :p UNION SELECT j.parent_job FROM jobs j JOIN up ON j.id = up.id
           WHERE j.parent_job IS NOT NULL)
         SELECT * FROM jobs WHERE id IN (SELECT id FROM up)`,
        { p: parentJob },
      ));
    }
    const seen = new Set<string>();
    const jobs: TreeJob[] = [];
    for (const row of rows) {
      if (seen.has(String(row.id))) continue;
      seen.add(String(row.id));
      jobs.push(treeJob(row));
    }
    // Running shell branches, and uncertain ones whose end is not verified yet.
    const shells = c.get(
      `SELECT (SELECT count(*) FROM branches WHERE kind = 'shell' AND state = 'running')
         + (SELECT count(*) FROM shell_supervisors s
            JOIN branches b ON b.split = s.split AND b.label = s.label WHERE ${HELD_SHELL}) AS n`,
    );
    const launches: Record<string, number> = {};
    const root = parentJob === null ? undefined : jobs.find((j) => j.id === parentJob)?.root;
    if (root !== undefined) {
      const row = c.get("SELECT launches FROM job_tree_launches WHERE root = :root", { root });
      if (row !== undefined) launches[root] = Number(row.launches);
    }
    return { jobs, otherSlots: Number(shells?.n ?? 0), launches };
  }

  /**
   * Decides `req` and records the outcome in one `BEGIN IMMEDIATE`
   * transaction: the parent's capability re-read under the write lock, the
   * tree's launch counter and the admitted/refused counts bumped, and, when
   * admitted, `record` inserted (`queued`) with its lineage and a live
   * capability, and its display marks (`model/lineage_marks.ts` decided
   * them). A refusal records no job.
   *
   * @param record the job's record; its id must be `req.id`
   * @param marks `lineage.fanout` and `lineage.consumes`, when they apply
   * @throws {TypeError} when `record.id` is not `req.id`
   * @throws {Deno.errors.AlreadyExists} for a known job id
   */
  admit(
    req: LaunchRequest,
    config: AdmissionConfig,
    record: JobRecord,
    marks: LineageMarks = {},
  ): Admission {
    if (record.id !== req.id) {
      throw new TypeError(`The job's record is ${record.id}, the request's ${req.id}`);
    }
    const cols = jobColumns(record);
    const c = this.#c;
    return c.write("admit a job", () => {
      const parentJob = req.parent.kind === "job" ? req.parent.id : null;
      const decision = admit(this.#state(parentJob), req, config);
      if (decision.tree !== null) {
        c.run(
          `INSERT INTO job_tree_launches (root, launches) VALUES (:root, 1)
           ON CONFLICT (root) DO UPDATE SET launches = launches + 1`,
          { root: decision.tree },
        );
      }
      c.run("UPDATE admission_counts SET n = n + 1 WHERE name = :name", {
        name: decision.ok ? "admitted" : "refused",
      });
      if (!decision.ok) return decision;
      if (c.get("SELECT 1 AS x FROM jobs WHERE id = :id", { id: req.id }) !== undefined) {
        throw new Deno.errors.AlreadyExists(`Job already exists: "${req.id}"`);
      }
      const l = decision.lineage;
      c.insert("jobs", {
        ...cols,
        parent: l.parent,
        parent_job: parentJob,
        root: l.root,
        depth: l.depth,
        spawn: JSON.stringify(l.spawn),
        kit_ref: req.kit,
        branch: req.branch === null ? 0 : 1,
        deadline_ms: l.deadlineMs,
        parent_deadline: l.parentDeadline ? 1 : 0,
        cap: "live",
        fanout: marks.fanout ?? null,
        consumes: marks.consumes ?? null,
      });
      return decision;
    });
  }

  /**
   * Begins the cancel of `id`'s tree in one transaction: every live
   * capability in the subtree becomes `cancelling` (admission refuses
   * their spawns from now on). Returns every job id of the subtree, `id`
   * first, for the caller to signal.
   */
  cancelTree(id: string): string[] {
    const c = this.#c;
    return c.write("cancel a job tree", () => {
      const ids = c.all(
        `WITH RECURSIVE down(id) AS (
           SELECT :id UNION SELECT j.id FROM jobs j JOIN down ON j.parent_job = down.id)
         SELECT id FROM down`,
        { id },
      ).map((r) => String(r.id));
      c.run(
        `UPDATE jobs SET cap = 'cancelling' WHERE cap = 'live' AND id IN (
           WITH RECURSIVE down(id) AS (
             SELECT :id UNION SELECT j.id FROM jobs j JOIN down ON j.parent_job = down.id)
           SELECT id FROM down)`,
        { id },
      );
      return ids;
    });
  }

  /**
   * The first step of a cancel of everything at and below `root` (a job,
   * a split or a branch; `journal/job_tree_scope.ts`), in one transaction:
   * every live job capability in it `cancelling`, every live branch
   * capability revoked. Returns the scope, for the caller to signal.
   */
  cancelScope(root: TreeRoot, nowMs: number = Date.now()): TreeScope {
    return cancelScope(this.#c, root, nowMs);
  }

  /** Every node at and below `root`, changing nothing. */
  scope(root: TreeRoot): TreeScope {
    return treeScope(this.#c, root);
  }

  /** Records a running shell branch's supervisor (`journal/shell_slots.ts`). */
  recordSupervisor(split: string, label: string, pid: number, start: number): void {
    recordSupervisor(this.#c, split, label, pid, start);
  }

  /** The shell branches whose end is unknown, each holding its pool slot. */
  heldShellSlots(): HeldShellSlot[] {
    return heldShellSlots(this.#c);
  }

  /** A held shell branch's supervisor was seen gone: its slot frees. */
  supervisorEnded(split: string, label: string, nowMs: number = Date.now()): void {
    supervisorEnded(this.#c, split, label, nowMs);
  }

  /** A job's end: its capability revoked (its slot follows its cleanup). */
  revoke(id: string): void {
    this.#c.write("revoke a job's capability", () => {
      this.#c.run("UPDATE jobs SET cap = 'revoked' WHERE id = :id AND cap IS NOT NULL", { id });
    });
  }

  /** A job's lineage columns, or null for an unknown job. */
  lineage(id: string): JobTreeRow | null {
    return this.#c.read("read a job's lineage", () => {
      const row = this.#c.get("SELECT * FROM jobs WHERE id = :id", { id });
      return row === undefined ? null : treeRow(row);
    });
  }

  /** The ids of `id`'s children, in launch order. */
  children(id: string): string[] {
    return this.#c.read("list a job's children", () =>
      this.#c.all(
        "SELECT id FROM jobs WHERE parent_job = :id ORDER BY created_ms, rowid",
        { id },
      ).map((r) => String(r.id)));
  }

  /**
   * Every job as `marsh jobs` lists it (`model/job_lineage.ts`): its
   * arguments after the command, cut for display, and its lineage; a job
   * from before the job tree is drawn as the root job of its split's
   * branch.
   */
  listed(): ListedJob[] {
    return this.#c.read(
      "list jobs with their lineage",
      () =>
        this.#c.all("SELECT * FROM jobs ORDER BY created_ms, rowid").map((row) => {
          const t = treeRow(row);
          const split = String(row.split);
          const label = String(row.label);
          const lineage: Lineage = {
            parent: t.parent ?? `split:${split}/${label}`,
            root: t.root ?? t.id,
            depth: t.depth ?? 1,
            spawn: t.spawn ?? [],
            ...(split === "" ? {} : { split, label }),
            ...(t.deadlineMs === null ? {} : { deadlineMs: t.deadlineMs }),
            ...(t.parentDeadline === true ? { parentDeadline: true } : {}),
            ...(t.consumes === null ? {} : { consumes: t.consumes }),
            ...(t.fanout === null ? {} : { fanout: t.fanout }),
          };
          const args = JSON.parse(String(row.args)) as string[];
          return {
            id: t.id,
            sessionId: String(row.session),
            command: String(row.kit),
            args: cutArgs(args.slice(1)),
            state: String(row.state),
            cleanup: String(row.cleanup),
            exitCode: optInt(row, "code"),
            createdMs: Number(row.created_ms),
            startedMs: optInt(row, "started_ms"),
            finishedMs: optInt(row, "finished_ms"),
            lineage,
          };
        }),
    );
  }

  /** Launches recorded for the tree rooted at `root`, refused ones included. */
  launches(root: string): number {
    return this.#c.read("read a tree's launches", () => {
      const row = this.#c.get("SELECT launches FROM job_tree_launches WHERE root = :root", {
        root,
      });
      return row === undefined ? 0 : Number(row.launches);
    });
  }

  /**
   * `marsh status`'s `processes`: jobs queued or running, launches refused,
   * slots held by uncertain jobs and by shell branches whose end is unknown.
   */
  processes(): ProcessCounts {
    return this.#c.read("count processes", () => {
      const row = this.#c.get(
        `SELECT
           (SELECT count(*) FROM jobs WHERE state IN ('queued', 'running')) AS running,
           (SELECT n FROM admission_counts WHERE name = 'refused') AS refused,
           (SELECT count(*) FROM jobs WHERE cleanup = 'uncertain')
             + (SELECT count(*) FROM shell_supervisors s
                JOIN branches b ON b.split = s.split AND b.label = s.label
                WHERE ${HELD_SHELL}) AS held`,
      );
      return {
        running: Number(row?.running ?? 0),
        refused: Number(row?.refused ?? 0),
        held: Number(row?.held ?? 0),
      };
    });
  }

  /** How many launches were admitted and refused since the journal was made. */
  counts(): { readonly admitted: number; readonly refused: number } {
    return this.#c.read("read the admission counts", () => {
      const out = { admitted: 0, refused: 0 };
      for (const r of this.#c.all("SELECT name, n FROM admission_counts")) {
        out[r.name as "admitted" | "refused"] = Number(r.n);
      }
      return out;
    });
  }
}
