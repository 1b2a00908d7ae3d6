/**
 * Property test: random trees and random edits, patched with our writer and
 * applied by real Git (`git apply`, `-R`, `--3way`).
 */

import fc from "fast-check";
import type { GitMode } from "./change.ts";
import {
  assertApplies,
  assertAppliesThreeWay,
  changesBetween,
  type Entry,
  patchFor,
  tempDir,
  type Tree,
  utf8,
} from "./_testing.ts";

const GIT_PERMISSIONS = { read: true, write: true, run: ["git"], env: ["PATH"] };

// Pieces of names: plain, unicode, spaces, and every character Git quotes.
// None combine into ".", "..", ".git" or Git's NTFS aliases, which git apply refuses.
const NAME_PIECES = [
  "a",
  "b",
  "c",
  "x.txt",
  "d d",
  " ",
  "é",
  "日本",
  "\t",
  "\n",
  "\r",
  "\x01",
  "\x1b",
  "\x7f",
  '"',
  "\\",
  "-",
  "#",
];

const nameArb = fc.array(fc.constantFrom(...NAME_PIECES), { minLength: 1, maxLength: 3 })
  .map((pieces) => pieces.join(""));
const pathArb = fc.array(nameArb, { minLength: 1, maxLength: 3 }).map((names) => names.join("/"));

const LINES: Uint8Array[] = [
  "",
  "a",
  "b",
  "c",
  "same",
  "-minus",
  "+plus",
  " space",
  "\\ backslash",
  "@@ -1 +1 @@",
  "diff --git a/a b/a",
  "--- a/a",
  "+++ b/b",
  "\r",
  "x\ry",
  "trailing ",
  "tab\t",
  "ünïcödé",
].map(utf8).concat([
  new Uint8Array([0xff, 0xfe]),
  new Uint8Array([0xc3, 0x28]),
  new Uint8Array([0x80]),
]);

const lineArb = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom(...LINES) },
  { weight: 2, arbitrary: fc.string({ maxLength: 12 }).map(utf8) },
  { weight: 1, arbitrary: fc.nat({ max: 5000 }).map((n) => utf8("L".repeat(n))) },
);

function concat(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.length;
  }
  return out;
}

const LF = new Uint8Array([0x0a]);
const CRLF = new Uint8Array([0x0d, 0x0a]);

/** Text from lines, with LF, CRLF or mixed endings, and maybe no final newline. */
const textArb = fc.record({
  lines: fc.array(lineArb, { maxLength: 30 }),
  endings: fc.constantFrom("lf", "crlf", "mixed"),
  finalNewline: fc.boolean(),
}).map(({ lines, endings, finalNewline }) =>
  concat(lines.flatMap((line, i) => {
    const last = i === lines.length - 1;
    if (last && !finalNewline) return [line];
    const crlf = endings === "crlf" || (endings === "mixed" && i % 2 === 1);
    return [line, crlf ? CRLF : LF];
  }))
);

/** Binary: bytes with a NUL somewhere in the first 8000. */
const binaryArb = fc.record({
  bytes: fc.uint8Array({ minLength: 1, maxLength: 600 }),
  at: fc.nat(),
})
  .map(({ bytes, at }) => {
    const out = bytes.slice();
    out[at % Math.min(out.length, 8000)] = 0;
    return out;
  });

const contentArb = fc.oneof(
  { weight: 6, arbitrary: textArb },
  { weight: 2, arbitrary: binaryArb },
  { weight: 1, arbitrary: fc.constant(new Uint8Array()) },
);

const targetArb = fc.constantFrom(
  "target",
  "../up",
  "a b",
  "dir/x",
  "é",
  "tab\there",
  "nl\nx",
  "x".repeat(200),
)
  .map(utf8);

const entryArb: fc.Arbitrary<Entry> = fc.oneof(
  { weight: 5, arbitrary: contentArb.map((bytes) => ({ mode: 0o100644 as GitMode, bytes })) },
  { weight: 2, arbitrary: contentArb.map((bytes) => ({ mode: 0o100755 as GitMode, bytes })) },
  { weight: 1, arbitrary: targetArb.map((bytes) => ({ mode: 0o120000 as GitMode, bytes })) },
);

