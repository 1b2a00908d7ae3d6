/**
 * Job admission (docs/rules.md, "Admission"): whether a new Kit job (a
 * top-level job, a child started through a link or `marsh run`, or a split
 * argv branch's job) may start, decided from a snapshot of the journal's
 * state and nothing else. Admission fails fast and never queues: a parent
 * waiting on a queued child would deadlock the pool.
 *
 * The limits, in the order they are checked:
 *
 * | limit | refused when | message |
 * |---|---|---|
 * | capability | the parent job's capability is not live (cancelling, revoked, unknown) | `parent job ID8 is ending: nothing new starts under it` |
 * | usage | `MARSH_SPAWN`/`--spawn` cannot be read, or `--spawn` with `--no-spawn` | the problem (exit 2) |
 * | spawn | the name is not in the parent's spawn set | `spawn refused: NAME not in this job's spawn set (MARSH_SPAWN)` (126 from a link) |
 * | tty | a child has a terminal on stdin or stdout | `interactive child jobs are not supported yet: …` |
 * | depth | the child would be deeper than 4 (a root is 1) | `depth limit 4` |
 * | same-kit | a third consecutive job of one Kit identity | `claude → claude → claude refused: same-Kit chain limit 2 (see /run/marsh/context.md)` |
 * | fan-out | the parent has 4 live children | `fan-out limit 4` |
 * | total | the tree made 64 launches, refused ones included | `total limit 64` |
 * | kit-vms | a new Kit identity in a tree already using 4 (`MARSH_TREE_KIT_VMS`) | `NAME refused: tree already uses 4 Kit VMs (a, b, c, d) (MARSH_TREE_KIT_VMS)` |
 * | pool | 8 slots held daemon-wide, jobs and shell branches | `capacity: 8 jobs (N held by uncertain jobs on Kit K: run marsh workers reset K)` |
 * | wall | the parent has under 1 s of wall time left | `NAME refused: deadline: parent job ID8 has N ms of wall time left (MARSH_JOB_WALL_SECONDS)` |
 *
 * Every refusal exits 125 unless the table says otherwise, and leaves no
 * record. The caller prints `marsh: ` (or its command) before the message.
 *
 * Pure, importing only `model/`: the later model checker reads
 * {@linkcode admit}, {@linkcode applyAdmission}, {@linkcode endJob},
 * {@linkcode cancelTree} and {@linkcode resetKit} as its actions.
 *
 * @module
 */

import type { Lineage } from "./job_lineage.ts";
import { childSpawnSet, type SpawnNarrowing, spawnRefusal } from "./job_spawn.ts";
import {
  JOB_DEPTH,
  JOB_FAN_OUT,
  JOB_MIN_WALL_MS,
  JOB_SAME_KIT,
  JOB_TREE_KIT_VMS,
  JOB_TREE_TOTAL,
  POOL_SIZE,
} from "./limits.ts";

/** Who starts a job: a session (a root shell or the host CLI), a split's branch, or a job. */
export type JobParent =
  | { readonly kind: "session"; readonly id: string }
  | { readonly kind: "split"; readonly split: string; readonly label: string }
  | { readonly kind: "job"; readonly id: string };

/** A job's capability: `cancelling` once its tree's cancel began (admission refuses its spawns). */
export type CapState = "live" | "cancelling" | "revoked";

/**
 * A job's pool slot: `live` while its container may run and this daemon
 * tracks it, `uncertain` while it may run and nobody does (held until
 * `marsh workers reset KIT`), `free` once its deletion is verified.
 */
export type SlotState = "live" | "uncertain" | "free";

/** One job as admission sees it: its lineage, Kit, rights and whether it holds a slot. */
export interface TreeJob {
  readonly id: string;
  /** The registered name it was started as (what messages and `workers reset` name). */
  readonly name: string;
  /** Its Kit identity (the Kit's source or image): aliases of one Kit share it. */
  readonly kit: string;
  /** The parent job's id; null for a root job (started by a session or a session's split). */
  readonly parent: string | null;
  /** The root job's id (its own for a root). */
  readonly root: string;
  /** 1 for a root. */
  readonly depth: number;
  /** Started as a split argv branch: the same-Kit chain walk stops here. */
  readonly branch: boolean;
  readonly spawn: readonly string[];
  /** Its effective wall-time deadline, Unix ms; null when none is fixed yet. */
  readonly deadlineMs: number | null;
  readonly cap: CapState;
  readonly slot: SlotState;
}

