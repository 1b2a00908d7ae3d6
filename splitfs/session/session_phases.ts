/**
 * The names of an operation's steps in the service, as `phase_times.ts`
 * records them (docs/checkpoints.md "Measured"): where the time of
 * `op-prepare`, `op-capture`, `op-seal` and `view-mount` goes.
 *
 * Pure: needs no permission.
 *
 * @module
 */

/** Step names, each prefixed by the frame it belongs to. */
export const PHASE = {
  stack: "session: stack read",
  check: "op-prepare: stack check",
  overlay: "op-prepare: dir, pin, mount",
  unmount: "op-capture: unmount",
  capture: "op-capture: normalise and hash",
  keep: "op-capture: keep",
  sealCheck: "op-seal: read-back",
  sealUnmount: "op-seal: unmount",
  kept: "op-seal: kept capture",
  adopt: "op-seal: seal and rename",
  pin: "op-seal: pin",
  viewPin: "view-mount: pin",
  viewMount: "view-mount: mount",
  viewReplace: "view-mount: replace",
} as const;