/** Adds `path` unless a file sits where it needs a directory or the other way round. */
function addConsistent(tree: Tree, path: string, entry: Entry): void {
  const parts = path.split("/");
  for (let i = 1; i < parts.length; i++) if (tree.has(parts.slice(0, i).join("/"))) return;
  for (const other of tree.keys()) if (other.startsWith(path + "/")) return;
  tree.set(path, entry);
}

const treeArb = fc.array(fc.tuple(pathArb, entryArb), { maxLength: 12 }).map((pairs) => {
  const tree: Tree = new Map();
  for (const [path, entry] of pairs) addConsistent(tree, path, entry);
  return tree;
});

/** Line-level edits of text (so diffs have context), or a fresh content. */
const contentEditArb = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.array(
      fc.record({
        at: fc.nat(),
        remove: fc.nat({ max: 3 }),
        insert: fc.array(lineArb, { maxLength: 3 }),
      }),
      { minLength: 1, maxLength: 4 },
    ).map((ops) => (old: Uint8Array): Uint8Array => {
      const lines: Uint8Array[] = [];
      let start = 0;
      for (let i = 0; i < old.length; i++) {
        if (old[i] === 0x0a) {
          lines.push(old.subarray(start, i + 1));
          start = i + 1;
        }
      }
      if (start < old.length) lines.push(old.subarray(start));
      for (const op of ops) {
        const at = op.at % (lines.length + 1);
        lines.splice(at, op.remove, ...op.insert.map((l) => concat([l, LF])));
      }
      return concat(lines);
    }),
  },
  { weight: 1, arbitrary: contentArb.map((bytes) => (_old: Uint8Array) => bytes) },
  { weight: 1, arbitrary: fc.constant((old: Uint8Array) => concat([old, utf8("tail")])) },
);

const editArb = fc.oneof(
  fc.record({ kind: fc.constant("modify" as const), pick: fc.nat(), edit: contentEditArb }),
  fc.record({ kind: fc.constant("add" as const), path: pathArb, entry: entryArb }),
  fc.record({ kind: fc.constant("delete" as const), pick: fc.nat() }),
  fc.record({
    kind: fc.constant("type" as const),
    pick: fc.nat(),
    target: targetArb,
    content: contentArb,
  }),
  fc.record({
    kind: fc.constant("toDir" as const),
    pick: fc.nat(),
    name: nameArb,
    entry: entryArb,
  }),
  fc.record({ kind: fc.constant("toFile" as const), pick: fc.nat(), entry: entryArb }),
  fc.record({ kind: fc.constant("mode" as const), pick: fc.nat() }),
);

type Edit = typeof editArb extends fc.Arbitrary<infer T> ? T : never;

function applyEdits(oldTree: Tree, edits: Edit[]): Tree {
  const tree: Tree = new Map(oldTree);
  for (const edit of edits) {
    const paths = [...tree.keys()];
    const path = paths.length === 0 || !("pick" in edit)
      ? undefined
      : paths[edit.pick % paths.length];
    const entry = path === undefined ? undefined : tree.get(path);
    switch (edit.kind) {
      case "add":
        if (!tree.has(edit.path)) addConsistent(tree, edit.path, edit.entry);
        break;
      case "modify":
        if (path !== undefined && entry !== undefined && entry.mode !== 0o120000) {
          tree.set(path, { mode: entry.mode, bytes: edit.edit(entry.bytes) });
        } else if (path !== undefined) {
          tree.set(path, { mode: 0o120000, bytes: utf8("retargeted") });
        }
        break;
      case "delete":
        if (path !== undefined) tree.delete(path);
        break;
      case "type":
        if (path !== undefined && entry !== undefined) {
          tree.set(
            path,
            entry.mode === 0o120000
              ? { mode: 0o100644, bytes: edit.content }
              : { mode: 0o120000, bytes: edit.target },
          );
        }
        break;
      case "toDir":
        if (path !== undefined) {
          tree.delete(path);
          tree.set(`${path}/${edit.name}`, edit.entry);
        }
        break;
      case "toFile":
        if (path !== undefined && path.includes("/")) {
          const dir = path.slice(0, path.indexOf("/"));
          for (const other of [...tree.keys()]) if (other.startsWith(dir + "/")) tree.delete(other);
          tree.set(dir, edit.entry);
        }
        break;
      case "mode":
        if (entry !== undefined && path !== undefined && entry.mode !== 0o120000) {
          tree.set(path, {
            mode: entry.mode === 0o100644 ? 0o100755 : 0o100644,
            bytes: entry.bytes,
          });
        }
        break;
    }
  }
  return tree;
}

