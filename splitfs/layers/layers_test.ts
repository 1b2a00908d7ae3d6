import assert from "node:assert/strict";
import fc from "fast-check";
import { assertProperty } from "../../tests/_property.ts";
import { fingerprint, fingerprintDiff, leaves, put, throwsA } from "../_testing.ts";
import { gitTree, type LayerProject, layerProject, mountStack } from "./_layers_testing.ts";
import { IgnoreRules } from "../git/ignore_rules.ts";
import { IndexNode, type LayerIndex, statIndexOf } from "./layer_index.ts";
import { decodeIndex, encodeIndex } from "./index_codec.ts";
import {
  ignoreKeyOf,
  LayerError,
  type LayerSnapshot,
  LayerStore,
  releaseIndexCache,
} from "./layers.ts";

// Real files, real git, real overlay mounts (the tests run as root).
const perms: Deno.PermissionOptions = {
  ffi: true,
  read: true,
  write: true,
  run: ["git", "mount", "umount"],
  env: ["PATH"],
};

const enc = new TextEncoder();
const MARSH = (rel: string) => rel === ".marsh";

type Project = LayerProject;

function project(): Project {
  return layerProject("marsh-layers-test-");
}

/** The layer directories (sealed or not) in the store. */
function layerDirs(p: Project): string[] {
  return [...Deno.readDirSync(p.layersPath)].filter((e) => /^[a-z0-9]{8,24}$/.test(e.name))
    .map((e) => e.name).sort();
}

/** Asserts the mounted stack shows exactly the live tree (less `.marsh` and `skip`). */
async function assertStackIsLive(p: Project, snap: LayerSnapshot): Promise<void> {
  await using mnt = await mountStack(p, snap.layers);
  const live = fingerprint(p.sb.root, { skip: MARSH });
  const stack = fingerprint(mnt.path);
  assert.deepEqual(fingerprintDiff(live, stack), []);
  assertIndexIsStack(snap, mnt.path);
}

/** The snapshot's stat index says what the mount shows: kind, bits, size, mtime. */
function assertIndexIsStack(snap: LayerSnapshot, mnt: string): void {
  const index = snap.index;
  let seen = 0;
  for (const [dir, entries] of index) {
    for (const [name, st] of entries) {
      const rel = dir === "" ? name : `${dir}/${name}`;
      const real = Deno.lstatSync(`${mnt}/${rel}`);
      const kind = real.isFile ? "file" : real.isDirectory ? "dir" : "symlink";
      assert.equal(st.kind, kind, rel);
      if (kind === "symlink") {
        assert.equal(st.size, real.size, rel);
        continue;
      }
      assert.equal(st.perm, (real.mode ?? 0) & 0o7777, rel);
      if (kind === "file") {
        assert.equal(st.size, real.size, rel);
        assert.equal(Math.floor(Number(st.mtimeNs / 1_000_000n)), real.mtime?.getTime(), rel);
      }
      seen++;
    }
  }
  assert.ok(seen >= 0);
}

// ---------------------------------------------------------------------------
// Random edits

type Path = readonly string[];
type Op =
  | { readonly op: "write"; readonly path: Path; readonly data: string; readonly exec: boolean }
  | { readonly op: "delete"; readonly path: Path }
  | { readonly op: "chmod"; readonly path: Path; readonly exec: boolean }
  | { readonly op: "symlink"; readonly path: Path; readonly target: string }
  | { readonly op: "mkdir"; readonly path: Path }
  | { readonly op: "dirmode"; readonly path: Path; readonly mode: number };