/** The journal's state admission decides from. */
export interface AdmissionState {
  /** Every job that holds a slot, has a live capability, or is an ancestor of one that does. */
  readonly jobs: readonly TreeJob[];
  /** Pool slots held by shell branches (the pool is shared with split branches). */
  readonly otherSlots: number;
  /** Launches per top-level tree (its root job's id), refused ones included. */
  readonly launches: Readonly<Record<string, number>>;
}

/** The daemon's settings: read once at its start. */
export interface AdmissionConfig {
  /** Slots per daemon. */
  readonly pool: number;
  /** Distinct Kit VMs per tree (`MARSH_TREE_KIT_VMS`). */
  readonly treeKitVms: number;
  /** `MARSH_JOB_WALL_SECONDS`, or null when unset. */
  readonly wallS: number | null;
}

/** The defaults: 8 slots, 4 Kit VMs per tree, no `MARSH_JOB_WALL_SECONDS`. */
export const DEFAULT_ADMISSION_CONFIG: AdmissionConfig = {
  pool: POOL_SIZE,
  treeKitVms: JOB_TREE_KIT_VMS,
  wallS: null,
};

/** How a launch was asked for: which exit a spawn-set refusal has depends on it. */
export type LaunchVia = "session" | "link" | "run" | "branch";

/** One launch to decide. */
export interface LaunchRequest {
  /** The new job's id. */
  readonly id: string;
  /** The registered name. */
  readonly name: string;
  /** Its Kit identity. */
  readonly kit: string;
  /** The Kit's own wall-time limit, seconds. */
  readonly kitWallS: number;
  readonly parent: JobParent;
  /** For a split argv branch's job: its split and label. */
  readonly branch: { readonly split: string; readonly label: string } | null;
  readonly via: LaunchVia;
  readonly narrow: SpawnNarrowing;
  /** Every registered name: a root job's widest spawn set. */
  readonly registered: readonly string[];
  /** stdin or stdout of the asking link is a terminal. */
  readonly tty: boolean;
  readonly nowMs: number;
}

/**
 * What an admitted job's record carries (docs/rules.md, "Lineage"): its
 * lineage, with the deadline always set.
 */
export type AdmittedLineage =
  & Omit<Lineage, "deadlineMs" | "parentDeadline" | "consumes" | "fanout">
  & {
    readonly deadlineMs: number;
    /** The deadline is the parent's remaining time. */
    readonly parentDeadline: boolean;
  };

/** The limit a refusal names. */
export type AdmissionLimit =
  | "capability"
  | "usage"
  | "spawn"
  | "tty"
  | "depth"
  | "same-kit"
  | "fan-out"
  | "total"
  | "kit-vms"
  | "pool"
  | "wall";

/** An admission decision. `tree` is the top-level tree whose launch counter it bumps, if any. */
export type Admission =
  | {
    readonly ok: true;
    readonly lineage: AdmittedLineage;
    readonly warnings: readonly string[];
    readonly tree: string;
  }
  | {
    readonly ok: false;
    readonly limit: AdmissionLimit;
    readonly message: string;
    readonly exit: 2 | 125 | 126;
    readonly tree: string | null;
  };

/** The message of a refused child with a terminal attached. */
export function ttyRefusal(name: string): string {
  return `interactive child jobs are not supported yet: ${name} has a terminal on stdin or stdout; run it non-interactively with neither attached, e.g. \`${name} ... </dev/null | cat\``;
}

/** A job id's first 8 characters, as messages and listings show it. */
export function shortId(id: string): string {
  return id.slice(0, 8);
}

/** `session:<id>`, `job:<id>` or `split:<id>/<label>`: a lineage's `parent`. */
export function parentRef(p: JobParent): string {
  switch (p.kind) {
    case "session":
      return `session:${p.id}`;
    case "job":
      return `job:${p.id}`;
    case "split":
      return `split:${p.split}/${p.label}`;
  }
}

function jobById(state: AdmissionState, id: string): TreeJob | undefined {
  return state.jobs.find((j) => j.id === id);
}

/** Whether a job holds a pool slot. */
function holdsSlot(j: TreeJob): boolean {
  return j.slot !== "free";
}

/** Slots in use daemon-wide. */
export function slotsInUse(state: AdmissionState): number {
  return state.jobs.filter(holdsSlot).length + state.otherSlots;
}

