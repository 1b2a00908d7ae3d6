/**
 * Which fork strategy a split gets where: overlay forks where a real tiny
 * overlay mount succeeds on that file system, else copies (docs/engine.md,
 * "Forks"). Probed once per file system per process.
 *
 * Needs `--allow-ffi=<libc path>`.
 *
 * @module
 */

import { Dir } from "../fd/dir.ts";
import { type OverlayMode, probeOverlay } from "./overlay.ts";

/** Overlay availability per file system (`st_dev`), probed once per process. */
const forkChoices = new Map<bigint, { mode: OverlayMode | null; reason: string }>();

/** Whether splits under `marsh` can use overlay forks, probed with a real tiny mount there. */
export function chooseForks(marsh: Dir): { mode: OverlayMode | null; reason: string } {
  const dev = marsh.stat().dev;
  let choice = forkChoices.get(dev);
  if (choice === undefined) {
    choice = probeOverlay(marsh);
    forkChoices.set(dev, choice);
  }
  return choice;
}

/** The fork strategy new splits would use under `path` (an existing directory), and why. */
export function probeForks(path: string): { strategy: string; reason: string } {
  using dir = Dir.openAbsolute(path);
  const choice = chooseForks(dir);
  return { strategy: choice.mode ?? "copy", reason: choice.reason };
}