const NAMES = ["a", "b", "a.x", "a-b", "c"];
const pathArb = fc.array(fc.constantFrom(...NAMES), { minLength: 1, maxLength: 3 });
const opArb: fc.Arbitrary<Op> = fc.oneof(
  {
    arbitrary: fc.record({
      op: fc.constant("write" as const),
      path: pathArb,
      data: fc.constantFrom("", "x", "hello\n", "hello!\n", "\0bin\0"),
      exec: fc.boolean(),
    }),
    weight: 5,
  },
  { arbitrary: fc.record({ op: fc.constant("delete" as const), path: pathArb }), weight: 3 },
  {
    arbitrary: fc.record({ op: fc.constant("chmod" as const), path: pathArb, exec: fc.boolean() }),
    weight: 2,
  },
  {
    arbitrary: fc.record({
      op: fc.constant("symlink" as const),
      path: pathArb,
      target: fc.constantFrom("a", "../b", "nowhere/x"),
    }),
    weight: 2,
  },
  { arbitrary: fc.record({ op: fc.constant("mkdir" as const), path: pathArb }), weight: 2 },
  {
    arbitrary: fc.record({
      op: fc.constant("dirmode" as const),
      path: pathArb,
      mode: fc.constantFrom(0o700, 0o755, 0o775, 0o2755),
    }),
    weight: 1,
  },
);

function lstat(path: string): Deno.FileInfo | null {
  try {
    return Deno.lstatSync(path);
  } catch (error) {
    if (error instanceof Deno.errors.NotFound || error instanceof Deno.errors.NotADirectory) {
      return null;
    }
    throw error;
  }
}

/** Makes every parent of `path` a directory, replacing a file or symlink in the way. */
function parents(root: string, path: Path): string {
  let dir = root;
  for (const name of path.slice(0, -1)) {
    dir = `${dir}/${name}`;
    const st = lstat(dir);
    if (st && !st.isDirectory) Deno.removeSync(dir);
    if (!st || !st.isDirectory) Deno.mkdirSync(dir);
  }
  return `${dir}/${path[path.length - 1]}`;
}

/** The path when every parent is a real directory (never through a symlink), else `null`. */
function existing(root: string, path: Path): string | null {
  let dir = root;
  for (const name of path.slice(0, -1)) {
    dir = `${dir}/${name}`;
    if (!lstat(dir)?.isDirectory) return null;
  }
  return `${dir}/${path[path.length - 1]}`;
}

function clear(path: string): void {
  if (lstat(path)) Deno.removeSync(path, { recursive: true });
}

function apply(root: string, op: Op): void {
  switch (op.op) {
    case "write": {
      const full = parents(root, op.path);
      if (!lstat(full)?.isFile) clear(full);
      Deno.writeFileSync(full, enc.encode(op.data));
      Deno.chmodSync(full, op.exec ? 0o755 : 0o644);
      return;
    }
    case "delete": {
      const full = existing(root, op.path);
      if (full) clear(full);
      return;
    }
    case "chmod": {
      const full = existing(root, op.path);
      if (full && lstat(full)?.isFile) Deno.chmodSync(full, op.exec ? 0o755 : 0o644);
      return;
    }
    case "symlink": {
      const full = parents(root, op.path);
      clear(full);
      Deno.symlinkSync(op.target, full);
      return;
    }
    case "mkdir": {
      const full = parents(root, op.path);
      if (!lstat(full)?.isDirectory) {
        clear(full);
        Deno.mkdirSync(full);
      }
      return;
    }
    case "dirmode": {
      const full = existing(root, op.path);
      if (full && lstat(full)?.isDirectory) Deno.chmodSync(full, op.mode);
      return;
    }
  }
}

// ---------------------------------------------------------------------------

