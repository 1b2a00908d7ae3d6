/**
 * The names an overlay fork is described by outside `overlay.ts`: its mount
 * mode and the record the journal keeps of its mount. Forks of every kind
 * (`fork.ts`) carry the record, and `overlay.ts` implements the forks that
 * make one, so these types sit in a leaf both import.
 *
 * @module
 */

/** Where and with which privilege overlays are mounted. */
export type OverlayMode = "overlay" | "userns-overlay";

/**
 * What the journal keeps to find and verify a mount after a daemon restart:
 * plain numbers and strings, so it serializes as JSON.
 */
export interface MountRecord {
  readonly mode: OverlayMode;
  /** The id in `/proc/self/mountinfo` (unique among live mounts). */
  readonly mountId: number;
  /** The overlay's device (`st_dev` of its root), which a reused id would not share. */
  readonly major: number;
  readonly minor: number;
  /** The mount point as the kernel names it. */
  readonly mountPoint: string;
  /** The fork's upper dir path; `null` for the read-only base. */
  readonly upper: string | null;
}