async function checkRoundTrip(oldTree: Tree, newTree: Tree): Promise<void> {
  await using dir = await tempDir();
  const changes = changesBetween(oldTree, newTree);
  if (changes.length === 0) return;
  const { patch, results } = patchFor(changes);
  await assertApplies(dir.path, oldTree, newTree, patch);
  await assertAppliesThreeWay(dir.path, oldTree, newTree, patch, results, changes);
}

Deno.test("random trees and edits round-trip through git apply, -R and --3way", {
  permissions: GIT_PERMISSIONS,
}, async () => {
  await fc.assert(
    fc.asyncProperty(
      treeArb,
      fc.array(editArb, { minLength: 1, maxLength: 8 }),
      async (oldTree, edits) => {
        await checkRoundTrip(oldTree, applyEdits(oldTree, edits));
      },
    ),
    { numRuns: 60 },
  );
});

/** Deterministic noise, so multi-MiB contents come from a small seed. */
function noise(seed: number, length: number): Uint8Array {
  const out = new Uint8Array(length);
  let x = (seed | 0) || 1;
  for (let i = 0; i < length; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out[i] = x & 0xff;
  }
  return out;
}

/** Text of `lines` short lines drawn from a small vocabulary, so edits leave context. */
function bigText(seed: number, lines: number): Uint8Array {
  const words = noise(seed, lines);
  const parts: string[] = [];
  for (let i = 0; i < lines; i++) {
    parts.push(`${words[i]! % 50} ${i % 7}${i % 5 === 0 ? "\r\n" : "\n"}`);
  }
  // Odd seeds drop the final newline.
  return utf8(parts.join("").slice(0, seed % 2 ? -1 : undefined));
}

const bigEntryArb = fc.record({
  seed: fc.integer({ min: 1 }),
  size: fc.integer({ min: 1 << 20, max: 3 << 20 }),
  kind: fc.constantFrom("text", "binary", "noise"),
}).map(({ seed, size, kind }): Entry => {
  if (kind === "text") return { mode: 0o100644, bytes: bigText(seed, size >> 4) };
  const bytes = noise(seed, size);
  if (kind === "binary") bytes[seed % 8000] = 0;
  return { mode: 0o100644, bytes };
});

Deno.test("multi-MiB files round-trip through git apply, -R and --3way", {
  permissions: GIT_PERMISSIONS,
}, async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.array(bigEntryArb, { minLength: 1, maxLength: 3 }),
      fc.array(
        fc.record({ pick: fc.nat(), at: fc.nat(), bytes: fc.uint8Array({ maxLength: 40 }) }),
        {
          minLength: 1,
          maxLength: 6,
        },
      ),
      async (entries, splices) => {
        const oldTree: Tree = new Map(entries.map((entry, i) => [`big/${i}`, entry]));
        const newTree: Tree = new Map(oldTree);
        for (const splice of splices) {
          const path = `big/${splice.pick % entries.length}`;
          const old = newTree.get(path)!.bytes;
          const at = splice.at % (old.length + 1);
          newTree.set(path, {
            mode: 0o100644,
            bytes: concat([
              old.subarray(0, at),
              splice.bytes,
              old.subarray(at + splice.bytes.length),
            ]),
          });
        }
        await checkRoundTrip(oldTree, newTree);
      },
    ),
    { numRuns: 4 },
  );
});