Deno.test({
  name: "each snapshot's mounted stack equals the live tree, and its root id is git write-tree's",
  permissions: perms,
}, async (t) => {
  let runs = 0;
  await assertProperty(
    t,
    fc.asyncProperty(
      fc.array(fc.array(opArb, { maxLength: 6 }), { minLength: 1, maxLength: 7 }),
      fc.integer({ min: 2, max: 5 }),
      fc.boolean(),
      async (steps, maxDepth, dropCache) => {
        using p = project();
        const gitDir = `${p.sb.top}/check-${runs++}.git`;
        let prev: LayerSnapshot | null = null;
        for (const ops of steps) {
          for (const op of ops) apply(p.sb.root, op);
          if (dropCache) releaseIndexCache();
          const snap = p.snap({ maxDepth });
          assert.ok(snap.layers.length <= maxDepth);
          const grew = prev !== null && snap.layers.join() !== prev.layers.join();
          if (prev && grew && snap.layers.length > 1) {
            assert.deepEqual(snap.layers.slice(0, -1), prev.layers, "a new layer goes on top");
          }
          await assertStackIsLive(p, snap);
          assert.equal(snap.rootId, await gitTree(p, gitDir));
          // Nothing changed since: no new layer, the same root.
          const again = p.snap({ maxDepth });
          assert.deepEqual(again.layers, snap.layers);
          assert.equal(again.rootId, snap.rootId);
          assert.equal(again.stats.copied, 0);
          prev = snap;
        }
        assert.deepEqual(p.store.heads().get("tracked"), prev?.layers);
      },
    ),
    { numRuns: 60 },
  );
});

Deno.test({
  name: "a later snapshot copies only what changed and reads only what it must",
  permissions: perms,
}, async () => {
  using p = project();
  for (let i = 0; i < 20; i++) put(p.sb.root, `src/f${i}.txt`, `file ${i}\n`);
  put(p.sb.root, "bin/run.sh", "#!/bin/sh\n", 0o755);
  // Files written in the same clock tick as a snapshot starts are re-read by the next one.
  await new Promise((r) => setTimeout(r, 20));
  const first = p.snap();
  assert.equal(first.stats.full, true);
  assert.equal(first.stats.files, 21);
  assert.equal(first.stats.copied, 21);
  assert.equal(first.layers.length, 1);
  // Old enough that the racy rule does not apply to the untouched files.
  await new Promise((r) => setTimeout(r, 20));
  put(p.sb.root, "src/f3.txt", "changed\n");
  Deno.removeSync(`${p.sb.root}/src/f4.txt`);
  Deno.mkdirSync(`${p.sb.root}/empty`);
  const second = p.snap();
  assert.equal(second.stats.full, false);
  assert.equal(second.layers.length, 2);
  assert.equal(second.stats.copied, 1);
  assert.equal(second.stats.whiteouts, 1);
  assert.equal(second.stats.files, 20);
  assert.equal(second.stats.reused, 19);
  const info = p.store.list().find((l) => l.id === second.layers[1]);
  assert.deepEqual(
    { parent: info?.parent, depth: info?.depth, files: info?.files, bytes: info?.bytes },
    { parent: first.layers[0], depth: 2, files: 1, bytes: 8 },
  );
  // The layer holds the change, a whiteout and the new empty directory, nothing else.
  const data = `${p.layersPath}/${second.layers[1]}/data`;
  assert.deepEqual(leaves(data), ["src/f3.txt", "src/f4.txt"]);
  assert.equal(Deno.lstatSync(`${data}/src/f4.txt`).isCharDevice, true);
  assert.equal(Deno.lstatSync(`${data}/empty`).isDirectory, true);
  await assertStackIsLive(p, second);
  // A sealed layer's wrapper stays writable by its owner (so rm -rf .marsh works),
  // its own files are read-only; the data keeps the live bits.
  const wrapper = `${p.layersPath}/${second.layers[1]}`;
  assert.equal(Deno.statSync(wrapper).mode! & 0o777, 0o755);
  for (const name of ["SEALED", "index", "meta.json", "stat"]) {
    assert.equal(Deno.statSync(`${wrapper}/${name}`).mode! & 0o777, 0o444, name);
  }
  assert.equal(
    Deno.statSync(`${data}/src`).mode! & 0o777,
    Deno.statSync(`${p.sb.root}/src`).mode! & 0o777,
  );
});

