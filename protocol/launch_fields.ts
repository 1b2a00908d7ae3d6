/**
 * The fields a shell branch's `launch` (`protocol/worker.ts`) and an argv
 * branch's `kit-launch` (`protocol/kit_launch.ts`) share. The worker's frames
 * carry a Kit launch, so this is the leaf both parsers check against.
 *
 * @module
 */

/** The largest output limit a launch may ask for. */
export const MAX_OUTPUT_LIMIT = 2 ** 40;
/** Longest path in a frame, in UTF-8 bytes (`PATH_MAX` less the NUL). */
export const MAX_PATH_BYTES = 4095;
/** Attempt ids name a cgroup directory: a safe path component of at most 128 characters. */
export const ATTEMPT_ID = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;
