/**
 * Control bytes escaped for a terminal, as the rendering and `marsh logs`
 * show a branch's output there: a branch must not drive the user's
 * terminal. Pure code: the CLI, the in-job client and the split-filesystem
 * service share it.
 *
 * @module
 */

const enc = new TextEncoder();

/** Receives output; the bytes are valid only during the call. */
type Emit = (bytes: Uint8Array) => void;

const C2 = new Uint8Array([0xc2]);

function escape(...bytes: number[]): Uint8Array {
  return enc.encode(bytes.map((x) => `\\x${x.toString(16).padStart(2, "0")}`).join(""));
}

/**
 * Escapes control bytes for a terminal: C0 controls other than `\n` and
 * `\t`, DEL, and the C1 controls (U+0080 to U+009F, `C2 80`..`C2 9F` in
 * UTF-8), each byte as `\xNN`, so a branch's output cannot drive the user's
 * terminal.
 */
export class TerminalEscaper {
  readonly #emit: Emit;
  /** A `C2` that ended the previous piece: a C1 control if the next byte says so. */
  #lead = false;

  constructor(emit: Emit) {
    this.#emit = emit;
  }

  push(b: Uint8Array): void {
    let from = 0;
    const pass = (to: number) => {
      if (to > from) this.#emit(b.subarray(from, to));
    };
    let i = 0;
    if (this.#lead && b.length > 0) {
      this.#lead = false;
      const x = b[0]!;
      if (x >= 0x80 && x <= 0x9f) {
        this.#emit(escape(0xc2, x));
        i = from = 1;
      } else this.#emit(C2);
    }
    for (; i < b.length; i++) {
      const x = b[i]!;
      if ((x < 0x20 && x !== 0x09 && x !== 0x0a) || x === 0x7f) {
        pass(i);
        this.#emit(escape(x));
        from = i + 1;
      } else if (x === 0xc2) {
        if (i + 1 === b.length) {
          pass(i);
          this.#lead = true;
          from = b.length;
        } else {
          const y = b[i + 1]!;
          if (y >= 0x80 && y <= 0x9f) {
            pass(i);
            this.#emit(escape(0xc2, y));
            from = i + 2;
            i++;
          }
        }
      }
    }
    pass(b.length);
  }

  /** Emits a `C2` held back at the end of the last piece. */
  end(): void {
    if (this.#lead) this.#emit(C2);
    this.#lead = false;
  }
}