Deno.test({
  name:
    "an unchanged tree makes no layer; the same content by another history has the same root id",
  permissions: perms,
}, async () => {
  using p = project();
  using q = project();
  put(p.sb.root, "a/b.txt", "one\n");
  put(p.sb.root, "c.sh", "#!/bin/sh\n", 0o755);
  const s1 = p.snap();
  put(p.sb.root, "a/b.txt", "two\n");
  put(p.sb.root, "d/e.txt", "gone soon\n");
  Deno.symlinkSync("a/b.txt", `${p.sb.root}/link`);
  const s2 = p.snap();
  Deno.removeSync(`${p.sb.root}/d`, { recursive: true });
  put(p.sb.root, "a/b.txt", "three\n");
  const s3 = p.snap();
  assert.equal(s3.layers.length, 3);
  const s4 = p.snap();
  assert.deepEqual(s4.layers, s3.layers);
  assert.equal(s4.rootId, s3.rootId);
  assert.notEqual(s1.rootId, s3.rootId);
  assert.notEqual(s2.rootId, s3.rootId);
  // The same files written once, elsewhere.
  put(q.sb.root, "c.sh", "#!/bin/sh\n", 0o755);
  put(q.sb.root, "a/b.txt", "three\n");
  Deno.symlinkSync("a/b.txt", `${q.sb.root}/link`);
  Deno.mkdirSync(`${q.sb.root}/empty/deeper`, { recursive: true });
  const other = q.snap();
  assert.equal(other.layers.length, 1);
  assert.equal(other.rootId, s3.rootId);
  // A second store on the same directory, with the parsed index forgotten, agrees.
  releaseIndexCache();
  using marsh = p.root.openDir(".marsh");
  using again = LayerStore.open(marsh);
  const s5 = again.snapshot({
    source: p.root,
    ignore: null,
    skipTop: new Set([".marsh"]),
    chain: "tracked",
  });
  assert.deepEqual(s5.layers, s3.layers);
  assert.equal(s5.rootId, s3.rootId);
  await assertStackIsLive(p, s5);
  await assertStackIsLive(q, other);
});

Deno.test({
  name: "a same-size rewrite with the mtime forced back is caught",
  permissions: perms,
}, async () => {
  using p = project();
  put(p.sb.root, "a.txt", "hello world\n");
  put(p.sb.root, "b.txt", "untouched\n");
  const s1 = p.snap();
  const before = Deno.lstatSync(`${p.sb.root}/a.txt`);
  Deno.writeTextFileSync(`${p.sb.root}/a.txt`, "HELLO WORLD\n");
  Deno.utimeSync(`${p.sb.root}/a.txt`, before.atime!, before.mtime!);
  const s2 = p.snap();
  assert.equal(s2.layers.length, 2);
  assert.notEqual(s2.rootId, s1.rootId);
  await assertStackIsLive(p, s2);
  // Again at once, this time within the racy window of the snapshot just taken.
  Deno.writeTextFileSync(`${p.sb.root}/a.txt`, "hello WORLD\n");
  Deno.utimeSync(`${p.sb.root}/a.txt`, before.atime!, before.mtime!);
  const s3 = p.snap();
  assert.equal(s3.layers.length, 3);
  await assertStackIsLive(p, s3);
  // A touch alone changes no content: no layer, and the index keeps the layer's mtime.
  Deno.utimeSync(`${p.sb.root}/b.txt`, new Date(1_000_000), new Date(1_000_000));
  const s4 = p.snap();
  assert.deepEqual(s4.layers, s3.layers);
  await assertStackIsLive(p, s4);
  await using mnt = await mountStack(p, s4.layers);
  assert.equal(
    Math.floor(Number(s4.index.get("")!.get("b.txt")!.mtimeNs / 1_000_000n)),
    Deno.lstatSync(`${mnt.path}/b.txt`).mtime?.getTime(),
  );
});

