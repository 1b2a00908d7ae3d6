/**
 * The error of a frame that breaks its protocol: a leaf, so every frame
 * module can throw it without importing another.
 *
 * @module
 */

/** A value that is not a valid frame of this protocol. */
export class ProtocolError extends Error {
  override name = "ProtocolError";
}
