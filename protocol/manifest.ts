/**
 * The split manifest (docs/rules.md "States and records"): `out/manifest.json`, `join --json`, and
 * each element of `splits --json`. One shape for all three.
 *
 * @module
 */

/** Who created a split; only the creator may join it. */
export type Creator =
  | { readonly kind: "host" }
  | { readonly kind: "session"; readonly id: string }
  | { readonly kind: "job"; readonly id: string };

/** Public split states (docs/rules.md "States and records"). */
export type SplitState = "run" | "await" | "joined" | "kept" | "cancelled" | "uncertain";

/** Public branch states. */
export type BranchState =
  | "pending"
  | "running"
  | "captured"
  | "rejected"
  | "failed"
  | "cancelled"
  | "uncertain"
  | "discarded";

/**
 * A discarded branch's lineage (`marsh discard`, docs/guide.md "Discarding
 * branches"): the state it had ended in, why, who discarded it and when.
 */
export interface ManifestDiscard {
  readonly after: "captured" | "rejected" | "failed" | "cancelled" | "uncertain";
  /** `--reason TEXT`, or null. */
  readonly reason: string | null;
  /** The split's creator: `host`, `session:<id>` or `job:<id>`. */
  readonly by: string;
  readonly at_unix_ms: number;
}

/** One branch in the manifest. Optional fields are absent rather than null. */
export interface ManifestBranch {
  readonly label: string;
  readonly kind: "shell" | "argv";
  readonly placement: "shell-vm" | `kit:${string}`;
  readonly state: BranchState;
  readonly status?: string;
  readonly code?: number;
  readonly job_id?: string;
  readonly files: number;
  readonly trust?: "untrusted";
  readonly fork: string;
  readonly fork_strategy?: string;
  /**
   * A launched shell branch's view (docs/engine.md, "Containment"):
   * `project`, its fork at the project's own path in a private mount
   * namespace; `fork`, the host's view from its fork's directory, where
   * absolute paths and `../` reach the project. `view_reason` says why.
   */
  readonly view?: "project" | "fork";
  readonly view_reason?: string;
  readonly started_unix_ms?: number;
  readonly finished_unix_ms?: number;
  /** Present only for a `discarded` branch. */
  readonly discarded?: ManifestDiscard;
  /**
   * A running shell branch whose shell exited while processes it started
   * still run (a `setsid` daemon, a background job): they hold the branch
   * until they end (docs/guide.md, "Watching and stopping a branch"). Only
   * in `marsh splits`, never in `out/manifest.json` (a settled branch has none).
   */
  readonly lingering?: Lingering;
}

/** What keeps a branch running after its shell exited. */
export interface Lingering {
  /** When its shell exited. */
  readonly since_unix_ms: number;
  /** The first of them by pid (at most 16): pid and command line. */
  readonly processes: readonly { readonly pid: number; readonly command: string }[];
  /** How many more there are. */
  readonly more: number;
}

/** The manifest, version 2. */
export interface Manifest {
  readonly version: 2;
  readonly id: string;
  readonly state: SplitState;
  readonly status?: number;
  readonly creator: Creator;
  readonly session: string;
  readonly parent: null | { readonly split: string; readonly label: string };
  readonly depth: number;
  readonly root: string;
  readonly dir: string;
  readonly out: string;
  readonly objects: string;
  readonly cwd: string;
  readonly created_unix_ms: number;
  readonly reason?: string;
  readonly git?: { readonly head: string | null; readonly objects: readonly string[] };
  readonly identity: readonly [number, number] | readonly [];
  readonly timing_ms: Readonly<Record<string, number>>;
  /** Present (true) only for a `--with-ignored` snapshot. */
  readonly with_ignored?: true;
  /** The Git tree id of the snapshot, for a layered snapshot. */
  readonly root_id?: string;
  readonly finished_unix_ms?: number;
  readonly branches: readonly ManifestBranch[];
}

/**
 * A branch's exit code from its status (docs/rules.md "States and records"): exited N → N,
 * failed/rejected → 125, cancelled → 130.
 */
export function branchCode(status: string | undefined): number | undefined {
  if (status === undefined) return undefined;
  const m = /^exited (\d+)$/.exec(status);
  if (m) return Number(m[1]);
  if (status.startsWith("failed") || status.startsWith("rejected")) return 125;
  if (status === "cancelled") return 130;
  return undefined;
}

/** The split's exit status: the first nonzero branch code in declaration order, else 0. */
export function splitCode(branches: readonly { status?: string }[]): number {
  for (const b of branches) {
    const code = branchCode(b.status) ?? 125;
    if (code !== 0) return code;
  }
  return 0;
}