Deno.test({
  name: "a file larger than the in-memory limit is streamed, and a touch of it adds no layer",
  permissions: perms,
}, async () => {
  using p = project();
  const big = new Uint8Array(65 * 1024 * 1024 + 3);
  for (let i = 0; i < big.length; i += 4096) big[i] = i & 0xff;
  put(p.sb.root, "big.bin", big);
  put(p.sb.root, "small.txt", "small\n");
  const s1 = p.snap();
  await assertStackIsLive(p, s1);
  Deno.utimeSync(`${p.sb.root}/big.bin`, new Date(2_000_000), new Date(2_000_000));
  const s2 = p.snap();
  assert.deepEqual(s2.layers, s1.layers);
  // The file was streamed into a layer directory that then held nothing: it is gone.
  assert.deepEqual(layerDirs(p), s1.layers);
  big[7] = 7;
  put(p.sb.root, "big.bin", big);
  const s3 = p.snap();
  assert.equal(s3.layers.length, 2);
  assert.equal(s3.stats.copied, 1);
  assert.deepEqual(
    leaves(`${p.layersPath}/${s3.layers[1]}`),
    ["data/big.bin", "index", "meta.json", "SEALED", "stat"].sort(),
  );
  await assertStackIsLive(p, s3);
  assert.equal(s3.rootId, await gitTree(p, `${p.sb.top}/check.git`));
});

Deno.test({
  name: "a stack at maxDepth rebases onto a full copy when something changes",
  permissions: perms,
}, async () => {
  using p = project();
  put(p.sb.root, "f", "1");
  const s1 = p.snap({ maxDepth: 2 });
  put(p.sb.root, "f", "2");
  const s2 = p.snap({ maxDepth: 2 });
  assert.equal(s2.layers.length, 2);
  assert.deepEqual(p.snap({ maxDepth: 2 }).layers, s2.layers);
  put(p.sb.root, "f", "3");
  const s3 = p.snap({ maxDepth: 2 });
  assert.equal(s3.stats.full, true);
  assert.equal(s3.layers.length, 1);
  assert.ok(!s2.layers.includes(s3.layers[0]!));
  await assertStackIsLive(p, s3);
  assert.deepEqual(p.store.heads().get("tracked"), s3.layers);
  // The old stack stays until collected.
  assert.deepEqual(p.store.list().map((l) => l.id).sort(), [...s2.layers, ...s3.layers].sort());
  assert.equal(s1.layers[0], s2.layers[0]);
});

Deno.test({
  name: "collect never removes a referenced layer, one below it, or a head's stack",
  permissions: perms,
}, (t) => {
  type Action =
    | { readonly a: "snap"; readonly chain: number }
    | { readonly a: "ref"; readonly pick: number }
    | { readonly a: "release"; readonly pick: number }
    | { readonly a: "collect" };
  const actionArb: fc.Arbitrary<Action> = fc.oneof(
    {
      arbitrary: fc.record({
        a: fc.constant("snap" as const),
        chain: fc.integer({ min: 0, max: 1 }),
      }),
      weight: 4,
    },
    { arbitrary: fc.record({ a: fc.constant("ref" as const), pick: fc.nat() }), weight: 2 },
    { arbitrary: fc.record({ a: fc.constant("release" as const), pick: fc.nat() }), weight: 2 },
    { arbitrary: fc.record({ a: fc.constant("collect" as const) }), weight: 2 },
  );
  assertProperty(
    t,
    fc.property(fc.array(actionArb, { minLength: 1, maxLength: 25 }), (actions) => {
      using p = project();
      const referenced = new Set<string>();
      let n = 0;
      for (const act of [...actions, { a: "collect" } as const]) {
        if (act.a === "snap") {
          put(p.sb.root, `f${n % 3}`, `${n++}`);
          p.snap({ chain: ["tracked", "with-ignored"][act.chain]!, maxDepth: 3 });
        } else if (act.a === "ref") {
          const all = p.store.list();
          if (all.length > 0) referenced.add(all[act.pick % all.length]!.id);
        } else if (act.a === "release") {
          const refs = [...referenced];
          if (refs.length > 0) referenced.delete(refs[act.pick % refs.length]!);
        } else {
          const before = p.store.list();
          const byId = new Map(before.map((l) => [l.id, l]));
          const keep = new Set<string>();
          const tops = [...referenced, ...[...p.store.heads().values()].map((s) => s.at(-1)!)];
          for (let id of tops) {
            while (id !== undefined && !keep.has(id)) {
              keep.add(id);
              const parent = byId.get(id)?.parent;
              if (!parent) break;
              id = parent;
            }
          }
          const dry = p.store.collect(referenced, true);
          assert.deepEqual(p.store.list(), before, "a dry run removes nothing");
          const real = p.store.collect(referenced, false);
          assert.deepEqual(real, dry);
          const expected = before.filter((l) => !keep.has(l.id));
          assert.deepEqual(real.removed, expected.map((l) => l.id).sort());
          assert.equal(real.bytes, expected.reduce((sum, l) => sum + l.bytes, 0));
          const after = p.store.list();
          assert.deepEqual(
            after.map((l) => l.id).sort(),
            [...keep].filter((id) => byId.has(id)).sort(),
          );
          for (const id of keep) if (byId.has(id)) p.store.openData(id).close();
          for (const stack of p.store.heads().values()) {
            for (const id of stack) p.store.openData(id).close();
          }
        }
      }
      const trash = `${p.sb.root}/.marsh/.trash`;
      const left = lstat(trash) ? [...Deno.readDirSync(trash)] : [];
      assert.deepEqual(left.filter((e) => e.name.startsWith("layer-")), []);
    }),
    { numRuns: 40 },
  );
});

