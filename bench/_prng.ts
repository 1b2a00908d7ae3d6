/**
 * A small seeded PRNG (sfc32, seeded through splitmix32) for the benchmark
 * trees. Private to `bench/`: the only contract is that one seed always gives
 * the same sequence on every machine and Deno version, which `Math.random`
 * cannot promise.
 *
 * @module
 */

function splitmix32(state: number): () => number {
  let s = state >>> 0;
  return () => {
    s = (s + 0x9e3779b9) >>> 0;
    let z = s;
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
    return (z ^ (z >>> 16)) >>> 0;
  };
}

/** A deterministic stream of pseudo-random numbers. Not for cryptography. */
export class Prng {
  #a: number;
  #b: number;
  #c: number;
  #d: number;

  /** Seeds the generator; any integer works, equal seeds give equal streams. */
  constructor(seed: number) {
    const mix = splitmix32(seed);
    this.#a = mix();
    this.#b = mix();
    this.#c = mix();
    this.#d = mix();
    for (let i = 0; i < 12; i++) this.next();
  }

  /** The next unsigned 32-bit integer. */
  next(): number {
    const t = (((this.#a + this.#b) >>> 0) + this.#d) >>> 0;
    this.#d = (this.#d + 1) >>> 0;
    this.#a = this.#b ^ (this.#b >>> 9);
    this.#b = (this.#c + (this.#c << 3)) >>> 0;
    this.#c = ((this.#c << 21) | (this.#c >>> 11)) >>> 0;
    this.#c = (this.#c + t) >>> 0;
    return t;
  }

  /** A float in [0, 1). */
  float(): number {
    return this.next() / 4294967296;
  }

  /** An integer in [lo, hi], both inclusive. */
  int(lo: number, hi: number): number {
    return lo + Math.floor(this.float() * (hi - lo + 1));
  }

  /** True with probability `p`. */
  chance(p: number): boolean {
    return this.float() < p;
  }

  /** A standard normal variate (Box–Muller). */
  normal(): number {
    const u = 1 - this.float();
    const v = this.float();
    return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v);
  }

  /** A log-normal variate with the given median and shape `sigma`. */
  logNormal(median: number, sigma: number): number {
    return median * Math.exp(sigma * this.normal());
  }

  /** One element of a non-empty array. */
  pick<T>(items: readonly T[]): T {
    const item = items[Math.floor(this.float() * items.length)];
    if (item === undefined) throw new RangeError("Cannot pick from an empty array");
    return item;
  }

  /** Shuffles `items` in place (Fisher–Yates) and returns it. */
  shuffle<T>(items: T[]): T[] {
    for (let i = items.length - 1; i > 0; i--) {
      const j = Math.floor(this.float() * (i + 1));
      const tmp = items[i] as T;
      items[i] = items[j] as T;
      items[j] = tmp;
    }
    return items;
  }

  /** Fills `out` with pseudo-random bytes: successive {@linkcode next} words in platform byte order. */
  fill(out: Uint8Array): void {
    const words = out.byteOffset % 4 === 0 ? Math.floor(out.byteLength / 4) : 0;
    const view = new Uint32Array(out.buffer, out.byteOffset, words);
    let a = this.#a, b = this.#b, c = this.#c, d = this.#d;
    for (let i = 0; i < words; i++) {
      const t = (((a + b) >>> 0) + d) >>> 0;
      d = (d + 1) >>> 0;
      a = b ^ (b >>> 9);
      b = (c + (c << 3)) >>> 0;
      c = ((c << 21) | (c >>> 11)) >>> 0;
      c = (c + t) >>> 0;
      view[i] = t;
    }
    this.#a = a;
    this.#b = b;
    this.#c = c;
    this.#d = d;
    for (let i = words * 4; i < out.byteLength; i++) out[i] = this.next() & 0xff;
  }
}
