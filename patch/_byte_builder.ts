/**
 * A growable byte buffer, so patches are assembled without building large
 * intermediate strings.
 *
 * @module
 */

const encoder = new TextEncoder();

/** Appends bytes and text to one buffer that doubles as it fills. */
export class ByteBuilder {
  #buf: Uint8Array;
  #len = 0;

  /** Starts with room for `capacity` bytes (it grows past that as needed). */
  constructor(capacity = 256) {
    this.#buf = new Uint8Array(Math.max(16, capacity));
  }

  /** How many bytes have been appended. */
  get length(): number {
    return this.#len;
  }

  #reserve(extra: number): void {
    const need = this.#len + extra;
    if (need <= this.#buf.length) return;
    let size = this.#buf.length * 2;
    while (size < need) size *= 2;
    const next = new Uint8Array(size);
    next.set(this.#buf.subarray(0, this.#len));
    this.#buf = next;
  }

  /** Appends one byte (0–255). */
  byte(value: number): this {
    this.#reserve(1);
    this.#buf[this.#len++] = value;
    return this;
  }

  /** Appends raw bytes. */
  bytes(data: Uint8Array): this {
    this.#reserve(data.length);
    this.#buf.set(data, this.#len);
    this.#len += data.length;
    return this;
  }

  /** Appends `text` encoded as UTF-8. */
  text(text: string): this {
    // UTF-8 needs at most 3 bytes per UTF-16 code unit.
    this.#reserve(text.length * 3);
    const { written } = encoder.encodeInto(text, this.#buf.subarray(this.#len));
    this.#len += written;
    return this;
  }

  /** Returns the appended bytes (a view; the builder must not be used afterwards). */
  finish(): Uint8Array {
    return this.#buf.subarray(0, this.#len);
  }
}