Deno.test({
  name: "a layer without its seal, or with an altered meta.json, is refused",
  permissions: perms,
}, () => {
  using p = project();
  put(p.sb.root, "a", "1");
  const s1 = p.snap();
  put(p.sb.root, "a", "2");
  const s2 = p.snap();
  const [bottom, top] = s2.layers as [string, string];
  p.store.openData(top).close();
  Deno.removeSync(`${p.layersPath}/${top}/SEALED`);
  const e1 = throwsA(() => p.store.openData(top), LayerError);
  assert.equal(e1.message, `layer "${top}" is not sealed: SEALED is missing`);
  const meta = Deno.readTextFileSync(`${p.layersPath}/${bottom}/meta.json`);
  Deno.writeTextFileSync(
    `${p.layersPath}/${bottom}/meta.json`,
    meta.replace('"files": 1', '"files": 2'),
  );
  const e2 = throwsA(() => p.store.openData(bottom), LayerError);
  assert.equal(e2.message, `layer "${bottom}" is not sealed: meta.json does not match its seal`);
  assert.match(throwsA(() => p.store.openData("zzzzzzzzzz"), LayerError).message, /is missing/);
  assert.match(throwsA(() => p.store.openData("../x"), LayerError).message, /is not a layer id/);
  // Neither is trusted as a base: the next snapshot copies everything again.
  assert.deepEqual(p.store.heads().get("tracked"), undefined);
  const s3 = p.snap();
  assert.equal(s3.stats.full, true);
  assert.equal(s3.layers.length, 1);
  assert.equal(s3.rootId, s2.rootId);
  assert.notEqual(s1.rootId, s2.rootId);
  // collect takes them, unsealed or not.
  const removed = p.store.collect(new Set(), false).removed;
  assert.deepEqual(removed, [bottom, top].sort());
});