/** `capacity: 8 jobs`, with the slots uncertain jobs hold per Kit and the reset that frees them. */
export function capacityMessage(state: AdmissionState, pool: number): string {
  const byName = new Map<string, number>();
  for (const j of state.jobs) {
    if (j.slot === "uncertain") byName.set(j.name, (byName.get(j.name) ?? 0) + 1);
  }
  const held = [...byName].sort(([a], [b]) => a < b ? -1 : a > b ? 1 : 0).map(([name, n]) =>
    `${n} held by uncertain jobs on Kit ${name}: run marsh workers reset ${name}`
  );
  return `capacity: ${pool} jobs${held.length === 0 ? "" : ` (${held.join("; ")})`}`;
}

/** Kit identities with a live VM in tree `root`, each with the first of its registered names. */
export function treeKits(state: AdmissionState, root: string): Map<string, string> {
  const kits = new Map<string, string>();
  for (const j of state.jobs) {
    if (j.root !== root || !holdsSlot(j)) continue;
    const name = kits.get(j.kit);
    if (name === undefined || j.name < name) kits.set(j.kit, j.name);
  }
  return kits;
}

/**
 * The names of the same-Kit chain a child of `parent` with Kit `kit`
 * would end, oldest first, the child's `name` last: the parent and its
 * ancestors while their Kit identity is `kit`, stopping after a branch job
 * (a split argv branch is no same-Kit step).
 */
export function sameKitChain(
  state: AdmissionState,
  parent: TreeJob,
  kit: string,
  name: string,
): string[] {
  const chain = [name];
  for (let cur: TreeJob | undefined = parent; cur !== undefined && cur.kit === kit;) {
    chain.unshift(cur.name);
    if (cur.branch || cur.parent === null) break;
    cur = jobById(state, cur.parent);
  }
  return chain;
}

/** Live children of `id`: its jobs that still hold a slot, branch jobs of its splits included. */
export function liveChildren(state: AdmissionState, id: string): number {
  return state.jobs.filter((j) => j.parent === id && holdsSlot(j)).length;
}

/**
 * A job's deadline: the earliest of now + the Kit's limit, now +
 * `MARSH_JOB_WALL_SECONDS` and the parent's deadline; `parentDeadline`
 * when the parent's is that earliest one.
 */
export function jobDeadline(
  nowMs: number,
  kitWallS: number,
  wallS: number | null,
  parentDeadlineMs: number | null,
): { readonly deadlineMs: number; readonly parentDeadline: boolean } {
  let own = nowMs + kitWallS * 1000;
  if (wallS !== null) own = Math.min(own, nowMs + wallS * 1000);
  if (parentDeadlineMs !== null && parentDeadlineMs <= own) {
    return { deadlineMs: parentDeadlineMs, parentDeadline: true };
  }
  return { deadlineMs: own, parentDeadline: false };
}

function refuse(
  limit: AdmissionLimit,
  message: string,
  tree: string | null,
  exit: 2 | 125 | 126 = 125,
): Admission {
  return { ok: false, limit, message, exit, tree };
}

/**
 * Decides one launch from `state`: admitted with the lineage its record
 * gets, or refused naming the first limit it breaks (the module's table).
 * A refusal past the capability and usage checks still counts as one of
 * its tree's launches (`tree`).
 */
