/**
 * Property test: random trees and random edits, patched with our writer and
 * applied by real Git (`git apply`, `-R`, `--3way`).
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import fc from "fast-check";
import { assertProperty } from "../tests/_property.ts";
import type { GitMode } from "./change.ts";
import {
  assertApplies,
  assertAppliesThreeWay,
  changesBetween,
  type Entry,
  git,
  gitOk,
  materialize,
  patchFor,
  readTree,
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

/** Symlink hops before the kernel gives up with ELOOP (Linux's MAXSYMLINKS). */
const MAX_HOPS = 40;

/**
 * Whether resolving `path` in `tree`, as the kernel would in a checkout of
 * it, runs into a symlink loop (ELOOP). Targets leaving the tree, absolute
 * ones, and paths that end at a file or nothing do not loop.
 */
function loops(tree: Tree, path: string): boolean {
  const isDir = (p: string) => [...tree.keys()].some((k) => k.startsWith(`${p}/`));
  let todo = path.split("/");
  let cur: string[] = [];
  for (let hops = 0; todo.length > 0;) {
    const [name, ...rest] = todo;
    todo = rest;
    if (name === "" || name === ".") continue;
    if (name === "..") {
      if (cur.length === 0) return false;
      cur = cur.slice(0, -1);
      continue;
    }
    const next = [...cur, name!].join("/");
    const entry = tree.get(next);
    if (entry?.mode === 0o120000) {
      if (++hops > MAX_HOPS) return true;
      const target = new TextDecoder().decode(entry.bytes);
      if (target.startsWith("/")) return false;
      todo = [...target.split("/"), ...todo];
      continue;
    }
    if (entry !== undefined ? todo.length > 0 : !isDir(next)) return false;
    cur = [...cur, name!];
  }
  return false;
}

/**
 * Whether a path in `to` lies below a symlink of `from` that loops there.
 * `git apply` looks such a path up in the old tree before it removes the
 * symlink, gets ELOOP and refuses the patch ("Too many levels of symbolic
 * links"), and real `git diff` writes the same patch: a limit of `git
 * apply` (docs/engine.md), shown by the fixed example below.
 */
function underLoopingSymlink(from: Tree, to: Tree): boolean {
  for (const path of to.keys()) {
    const parts = path.split("/");
    for (let i = 1; i < parts.length; i++) {
      const prefix = parts.slice(0, i).join("/");
      if (from.get(prefix)?.mode === 0o120000 && loops(from, prefix)) return true;
    }
  }
  return false;
}

async function checkRoundTrip(oldTree: Tree, newTree: Tree): Promise<void> {
  await using dir = await tempDir();
  const changes = changesBetween(oldTree, newTree);
  if (changes.length === 0) return;
  const { patch, results } = patchFor(changes);
  await assertApplies(dir.path, oldTree, newTree, patch);
  await assertAppliesThreeWay(dir.path, oldTree, newTree, patch, results, changes);
}

/**
 * An old tree and the tree its edits make. Left out: a symlink that loops
 * (`é -> é`) replaced by a directory, either way round (`git apply` and
 * `git apply -R` both refuse it; see `underLoopingSymlink`).
 */
const treesArb = fc.tuple(treeArb, fc.array(editArb, { minLength: 1, maxLength: 8 }))
  .map(([oldTree, edits]) => [oldTree, applyEdits(oldTree, edits)] as const)
  .filter(([oldTree, newTree]) =>
    !underLoopingSymlink(oldTree, newTree) && !underLoopingSymlink(newTree, oldTree)
  );

Deno.test("random trees and edits round-trip through git apply, -R and --3way", {
  permissions: GIT_PERMISSIONS,
}, async (t) => {
  await assertProperty(
    t,
    fc.asyncProperty(treesArb, async ([oldTree, newTree]) => {
      await checkRoundTrip(oldTree, newTree);
    }),
    { numRuns: 60 },
  );
});

Deno.test(
  "a symlink to itself replaced by a directory: git diff's patch, which git apply refuses",
  {
    permissions: GIT_PERMISSIONS,
  },
  async () => {
    await using dir = await tempDir();
    const oldTree: Tree = new Map([["é", { mode: 0o120000 as GitMode, bytes: utf8("é") }]]);
    const newTree: Tree = new Map([["é/a", { mode: 0o100644 as GitMode, bytes: utf8("a\n") }]]);
    assert.ok(underLoopingSymlink(oldTree, newTree), "the generator leaves this case out");

    // What real git diff writes between the two trees.
    const repo = join(dir.path, "repo");
    await Deno.mkdir(repo);
    await gitOk(repo, ["init", "--quiet", "."]);
    const trees: string[] = [];
    for (const tree of [oldTree, newTree]) {
      for await (const e of Deno.readDir(repo)) {
        if (e.name !== ".git") await Deno.remove(join(repo, e.name), { recursive: true });
      }
      await materialize(repo, tree);
      await gitOk(repo, ["add", "--all"]);
      trees.push(new TextDecoder().decode(await gitOk(repo, ["write-tree"])).trim());
    }
    const gitDiff = await gitOk(repo, [
      "-c",
      "core.quotePath=false",
      "diff",
      "--full-index",
      "--binary",
      "--no-renames",
      "--no-color",
      ...trees,
    ]);
    const { patch } = patchFor(changesBetween(oldTree, newTree));
    assert.equal(new TextDecoder().decode(patch), new TextDecoder().decode(gitDiff));

    // git apply checks that é/a is free before it removes é, and é/a loops.
    const work = join(dir.path, "work");
    await Deno.mkdir(work);
    await materialize(work, oldTree);
    const patchFile = join(dir.path, "patch.diff");
    await Deno.writeFile(patchFile, patch);
    const refused = await git(work, ["apply", patchFile]);
    assert.equal(refused.code, 1, refused.stderr);
    assert.match(refused.stderr, /^error: é\/a: Too many levels of symbolic links$/m);
    assert.deepEqual([...(await readTree(work)).keys()], ["é"], "nothing applied");
  },
);

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
}, async (t) => {
  await assertProperty(
    t,
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
