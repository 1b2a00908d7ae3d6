import assert from "node:assert/strict";
import fc from "fast-check";
import { assertProperty } from "../../tests/_property.ts";
import { gitOk, sandbox } from "../_testing.ts";
import {
  blobId,
  compareTreeEntries,
  EMPTY_TREE_HEX,
  hexOf,
  treeBody,
  type TreeEntry,
  treeId,
} from "./tree_id.ts";

const enc = new TextEncoder();
const perms: Deno.PermissionOptions = { read: true, write: true, run: ["git"], env: ["PATH"] };

function entry(name: string, mode: TreeEntry["mode"]): TreeEntry {
  return { name: enc.encode(name), mode, oid: new Uint8Array(20) };
}

Deno.test("compareTreeEntries sorts a directory as if its name ended with a slash", () => {
  const sorted = [
    entry("a", "100644"),
    entry("a-b", "100644"),
    entry("a.c", "100644"),
    entry("a", "40000"),
    entry("a0", "100644"),
    entry("b", "120000"),
  ];
  // The file "a" and the directory "a" cannot share a tree; both orders are checked apart.
  const withDir = sorted.filter((e) => !(e.mode === "100644" && e.name.length === 1));
  assert.deepEqual([...withDir].reverse().sort(compareTreeEntries), withDir);
  const withFile = sorted.filter((e) => e.mode !== "40000");
  assert.deepEqual([...withFile].reverse().sort(compareTreeEntries), withFile);
});

Deno.test("treeBody refuses entries out of order, repeated names and malformed names", () => {
  assert.throws(() => treeBody([entry("b", "100644"), entry("a", "100644")]), RangeError);
  assert.throws(() => treeBody([entry("a", "100644"), entry("a", "100755")]), RangeError);
  assert.throws(() => treeBody([entry("a/b", "100644")]), RangeError);
  assert.throws(() => treeBody([entry("", "100644")]), RangeError);
  assert.throws(
    () => treeBody([{ name: enc.encode("a"), mode: "100644", oid: new Uint8Array(19) }]),
    RangeError,
  );
});

Deno.test("the empty tree's id is Git's", () => {
  assert.equal(hexOf(treeId([])), EMPTY_TREE_HEX);
});

Deno.test({ name: "blobId equals git hash-object", permissions: perms }, async () => {
  using sb = sandbox("marsh-tree-id-test-");
  const samples = [new Uint8Array(0), enc.encode("hello\n"), new Uint8Array([0, 1, 2, 255, 0])];
  for (const [i, bytes] of samples.entries()) {
    Deno.writeFileSync(`${sb.top}/blob${i}`, bytes);
    const want = (await gitOk(sb.top, ["hash-object", `blob${i}`], { home: sb.home })).trim();
    assert.equal(hexOf(blobId(bytes)), want);
  }
});

/** A generated file tree. */
type Node =
  | { readonly t: "file" | "exec" | "link"; readonly s: string }
  | { readonly t: "dir"; readonly kids: Record<string, Node> };

function writeTree(dir: string, kids: Record<string, Node>): void {
  Deno.mkdirSync(dir, { recursive: true });
  for (const [name, v] of Object.entries(kids)) {
    const path = `${dir}/${name}`;
    if (v.t === "dir") writeTree(path, v.kids);
    else if (v.t === "link") Deno.symlinkSync(v.s, path);
    else {
      Deno.writeFileSync(path, enc.encode(v.s));
      Deno.chmodSync(path, v.t === "exec" ? 0o755 : 0o644);
    }
  }
}

const MODES = { file: "100644", exec: "100755", link: "120000" } as const;

/** Our tree id of a tree, `null` when Git would leave it out. */
function ourTree(kids: Record<string, Node>): Uint8Array | null {
  const entries: TreeEntry[] = [];
  for (const [name, v] of Object.entries(kids)) {
    if (v.t === "dir") {
      const sub = ourTree(v.kids);
      if (sub) entries.push({ name: enc.encode(name), mode: "40000", oid: sub });
    } else {
      entries.push({ name: enc.encode(name), mode: MODES[v.t], oid: blobId(enc.encode(v.s)) });
    }
  }
  return entries.length === 0 ? null : treeId(entries);
}

const names = ["a", "a-b", "a.c", "a0", "b", "é", "z"];

const treeArb = fc.letrec<{ dir: Record<string, Node> }>((tie) => ({
  dir: fc.dictionary(
    fc.constantFrom(...names),
    fc.oneof(
      { depthSize: "small" },
      fc.record({ t: fc.constantFrom("file", "exec"), s: fc.string({ maxLength: 8 }) }),
      fc.record({ t: fc.constant("link"), s: fc.constantFrom("x", "../a", "a/b c") }),
      tie("dir").map((kids) => ({ t: "dir", kids })),
    ) as fc.Arbitrary<Node>,
    { maxKeys: 5 },
  ),
})).dir;

Deno.test({
  name: "treeId equals git write-tree for random trees, empty directories and modes",
  permissions: perms,
}, async (t) => {
  using sb = sandbox("marsh-tree-id-test-");
  const opts = { home: sb.home };
  let run = 0;
  await assertProperty(
    t,
    fc.asyncProperty(treeArb, async (tree) => {
      const dir = `${sb.top}/t${run++}`;
      writeTree(dir, tree);
      await gitOk(dir, ["init", "-q"], opts);
      await gitOk(dir, ["add", "-A"], opts);
      const want = (await gitOk(dir, ["write-tree"], opts)).trim();
      const ours = ourTree(tree);
      assert.equal(ours ? hexOf(ours) : EMPTY_TREE_HEX, want, JSON.stringify(tree));
    }),
    { numRuns: 60 },
  );
});
