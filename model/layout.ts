/**
 * Names inside a project's split state, and the rules for the names marsh is
 * given (labels, split ids): pure, shared by the daemon, the split-filesystem
 * service and the frame contracts (`docs/engine.md`, "On disk"):
 * `<root>/.marsh/split/<id>/{base, <label>, .admin/<label>, store.git, out/<label>}`.
 *
 * @module
 */

/** The project's marsh state directory. */
export const MARSH_DIR = ".marsh";
/** Under `.marsh`: one directory per split. */
export const SPLIT_DIR = "split";
/** Under `.marsh`: released splits wait here to be deleted. */
export const TRASH_DIR = ".trash";
/** Under `.marsh`: flock'd by the one daemon that uses the project (splitfs/project_lock.ts). */
export const PROJECT_LOCK_FILE = "lock";
/** Under `.marsh`: the layered snapshot store, one directory per sealed layer. */
export const LAYERS_DIR = "layers";
/** Under a split: per-fork overlay `upper/` and `work/` dirs (`.overlay/<label>/`). */
export const OVERLAY_DIR = ".overlay";
/** Under a split: the ids of the layers its base stacks, bottom first, one per line. */
export const LAYERS_FILE = "layers";
/** Under a split: the frozen snapshot. */
export const BASE_DIR = "base";
/** Under a split: per-fork Git admin directories. */
export const ADMIN_DIR = ".admin";
/** Under a split: the object store for pre- and post-image blobs. */
export const STORE_DIR = "store.git";
/** Under a split: the results. */
export const OUT_DIR = "out";

/**
 * Labels that name a split's own entries (a fork is `<split>/<label>`);
 * docs/guide.md lists exactly these. Names starting with `.` (`.admin`,
 * `.overlay`) are not labels at all.
 */
export const RESERVED_LABELS: ReadonlySet<string> = new Set([
  BASE_DIR,
  LAYERS_FILE,
  OUT_DIR,
  STORE_DIR,
]);
/** The longest label. */
export const MAX_LABEL = 63;
const LABEL = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$/;
const LABEL_RULE =
  `use 1-${MAX_LABEL} letters, digits, "_", "." or "-", starting with a letter or digit`;
/** How much of an overlong label a message quotes. */
const QUOTED = 32;

/**
 * The reason a label is unusable, or `null` when it is fine. The one label
 * rule: the daemon's frames carry any string as a label, so every caller
 * gets this message, however long the label.
 */
export function labelProblem(label: string): string | null {
  if (label.length > MAX_LABEL) {
    return `invalid label ${
      JSON.stringify(label.slice(0, QUOTED))
    }... is too long (${label.length} characters): ${LABEL_RULE}`;
  }
  if (!LABEL.test(label)) return `invalid label ${JSON.stringify(label)}: ${LABEL_RULE}`;
  if (RESERVED_LABELS.has(label)) return `invalid label "${label}": the name is reserved`;
  return null;
}

const ID = /^[a-z0-9][a-z0-9-]{0,63}$/;

/** The reason a split id is unusable as a directory name, or `null`. */
export function splitIdProblem(id: string): string | null {
  return ID.test(id) ? null : `invalid split id "${id}"`;
}
