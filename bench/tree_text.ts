/**
 * The vocabulary and bodies of the generated trees: directory and file
 * words, extensions, binary magic numbers, and the pre-encoded line pools
 * that text bodies are assembled from. Shared by the generator
 * (bench/tree_gen.ts) and the small change (bench/small_change.ts).
 *
 * @module
 */

import { Prng } from "./_prng.ts";

/** Directory names the generator draws from. */
export const DIR_WORDS = [
  "src",
  "lib",
  "core",
  "util",
  "internal",
  "pkg",
  "api",
  "server",
  "client",
  "common",
  "model",
  "view",
  "store",
  "net",
  "io",
  "parse",
  "render",
  "config",
  "plugin",
  "test",
  "docs",
  "tools",
  "scripts",
  "cmd",
  "app",
  "components",
  "hooks",
  "services",
  "handlers",
  "routes",
  "schema",
  "types",
  "db",
  "auth",
  "queue",
  "worker",
  "events",
  "metrics",
  "assets",
  "fixtures",
  "vendor",
  "examples",
  "proto",
  "codec",
  "runtime",
];

/** File-name stems (and identifiers) the generator draws from. */
export const FILE_WORDS = [
  "index",
  "main",
  "utils",
  "helpers",
  "parser",
  "lexer",
  "reader",
  "writer",
  "client",
  "server",
  "handler",
  "router",
  "config",
  "types",
  "errors",
  "state",
  "store",
  "cache",
  "queue",
  "worker",
  "buffer",
  "stream",
  "codec",
  "format",
  "render",
  "layout",
  "table",
  "list",
  "tree",
  "graph",
  "node",
  "edge",
  "path",
  "file",
  "session",
  "token",
  "auth",
  "user",
  "account",
  "order",
  "item",
  "event",
  "signal",
  "timer",
  "clock",
  "retry",
  "limit",
  "pool",
  "batch",
  "sync",
  "fetch",
  "request",
  "response",
  "schema",
  "query",
];

// No .ts/.js/.mjs/...: `deno check .` walks bench/.trees/ (it does not honour
// .gitignore the way fmt and lint do) and would type-check the generated junk.
/** Text file extensions, weighted by repetition. */
export const TEXT_EXTS = [
  "go",
  "go",
  "go",
  "rs",
  "rs",
  "rs",
  "py",
  "py",
  "py",
  "c",
  "h",
  "java",
  "rb",
  "md",
  "md",
  "json",
  "yaml",
  "toml",
  "txt",
  "css",
  "html",
];

/** Binary file kinds: extension and the magic bytes a file of it starts with. */
export const BINARY_KINDS: ReadonlyArray<readonly [string, readonly number[]]> = [
  ["png", [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 0x0d]],
  ["jpg", [0xff, 0xd8, 0xff, 0xe0, 0, 0x10, 0x4a, 0x46, 0x49, 0x46, 0]],
  ["woff2", [0x77, 0x4f, 0x46, 0x32, 0, 1, 0, 0]],
  ["zip", [0x50, 0x4b, 0x03, 0x04, 0x14, 0, 0, 0]],
  ["bin", [0x7f, 0x45, 0x4c, 0x46, 2, 1, 1, 0]],
];

const PROSE_WORDS = (
  "the a of to and in is it for on with as by this that be are from at or an " +
  "value state cache request handler error buffer stream token user path " +
  "returns when if each every first last next before after without only " +
  "config option default limit timeout retry queue worker event signal"
).split(" ");

/** The one UTF-8 encoder of the generated bodies. */
export const encoder = new TextEncoder();

function identifier(rng: Prng): string {
  const word = rng.pick(FILE_WORDS);
  return rng.chance(0.5) ? word : word + rng.pick(FILE_WORDS).replace(/^./, (c) => c.toUpperCase());
}

function prose(rng: Prng, words: number): string {
  const out: string[] = [];
  for (let i = 0; i < words; i++) out.push(rng.pick(PROSE_WORDS));
  return out.join(" ");
}

function codeLine(rng: Prng): string {
  const indent = "  ".repeat(rng.int(0, 3));
  switch (rng.int(0, 9)) {
    case 0:
      return `${indent}const ${identifier(rng)} = ${identifier(rng)}(${identifier(rng)}, ${
        rng.int(0, 4096)
      });`;
    case 1:
      return `${indent}if (${identifier(rng)} > ${rng.int(0, 999)}) return ${identifier(rng)};`;
    case 2:
      return `${indent}// ${prose(rng, rng.int(3, 12))}`;
    case 3:
      return `export function ${identifier(rng)}(${identifier(rng)}: number, ${
        identifier(rng)
      }: string): boolean {`;
    case 4:
      return `${indent}}`;
    case 5:
      return `${indent}for (let i = 0; i < ${identifier(rng)}.length; i++) {`;
    case 6:
      return `${indent}${identifier(rng)}.push(${identifier(rng)}[i] ?? ${rng.int(0, 99)});`;
    case 7:
      return `import { ${identifier(rng)} } from "./${rng.pick(FILE_WORDS)}";`;
    case 8:
      return "";
    default:
      return `${indent}${identifier(rng)}.${identifier(rng)} = "${prose(rng, rng.int(1, 5))}";`;
  }
}

/** Pre-encoded lines that file bodies are assembled from, so generation is mostly memcpy. */
export class LinePools {
  readonly code: Uint8Array[] = [];
  readonly prose: Uint8Array[] = [];

  constructor(rng: Prng) {
    for (let i = 0; i < 4096; i++) this.code.push(encoder.encode(codeLine(rng) + "\n"));
    for (let i = 0; i < 1024; i++) {
      this.prose.push(encoder.encode(prose(rng, rng.int(4, 14)) + ".\n"));
    }
  }
}

/** A text body of exactly `size` bytes: a unique header line, then pooled lines. */
export function textBody(
  rng: Prng,
  pool: readonly Uint8Array[],
  header: string,
  size: number,
): Uint8Array {
  const out = new Uint8Array(size);
  const head = encoder.encode(header + "\n");
  let at = Math.min(head.byteLength, size);
  out.set(head.subarray(0, at));
  let n = 0;
  while (at < size) {
    // Every eighth line is unique to this file, so no two blobs share long runs.
    const line = ++n % 8 === 0
      ? encoder.encode(`  const k${n} = 0x${rng.next().toString(16)};\n`)
      : pool[rng.next() % pool.length] as Uint8Array;
    const take = Math.min(line.byteLength, size - at);
    out.set(line.subarray(0, take), at);
    at += take;
  }
  if (size > 0) out[size - 1] = 0x0a;
  return out;
}

/** A binary body of `size` random bytes, starting with `magic`. */
export function binaryBody(rng: Prng, magic: readonly number[], size: number): Uint8Array {
  const out = new Uint8Array(size);
  rng.fill(out);
  out.set(magic.slice(0, size));
  return out;
}