Deno.test({
  name:
    "ignored entries stay out of a tracked chain, and a .gitignore change is honoured both ways",
  permissions: perms,
}, async () => {
  using p = project();
  const rules = IgnoreRules.load({ globalExcludes: null, infoExclude: null });
  const key = ignoreKeyOf({ globalExcludes: null, infoExclude: null, ignoreCase: false });
  const tracked = () => p.snap({ ignore: rules, ignoreKey: key });
  const files: Record<string, string> = {
    ".gitignore": "*.log\nbuild/\n",
    "a.txt": "a\n",
    "x.log": "log\n",
    "build/out.o": "obj\n",
    "sub/y.log": "log\n",
    "sub/keep.txt": "keep\n",
  };
  for (const [rel, data] of Object.entries(files)) put(p.sb.root, rel, data);
  const gitDir = `${p.sb.top}/check.git`;
  const check = async (snap: LayerSnapshot, want: string[]) => {
    await using mnt = await mountStack(p, snap.layers);
    assert.deepEqual(leaves(mnt.path), want.sort());
    // Git reads the same .gitignore files from the work tree; a fresh index
    // forgets files that were added before they became ignored.
    Deno.removeSync(`${gitDir}/index`);
    assert.equal(snap.rootId, await gitTree(p, gitDir));
  };
  await gitTree(p, gitDir);
  const s1 = tracked();
  assert.equal(s1.stats.prunedIgnored, 3);
  await check(s1, [".gitignore", "a.txt", "sub/keep.txt"]);
  const all = p.snap({ chain: "with-ignored" });
  await using mnt = await mountStack(p, all.layers);
  assert.deepEqual(leaves(mnt.path), Object.keys(files).sort());

  put(p.sb.root, ".gitignore", "build/\n");
  await check(tracked(), [".gitignore", "a.txt", "sub/keep.txt", "sub/y.log", "x.log"]);
  put(p.sb.root, ".gitignore", "*.log\nbuild/\n");
  await check(tracked(), [".gitignore", "a.txt", "sub/keep.txt"]);
  // A nested .gitignore, added then removed.
  put(p.sb.root, "sub/.gitignore", "keep.txt\n");
  await check(tracked(), [".gitignore", "a.txt", "sub/.gitignore"]);
  Deno.removeSync(`${p.sb.root}/sub/.gitignore`);
  await check(tracked(), [".gitignore", "a.txt", "sub/keep.txt"]);
  // A .gitignore that ignores itself still rules its directory, and its edits count.
  put(p.sb.root, "sub/.gitignore", ".gitignore\n*.txt\n");
  await check(tracked(), [".gitignore", "a.txt"]);
  put(p.sb.root, "sub/.gitignore", ".gitignore\n*.md\n");
  await check(tracked(), [".gitignore", "a.txt", "sub/keep.txt"]);
  // New names are tested against unchanged rules too.
  put(p.sb.root, "sub/new.log", "log\n");
  put(p.sb.root, "sub/new.txt", "txt\n");
  await check(tracked(), [".gitignore", "a.txt", "sub/keep.txt", "sub/new.txt"]);
  // Tree-wide rules changed (info/exclude): every entry is tested again.
  const withExclude = IgnoreRules.load({
    globalExcludes: null,
    infoExclude: enc.encode("a.txt\n"),
  });
  const s9 = p.snap({
    ignore: withExclude,
    ignoreKey: ignoreKeyOf({
      globalExcludes: null,
      infoExclude: enc.encode("a.txt\n"),
      ignoreCase: false,
    }),
  });
  await using mnt9 = await mountStack(p, s9.layers);
  assert.deepEqual(leaves(mnt9.path), [".gitignore", "sub/keep.txt", "sub/new.txt"]);
});

Deno.test("the index survives encoding, and malformed bytes are refused", () => {
  const ix: LayerIndex = {
    root: IndexNode.empty(),
    rootStat: new Float64Array(10),
    rootTree: null,
    startSec: 1,
    startNsec: 2,
    ignoreKey: "none",
  };
  const back = decodeIndex(encodeIndex(ix));
  assert.equal(back.startSec, 1);
  assert.equal(back.startNsec, 2);
  assert.equal(back.ignoreKey, "none");
  assert.deepEqual([...statIndexOf(back)], [["", new Map()]]);
  assert.throws(() => decodeIndex(new Uint8Array(200)), /not a layer index/);
  const bytes = encodeIndex(ix);
  assert.throws(() => decodeIndex(bytes.subarray(0, bytes.length - 8)), /sizes do not match/);
});