export function admit(
  state: AdmissionState,
  req: LaunchRequest,
  config: AdmissionConfig = DEFAULT_ADMISSION_CONFIG,
): Admission {
  const parent = req.parent.kind === "job" ? jobById(state, req.parent.id) : undefined;
  if (req.parent.kind === "job" && (parent === undefined || parent.cap !== "live")) {
    return refuse(
      "capability",
      `parent job ${shortId(req.parent.id)} is ending: nothing new starts under it`,
      null,
    );
  }
  const spawn = childSpawnSet(parent?.spawn ?? req.registered, req.narrow);
  if (!spawn.ok) return refuse("usage", spawn.message, null, 2);
  const tree = parent?.root ?? req.id;
  if (parent !== undefined) {
    if (!parent.spawn.includes(req.name)) {
      return refuse("spawn", spawnRefusal(req.name), tree, req.via === "link" ? 126 : 125);
    }
    if (req.tty) return refuse("tty", ttyRefusal(req.name), tree);
    if (parent.depth + 1 > JOB_DEPTH) return refuse("depth", `depth limit ${JOB_DEPTH}`, tree);
    if (req.branch === null) {
      const chain = sameKitChain(state, parent, req.kit, req.name);
      if (chain.length > JOB_SAME_KIT) {
        return refuse(
          "same-kit",
          `${
            chain.join(" → ")
          } refused: same-Kit chain limit ${JOB_SAME_KIT} (see /run/marsh/context.md)`,
          tree,
        );
      }
    }
    if (liveChildren(state, parent.id) >= JOB_FAN_OUT) {
      return refuse("fan-out", `fan-out limit ${JOB_FAN_OUT}`, tree);
    }
    if ((state.launches[tree] ?? 0) >= JOB_TREE_TOTAL) {
      return refuse("total", `total limit ${JOB_TREE_TOTAL}`, tree);
    }
    const kits = treeKits(state, tree);
    if (!kits.has(req.kit) && kits.size >= config.treeKitVms) {
      const names = [...kits.values()].sort().join(", ");
      return refuse(
        "kit-vms",
        `${req.name} refused: tree already uses ${kits.size} Kit VMs (${names}) (MARSH_TREE_KIT_VMS)`,
        tree,
      );
    }
  }
  if (slotsInUse(state) >= config.pool) {
    return refuse("pool", capacityMessage(state, config.pool), parent === undefined ? null : tree);
  }
  if (parent !== undefined && parent.deadlineMs !== null) {
    const left = parent.deadlineMs - req.nowMs;
    if (left < JOB_MIN_WALL_MS) {
      return refuse(
        "wall",
        `${req.name} refused: deadline: parent job ${shortId(parent.id)} has ${
          Math.max(0, left)
        } ms of wall time left (MARSH_JOB_WALL_SECONDS)`,
        tree,
      );
    }
  }
  const { deadlineMs, parentDeadline } = jobDeadline(
    req.nowMs,
    req.kitWallS,
    config.wallS,
    parent?.deadlineMs ?? null,
  );
  const lineage: AdmittedLineage = {
    parent: parentRef(req.parent),
    root: tree,
    depth: parent === undefined ? 1 : parent.depth + 1,
    spawn: spawn.spawn,
    ...(req.branch === null ? {} : { split: req.branch.split, label: req.branch.label }),
    deadlineMs,
    parentDeadline,
  };
  return { ok: true, lineage, warnings: spawn.warnings, tree };
}

/**
 * The state after `decision` for `req`: the tree's launch counter bumped
 * (refusals included, as `decision.tree` says) and, when admitted, the job
 * recorded with a live capability holding a slot.
 */
export function applyAdmission(
  state: AdmissionState,
  req: LaunchRequest,
  decision: Admission,
): AdmissionState {
  const launches = decision.tree === null
    ? state.launches
    : { ...state.launches, [decision.tree]: (state.launches[decision.tree] ?? 0) + 1 };
  if (!decision.ok) return { ...state, launches };
  const l = decision.lineage;
  const job: TreeJob = {
    id: req.id,
    name: req.name,
    kit: req.kit,
    parent: req.parent.kind === "job" ? req.parent.id : null,
    root: l.root,
    depth: l.depth,
    branch: req.branch !== null,
    spawn: l.spawn,
    deadlineMs: l.deadlineMs,
    cap: "live",
    slot: "live",
  };
  return { ...state, jobs: [...state.jobs, job], launches };
}

/**
 * A job's end: its capability revoked; its slot freed when its
 * container's deletion was verified, else held `uncertain`.
 */
export function endJob(state: AdmissionState, id: string, verified: boolean): AdmissionState {
  return {
    ...state,
    jobs: state.jobs.map((j) =>
      j.id !== id ? j : { ...j, cap: "revoked", slot: verified ? "free" : "uncertain" }
    ),
  };
}

/** The ids of `id` and every descendant. */
export function subtree(state: AdmissionState, id: string): Set<string> {
  const out = new Set([id]);
  for (let grew = true; grew;) {
    grew = false;
    for (const j of state.jobs) {
      if (j.parent !== null && out.has(j.parent) && !out.has(j.id)) {
        out.add(j.id);
        grew = true;
      }
    }
  }
  return out;
}

/** A cancel of `id`'s tree begun: every live capability in it becomes `cancelling`. */
export function cancelTree(state: AdmissionState, id: string): AdmissionState {
  const ids = subtree(state, id);
  return {
    ...state,
    jobs: state.jobs.map((j) =>
      ids.has(j.id) && j.cap === "live" ? { ...j, cap: "cancelling" } : j
    ),
  };
}

/** A verified `marsh workers reset NAME`: the slots its uncertain jobs held are free. */
export function resetKit(state: AdmissionState, name: string): AdmissionState {
  return {
    ...state,
    jobs: state.jobs.map((j) =>
      j.name === name && j.slot === "uncertain" ? { ...j, slot: "free" } : j
    ),
  };
}
