/**
 * The daemon frames of the Kit registry and the Kit jobs (part of
 * `protocol/daemon.ts`): `marsh kits`, `marsh jobs` and `marsh workers
 * reset`.
 *
 * @module
 */

/**
 * `marsh kits add`: register a Kit command. The CLI has checked the image
 * in the engine (the daemon has no Docker permission, docs/architecture.md "Permissions") and
 * sends the id it resolved; `home` null asks for the default home under
 * the control dir.
 */
export interface KitsAddRequest {
  readonly v: 1;
  readonly t: "kits.add";
  readonly name: string;
  readonly image: string;
  /** `sha256:<64 hex>`, resolved by the engine when the CLI checked the image. */
  readonly imageId: string;
  readonly entrypoint: readonly string[] | null;
  readonly network: string;
  readonly env: readonly string[];
  readonly wallS: number;
  /** An absolute existing directory (resolved by the CLI's check), or null for the default. */
  readonly home: string | null;
  /** Replace an existing registration of the same name. */
  readonly replace: boolean;
}

/** `marsh kits ls`. */
export interface KitsListRequest {
  readonly v: 1;
  readonly t: "kits.list";
}

/** `marsh kits rm NAME`. */
export interface KitsRmRequest {
  readonly v: 1;
  readonly t: "kits.rm";
  readonly name: string;
}

/**
 * `marsh jobs [--tree] [--all] [--json]` and `marsh jobs show JOB
 * [--json]`: the daemon renders (docs/rules.md "Lineage") and answers with
 * `chunk` frames of the output, then `jobs`.
 */
export interface JobsListRequest {
  readonly v: 1;
  readonly t: "jobs.list";
  /** `list` (flat), `tree` (drawn), or `show` (one job, `job`). */
  readonly view: "list" | "tree" | "show";
  readonly all: boolean;
  readonly json: boolean;
  /** For `show`: the job's id or a prefix of at least 8 characters. */
  readonly job?: string;
}

/** `marsh workers reset KIT` (host only). */
export interface WorkersResetRequest {
  readonly v: 1;
  readonly t: "workers.reset";
  readonly kit: string;
}

/** A registered Kit as `marsh kits ls --json` prints it. */
export interface KitInfo {
  readonly name: string;
  readonly image: string;
  readonly image_id: string;
  readonly entrypoint: readonly string[] | null;
  readonly network: string;
  readonly env: readonly string[];
  readonly wall_s: number;
  readonly home: string;
  readonly created_unix_ms: number;
}

/** `marsh kits ls`: every registered Kit, by name. */
export interface KitsReply {
  readonly v: 1;
  readonly t: "kits";
  readonly kits: readonly KitInfo[];
}

/** `marsh kits add`: the registration made, and whether it replaced one. */
export interface KitAddedReply {
  readonly v: 1;
  readonly t: "kits.added";
  readonly kit: KitInfo;
  readonly replaced: boolean;
}

/** `marsh kits rm`: the registration removed (its home is kept). */
export interface KitRemovedReply {
  readonly v: 1;
  readonly t: "kits.removed";
  readonly kit: KitInfo;
}

/** The end of `marsh jobs`' output, which came before it in `chunk` frames (base64). */
export interface JobsReply {
  readonly v: 1;
  readonly t: "jobs";
}

/** One container `marsh workers reset` removed (or left). */
export interface ResetContainerInfo {
  readonly container: string;
  readonly job: string | null;
  readonly split: string | null;
  readonly label: string | null;
  readonly message?: string;
}

/** `marsh workers reset KIT`: what was removed and which held slots were released. */
export interface WorkersResetReply {
  readonly v: 1;
  readonly t: "workers.reset";
  readonly kit: string;
  readonly removed: readonly ResetContainerInfo[];
  /** Containers of live jobs, left alone. */
  readonly live: readonly ResetContainerInfo[];
  /** Containers not shown gone: their jobs keep their slots. */
  readonly failed: readonly ResetContainerInfo[];
  /** Jobs whose held slots were released. */
  readonly released: readonly {
    readonly job: string;
    readonly split: string;
    readonly label: string;
  }[];
}
