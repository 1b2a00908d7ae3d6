import assert from "node:assert/strict";
import fc from "fast-check";
import { assertProperty } from "../../tests/_property.ts";
import { writeChanges } from "../capture/capture.ts";
import { type CompareStats, compareTrees } from "../capture/compare.ts";
import { Dir } from "../fd/dir.ts";
import { RejectedError } from "../errors.ts";
import { cstr, libc, UMOUNT } from "../fd/ffi.ts";
import { CopyForkStrategy, type Fork } from "./fork.ts";
import { IgnoreRules } from "../git/ignore_rules.ts";
import { findMount, mountOf, readMounts } from "../fd/mountinfo.ts";
import {
  findRecordedMount,
  MountBusyError,
  mountReadOnly,
  type MountRecord,
  OverlayForkStrategy,
  type OverlayMode,
  probeOverlay,
  removeOverlayFork,
  unmount,
  upperCandidates,
  xattrPrefix,
} from "./overlay.ts";
import { fingerprint, fingerprintDiff, gitOk, gitView, run, text, throwsA } from "../_testing.ts";

// Real overlay mounts (the tests run as root), real git apply. Everything a
// test mounts is unmounted by its stack's dispose, even when it fails.
const perms: Deno.PermissionOptions = {
  ffi: true,
  read: true,
  write: true,
  run: ["git", "cp", "find", "mv", "umount", "unshare", "runuser"],
  env: ["PATH"],
};

const enc = new TextEncoder();
const dec = new TextDecoder();
const GIT = { home: "/nonexistent" };

/** One layer dir as written by hand: files, symlinks, directories and whiteouts. */
type LayerEntry =
  | string
  | Uint8Array
  | { readonly exec: string }
  | { readonly link: string }
  | "<dir>"
  | "<whiteout>";
type LayerSpec = Readonly<Record<string, LayerEntry>>;

function writeLayer(path: string, spec: LayerSpec): void {
  Deno.mkdirSync(path, { recursive: true });
  using layer = Dir.openAbsolute(path);
  for (const [rel, entry] of Object.entries(spec)) {
    const slash = rel.lastIndexOf("/");
    const parent = slash === -1 ? "" : rel.slice(0, slash);
    const name = rel.slice(slash + 1);
    if (parent) Deno.mkdirSync(`${path}/${parent}`, { recursive: true });
    const full = `${path}/${rel}`;
    if (entry === "<dir>") Deno.mkdirSync(full, { recursive: true });
    else if (entry === "<whiteout>") {
      using dir = layer.openPath(parent);
      dir.mknodWhiteout(name);
    } else if (typeof entry === "string" || entry instanceof Uint8Array) {
      Deno.writeFileSync(full, typeof entry === "string" ? enc.encode(entry) : entry);
      Deno.chmodSync(full, 0o644);
    } else if ("exec" in entry) {
      Deno.writeTextFileSync(full, entry.exec);
      Deno.chmodSync(full, 0o755);
    } else Deno.symlinkSync(entry.link, full);
  }
}

/** A fork plus the ready time capture's ctime rule needs, as the workspace stamps it. */
interface MadeFork {
  readonly fork: Omit<Fork, "readyNs">;
  readonly readyNs: bigint;
  readonly path: string;
}

/** What a capture wrote. */
interface Captured {
  readonly patch: Uint8Array;
  readonly files: string[];
  readonly stats: CompareStats;
}

/**
 * A split over a stack of hand-made layers: `split/s1/base` is the
 * read-only overlay of the stack (plus an empty layer), forks are overlay or
 * copy forks of it. Disposing unmounts everything and removes the temp dir.
 */
class Stack implements Disposable {
  readonly top: string;
  readonly mode: OverlayMode;
  readonly layers: Dir[];
  readonly split: Dir;
  readonly base: Dir;
  readonly baseRecord: MountRecord;
  readonly #forks: MadeFork[] = [];
  #marks = 0;

  private constructor(top: string, mode: OverlayMode, layers: Dir[], split: Dir) {
    this.top = top;
    this.mode = mode;
    this.layers = layers;
    this.split = split;
    {
      using target = split.openDir("base");
      this.baseRecord = mountReadOnly(mode, layers, target);
    }
    this.base = split.openDir("base");
  }

  /** `specs` bottom first, as layers are written; an empty layer goes under them. */
  static make(specs: readonly LayerSpec[], mode: OverlayMode = "overlay", dir?: string): Stack {
    const top = Deno.realPathSync(Deno.makeTempDirSync({ prefix: "marsh-overlay-test-", dir }));
    const opened: Dir[] = [];
    try {
      specs.forEach((spec, i) => writeLayer(`${top}/layers/L${i}`, spec));
      Deno.mkdirSync(`${top}/layers/empty`);
      Deno.mkdirSync(`${top}/split/s1/base`, { recursive: true });
      Deno.mkdirSync(`${top}/marks`);
      for (let i = specs.length - 1; i >= 0; i--) {
        opened.push(Dir.openAbsolute(`${top}/layers/L${i}`));
      }
      opened.push(Dir.openAbsolute(`${top}/layers/empty`));
      const split = Dir.openAbsolute(`${top}/split/s1`);
      opened.push(split);
      return new Stack(top, mode, opened.slice(0, -1), split);
    } catch (error) {
      for (const d of opened) d.close();
      Deno.removeSync(top, { recursive: true });
      throw error;
    }
  }

  /** The stack's real layers (without the empty one), top first. */
  get lowers(): Dir[] {
    return this.layers.slice(0, -1);
  }

  #ready(): bigint {
    const mark = `${this.top}/marks/${this.#marks++}`;
    Deno.mkdirSync(mark);
    using d = Dir.openAbsolute(`${this.top}/marks`);
    return d.statAt(String(this.#marks - 1))!.ctimeNs;
  }

  overlayFork(label: string): MadeFork {
    const fork = new OverlayForkStrategy(this.mode, this.lowers).create(
      this.split,
      this.base,
      label,
    );
    const made = { fork, readyNs: this.#ready(), path: `${this.split.path}/${label}` };
    this.#forks.push(made);
    return made;
  }

  copyFork(label: string): MadeFork {
    const fork = new CopyForkStrategy("copy_file_range").create(this.split, this.base, label);
    const made = { fork, readyNs: this.#ready(), path: `${this.split.path}/${label}` };
    this.#forks.push(made);
    return made;
  }

  /** Captures a fork as the workspace does, into memory. */
  capture(made: MadeFork, ignore = true): Captured {
    const stats: CompareStats = { changedBytes: 0, skippedIgnored: 0, skippedSpecial: 0 };
    const candidates = made.fork.candidates();
    const parts: Uint8Array[] = [];
    const files: string[] = [];
    writeChanges(
      compareTrees({
        old: this.base,
        new: made.fork.dir,
        readyNs: made.readyNs,
        nestedGit: "reject",
        newIgnore: ignore ? IgnoreRules.load({ globalExcludes: null, infoExclude: null }) : null,
        candidates: candidates.kind === "tree" ? candidates.tree : undefined,
      }, stats),
      { patch: (b) => parts.push(b), files: (l) => files.push(l.replace(/\n$/, "")) },
      null,
      stats,
    );
    const patch = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
    let at = 0;
    for (const p of parts) {
      patch.set(p, at);
      at += p.length;
    }
    return { patch, files, stats };
  }

  /** `git apply` of `patch` on a copy of the base; returns the copy's path. */
  async applyToBaseCopy(patch: Uint8Array, name = "consumer"): Promise<string> {
    const consumer = `${this.top}/${name}`;
    await run("cp", ["-a", "--", this.base.path, consumer], GIT);
    // A consumer's checkout has no empty directories, which no patch can name.
    await run(
      "find",
      [consumer, "-mindepth", "1", "-depth", "-type", "d", "-empty", "-delete"],
      GIT,
    );
    if (patch.length > 0) {
      const file = `${this.top}/${name}.patch`;
      Deno.writeFileSync(file, patch);
      await gitOk(consumer, ["apply", "--check", file], GIT);
      await gitOk(consumer, ["apply", file], GIT);
    }
    return consumer;
  }

  [Symbol.dispose](): void {
    const errors: unknown[] = [];
    const attempt = (fn: () => void) => {
      try {
        fn();
      } catch (error) {
        errors.push(error);
      }
    };
    for (const f of this.#forks) attempt(() => f.fork.close());
    for (const f of this.#forks) {
      const record = f.fork.mount;
      if (record) attempt(() => removeOverlayFork(this.split, f.fork.label, record));
    }
    attempt(() => this.base.close());
    attempt(() => unmount(this.split, "base", this.baseRecord));
    // A failed test must not leave a mount behind: detach whatever is still there.
    for (const m of readMounts().filter((m) => m.mountPoint.startsWith(`${this.top}/`))) {
      libc().umount2(cstr(m.mountPoint), UMOUNT.DETACH);
      errors.push(new Error(`still mounted at dispose: ${m.mountPoint}`));
    }
    for (const d of [...this.layers, this.split]) attempt(() => d.close());
    Deno.removeSync(this.top, { recursive: true });
    if (errors.length > 0) throw new AggregateError(errors, "stack dispose failed");
  }
}

/** What git sees of a tree, less the paths the test's `.gitignore` keeps out of a patch. */
function gitViewUnignored(root: string): Map<string, string> {
  const view = gitView(root);
  for (const rel of [...view.keys()]) {
    const parts = rel.split("/");
    if (parts.some((p) => p.endsWith(".log")) || parts.slice(0, -1).includes("build")) {
      view.delete(rel);
    }
  }
  return view;
}

function files(c: Captured): string[] {
  return [...c.files].sort();
}

/** Both forks give the same patch byte for byte, and git apply of it on the base reproduces them. */
async function assertSameAndApplies(stack: Stack, ov: MadeFork, copy: MadeFork): Promise<Captured> {
  const a = stack.capture(ov);
  const b = stack.capture(copy);
  assert.deepEqual(a.files, b.files);
  assert.equal(dec.decode(a.patch), dec.decode(b.patch));
  assert.deepEqual(a.patch, b.patch);
  assert.deepEqual(fingerprintDiff(gitView(copy.path), gitView(ov.path)), []);
  const consumer = await stack.applyToBaseCopy(a.patch, `consumer-${ov.fork.label}`);
  assert.deepEqual(fingerprintDiff(gitViewUnignored(ov.path), gitView(consumer)), []);
  return a;
}

/** Every entry of a tree of directories (`dir/`) and leaves, sorted, without following symlinks. */
function listTree(root: string): { files: string[]; dirs: string[]; all: string[] } {
  const out = { files: [] as string[], dirs: [] as string[], all: [] as string[] };
  const walk = (rel: string) => {
    for (const e of [...Deno.readDirSync(rel ? `${root}/${rel}` : root)].sort(byName)) {
      const p = rel ? `${rel}/${e.name}` : e.name;
      if (p === ".gitignore") continue;
      out.all.push(p);
      if (e.isDirectory) {
        out.dirs.push(p);
        walk(p);
      } else if (e.isFile) out.files.push(p);
    }
  };
  walk("");
  return out;
}

function byName(a: { name: string }, b: { name: string }): number {
  return a.name < b.name ? -1 : a.name > b.name ? 1 : 0;
}

function lstatOrNull(path: string): Deno.FileInfo | null {
  try {
    return Deno.lstatSync(path);
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return null;
    throw error;
  }
}

/** Whether `rel`'s parents are real directories or absent (never a symlink or a file). */
function parentsOk(root: string, rel: string): boolean {
  const parts = rel.split("/");
  for (let i = 1; i < parts.length; i++) {
    const st = lstatOrNull(`${root}/${parts.slice(0, i).join("/")}`);
    if (st === null) return true;
    if (!st.isDirectory) return false;
  }
  return true;
}

function mkParents(root: string, rel: string): void {
  const slash = rel.lastIndexOf("/");
  if (slash !== -1) Deno.mkdirSync(`${root}/${rel.slice(0, slash)}`, { recursive: true });
}

// ---------------------------------------------------------------------------
// Random stacks and random edit scripts

const NAMES = ["a", "b", "c.txt", "d d", "é", "x.log", "build"];
const nameArb = fc.constantFrom(...NAMES);
const pathArb = fc.array(nameArb, { minLength: 1, maxLength: 3 }).map((p) => p.join("/"));
const contentArb = fc.oneof(
  fc.constantFrom("", "one\n", "one\ntwo\n", "no newline", "a\r\nb\r\n").map((s) => enc.encode(s)),
  fc.uint8Array({ maxLength: 40 }),
);
const leafArb: fc.Arbitrary<LayerEntry> = fc.oneof(
  { weight: 5, arbitrary: contentArb },
  { weight: 1, arbitrary: fc.constantFrom("#!/bin/sh\n", "x").map((exec) => ({ exec })) },
  {
    weight: 1,
    arbitrary: fc.constantFrom("a", "../b", "d d/c.txt", "gone").map((link) => ({ link })),
  },
);

/** Layer specs bottom first: a tree, then edits of it (new content, whiteouts, additions). */
const stackArb = fc.record({
  bottom: fc.array(fc.tuple(pathArb, leafArb), { minLength: 1, maxLength: 10 }),
  upper: fc.array(
    fc.oneof(
      fc.record({ kind: fc.constant("whiteout" as const), pick: fc.nat() }),
      fc.record({ kind: fc.constant("put" as const), path: pathArb, entry: leafArb }),
    ),
    { maxLength: 6 },
  ),
}).map(({ bottom, upper }) => {
  // Snapshots prune what the .gitignore ignores, so the layers hold none of it.
  const ignored = (p: string) => p.split("/").some((n) => n.endsWith(".log") || n === "build");
  const l0: Record<string, LayerEntry> = { ".gitignore": "*.log\nbuild/\n" };
  const taken = (spec: Record<string, LayerEntry>, p: string) =>
    Object.keys(spec).some((k) => k === p || k.startsWith(`${p}/`) || p.startsWith(`${k}/`));
  for (const [p, e] of bottom) if (!ignored(p) && !taken(l0, p)) l0[p] = e;
  const l0Paths = [...new Set(Object.keys(l0).flatMap(prefixes))].sort();
  const l1: Record<string, LayerEntry> = {};
  for (const op of upper) {
    if (op.kind === "whiteout") {
      const p = l0Paths[op.pick % l0Paths.length]!;
      if (p !== ".gitignore" && !taken(l1, p)) l1[p] = "<whiteout>";
    } else if (!ignored(op.path) && !taken(l1, op.path)) {
      // A new file may go into an existing directory, or replace an existing file.
      const clash = Object.keys(l0).some((k) => k.startsWith(`${op.path}/`)) ||
        prefixes(op.path).slice(0, -1).some((p) => p in l0);
      if (!clash) l1[op.path] = op.entry;
    }
  }
  return [l0, l1];
});

function prefixes(p: string): string[] {
  const parts = p.split("/");
  return parts.map((_, i) => parts.slice(0, i + 1).join("/"));
}

const opArb = fc.oneof(
  fc.record({
    kind: fc.constant("write" as const),
    pick: fc.nat(),
    fresh: fc.option(pathArb),
    content: contentArb,
  }),
  fc.record({ kind: fc.constant("append" as const), pick: fc.nat(), tail: contentArb }),
  fc.record({ kind: fc.constant("rm" as const), pick: fc.nat() }),
  fc.record({ kind: fc.constant("mkdir" as const), path: pathArb }),
  fc.record({
    kind: fc.constant("symlink" as const),
    path: pathArb,
    target: fc.constantFrom("a", "../x", "b/c.txt"),
  }),
  fc.record({ kind: fc.constant("chmod" as const), pick: fc.nat() }),
  fc.record({ kind: fc.constant("mv" as const), pick: fc.nat(), to: pathArb }),
  fc.record({ kind: fc.constant("link" as const), pick: fc.nat(), to: pathArb }),
  fc.record({ kind: fc.constant("dirToFile" as const), pick: fc.nat(), content: contentArb }),
  fc.record({ kind: fc.constant("fileToDir" as const), pick: fc.nat(), name: nameArb }),
  fc.record({
    kind: fc.constant("recreateDir" as const),
    pick: fc.nat(),
    name: nameArb,
    content: contentArb,
  }),
  fc.record({ kind: fc.constant("rewriteSame" as const), pick: fc.nat() }),
  fc.record({ kind: fc.constant("touch" as const), pick: fc.nat() }),
);
type Op = typeof opArb extends fc.Arbitrary<infer T> ? T : never;

function pick<T>(list: readonly T[], n: number): T | undefined {
  return list.length === 0 ? undefined : list[n % list.length];
}

/**
 * Applies one edit under `root` the way a branch's tools would (`mv` is the
 * real one, so a merged directory is copied when rename says EXDEV).
 * `tree` is the listing both forks share; returns `"skip"` when the edit
 * does not apply there.
 */
async function applyOp(root: string, tree: ReturnType<typeof listTree>, op: Op): Promise<string> {
  const at = (rel: string) => `${root}/${rel}`;
  const writeAt = (rel: string, bytes: Uint8Array) => {
    if (!parentsOk(root, rel)) return "skip";
    const st = lstatOrNull(at(rel));
    if (st !== null && !st.isFile) Deno.removeSync(at(rel), { recursive: true });
    mkParents(root, rel);
    Deno.writeFileSync(at(rel), bytes);
    return "ok";
  };
  switch (op.kind) {
    case "write": {
      const rel = op.fresh ?? pick(tree.files, op.pick);
      return rel === undefined ? "skip" : writeAt(rel, op.content);
    }
    case "append": {
      const rel = pick(tree.files, op.pick);
      if (rel === undefined) return "skip";
      Deno.writeFileSync(at(rel), op.tail, { append: true });
      return "ok";
    }
    case "rm": {
      const rel = pick(tree.all, op.pick);
      if (rel === undefined) return "skip";
      Deno.removeSync(at(rel), { recursive: true });
      return "ok";
    }
    case "mkdir":
      if (!parentsOk(root, op.path) || lstatOrNull(at(op.path)) !== null) return "skip";
      Deno.mkdirSync(at(op.path), { recursive: true });
      return "ok";
    case "symlink":
      if (!parentsOk(root, op.path) || lstatOrNull(at(op.path)) !== null) return "skip";
      mkParents(root, op.path);
      Deno.symlinkSync(op.target, at(op.path));
      return "ok";
    case "chmod": {
      const rel = pick(tree.files, op.pick);
      if (rel === undefined) return "skip";
      Deno.chmodSync(at(rel), (Deno.lstatSync(at(rel)).mode! & 0o777) ^ 0o111);
      return "ok";
    }
    case "mv": {
      const rel = pick(tree.all, op.pick);
      if (rel === undefined || op.to === rel || op.to.startsWith(`${rel}/`)) return "skip";
      if (!parentsOk(root, op.to) || lstatOrNull(at(op.to)) !== null) return "skip";
      mkParents(root, op.to);
      await run("mv", ["-T", "--", at(rel), at(op.to)], GIT);
      return "ok";
    }
    case "link": {
      const rel = pick(tree.files, op.pick);
      if (rel === undefined || !parentsOk(root, op.to) || lstatOrNull(at(op.to)) !== null) {
        return "skip";
      }
      mkParents(root, op.to);
      Deno.linkSync(at(rel), at(op.to));
      return "ok";
    }
    case "dirToFile": {
      const rel = pick(tree.dirs, op.pick);
      if (rel === undefined) return "skip";
      Deno.removeSync(at(rel), { recursive: true });
      Deno.writeFileSync(at(rel), op.content);
      return "ok";
    }
    case "fileToDir": {
      const rel = pick(tree.files, op.pick);
      if (rel === undefined) return "skip";
      Deno.removeSync(at(rel));
      Deno.mkdirSync(at(rel));
      Deno.writeTextFileSync(at(`${rel}/${op.name}`), "inside\n");
      return "ok";
    }
    case "recreateDir": {
      const rel = pick(tree.dirs, op.pick);
      if (rel === undefined) return "skip";
      Deno.removeSync(at(rel), { recursive: true });
      Deno.mkdirSync(at(rel));
      Deno.writeFileSync(at(`${rel}/${op.name}`), op.content);
      return "ok";
    }
    case "rewriteSame": {
      const rel = pick(tree.files, op.pick);
      if (rel === undefined) return "skip";
      Deno.writeFileSync(at(rel), Deno.readFileSync(at(rel)));
      return "ok";
    }
    case "touch": {
      const rel = pick(tree.files, op.pick);
      if (rel === undefined) return "skip";
      Deno.utimeSync(at(rel), 1_600_000_000, 1_600_000_000);
      return "ok";
    }
  }
}

/** Applies the same edits to both forks; each must take or refuse each edit alike. */
async function editBoth(ov: MadeFork, copy: MadeFork, ops: readonly Op[]): Promise<void> {
  for (const op of ops) {
    const tree = listTree(ov.path);
    assert.deepEqual(listTree(copy.path), tree);
    const outcome = async (root: string) => {
      try {
        return await applyOp(root, tree, op);
      } catch (error) {
        return `error: ${error instanceof Error ? error.name : error}`;
      }
    };
    const a = await outcome(ov.path);
    const b = await outcome(copy.path);
    assert.equal(a, b, `op ${JSON.stringify(op)}`);
  }
}

Deno.test({
  name: "overlay fork: random edits give the copy fork's patch byte for byte, and git apply agrees",
  permissions: perms,
}, async (t) => {
  let runs = 0, changed = 0;
  await assertProperty(
    t,
    fc.asyncProperty(
      stackArb,
      fc.array(opArb, { minLength: 1, maxLength: 10 }),
      async (specs, ops) => {
        using stack = Stack.make(specs);
        const ov = stack.overlayFork("ov");
        const copy = stack.copyFork("copy");
        assert.deepEqual(fingerprintDiff(gitView(copy.path), gitView(ov.path)), []);
        await editBoth(ov, copy, ops);
        const captured = await assertSameAndApplies(stack, ov, copy);
        runs++;
        if (captured.files.length > 0) changed++;
      },
    ),
    { numRuns: 100 },
  );
  assert.equal(runs, 100);
  // The generators are meant to change something most of the time.
  assert.ok(changed >= 50, `only ${changed} of ${runs} runs changed anything`);
});

// ---------------------------------------------------------------------------
// Edge cases

/** A stack with a bottom layer and a top layer that edits it. */
const EDGE_STACK: LayerSpec[] = [
  {
    ".gitignore": "*.log\nbuild/\n",
    "a.txt": "a from L0\n",
    "exec.sh": { exec: "#!/bin/sh\necho hi\n" },
    "plain.sh": "#!/bin/sh\necho plain\n",
    "link": { link: "a.txt" },
    "d1/x": "x\n",
    "d1/y": "y\n",
    "d1/sub/z": "z\n",
    "d2/w": "w\n",
    "d2/v": "v\n",
    "gone-in-L1": "removed by L1\n",
    "dgone/q": "q\n",
  },
  {
    "a.txt": "a from L1\n",
    "gone-in-L1": "<whiteout>",
    "dgone": "<whiteout>",
    "d1/new-in-L1": "new in L1\n",
  },
];

Deno.test({
  name: "overlay fork: the base is the stack merged, whiteouts applied",
  permissions: perms,
}, () => {
  using stack = Stack.make(EDGE_STACK);
  const view = gitView(stack.base.path);
  assert.deepEqual([...view.keys()].sort(), [
    ".gitignore",
    "a.txt",
    "d1/new-in-L1",
    "d1/sub/z",
    "d1/x",
    "d1/y",
    "d2/v",
    "d2/w",
    "exec.sh",
    "link",
    "plain.sh",
  ]);
  assert.equal(text(`${stack.base.path}/a.txt`), "a from L1\n");
  assert.throws(() => Deno.writeTextFileSync(`${stack.base.path}/new`, "x"), /read-only/i);
  const m = findMount({ id: stack.baseRecord.mountId })!;
  assert.equal(m.fsType, "overlay");
  assert.match(m.options, /(^|,)ro(,|$)/);
  assert.equal(m.mountPoint, stack.base.path);
});

/** Runs `edit` on an overlay fork and a copy fork, checks both patches agree and apply. */
async function edgeCase(
  edit: (fork: string) => void | Promise<void>,
  expected: string[],
  check?: (stack: Stack, ov: MadeFork, patch: string) => void,
): Promise<void> {
  using stack = Stack.make(EDGE_STACK);
  const ov = stack.overlayFork("ov");
  const copy = stack.copyFork("copy");
  await edit(ov.path);
  await edit(copy.path);
  const captured = await assertSameAndApplies(stack, ov, copy);
  assert.deepEqual(files(captured), [...expected].sort());
  check?.(stack, ov, dec.decode(captured.patch));
}

function upperOf(stack: Stack, label: string): string {
  return `${stack.split.path}/.overlay/${label}/upper`;
}

Deno.test({
  name: "overlay fork: delete then recreate a path",
  permissions: perms,
}, async () => {
  await edgeCase((f) => {
    Deno.removeSync(`${f}/a.txt`);
    Deno.writeTextFileSync(`${f}/a.txt`, "recreated\n");
    Deno.removeSync(`${f}/d1/y`);
    Deno.writeTextFileSync(`${f}/d1/y`, "y\n");
  }, ["M\ta.txt"]);
});

Deno.test({
  name: "overlay fork: a directory replaced by a file, and a file by a directory, and back",
  permissions: perms,
}, async () => {
  await edgeCase((f) => {
    Deno.removeSync(`${f}/d2`, { recursive: true });
    Deno.writeTextFileSync(`${f}/d2`, "now a file\n");
    Deno.removeSync(`${f}/plain.sh`);
    Deno.mkdirSync(`${f}/plain.sh`);
    Deno.writeTextFileSync(`${f}/plain.sh/inside`, "inside\n");
  }, ["A\td2", "D\td2/v", "D\td2/w", "A\tplain.sh/inside", "D\tplain.sh"]);
  await edgeCase((f) => {
    Deno.removeSync(`${f}/d2`, { recursive: true });
    Deno.writeTextFileSync(`${f}/d2`, "a file for a while\n");
    Deno.removeSync(`${f}/d2`);
    Deno.mkdirSync(`${f}/d2`);
    Deno.writeTextFileSync(`${f}/d2/w`, "w\n");
  }, ["D\td2/v"]);
});

Deno.test({
  name: "overlay fork: mv of a merged directory copies (EXDEV), giving deletions and additions",
  permissions: perms,
}, async () => {
  await edgeCase(
    async (f) => {
      let code: string | undefined;
      try {
        Deno.renameSync(`${f}/d1`, `${f}/moved`);
      } catch (error) {
        code = (error as { code?: string }).code;
      }
      // A copy fork renames; the overlay refuses a rename that would need a redirect.
      if (f.endsWith("/ov")) assert.equal(code, "EXDEV");
      else if (code === undefined) Deno.renameSync(`${f}/moved`, `${f}/d1`);
      await run("mv", ["--", `${f}/d1`, `${f}/moved`], GIT);
    },
    [
      "D\td1/new-in-L1",
      "D\td1/sub/z",
      "D\td1/x",
      "D\td1/y",
      "A\tmoved/new-in-L1",
      "A\tmoved/sub/z",
      "A\tmoved/x",
      "A\tmoved/y",
    ],
    (stack, _ov, patch) => {
      assert.doesNotMatch(patch, /^rename (from|to)/m);
      const redirects: string[] = [];
      const walk = (dir: Dir, rel: string) => {
        for (const e of dir.entries()) {
          if (e.kind !== "dir") continue;
          if (dir.xattrAt(e.name, `${xattrPrefix(stack.mode)}redirect`) !== null) {
            redirects.push(`${rel}${e.name}`);
          }
          using child = dir.openDir(e.name);
          walk(child, `${rel}${e.name}/`);
        }
      };
      using upper = Dir.openAbsolute(upperOf(stack, "ov"));
      walk(upper, "");
      assert.deepEqual(redirects, []);
      assert.equal(upper.statAt("d1")?.kind, "char", "d1 is whited out in the upper dir");
    },
  );
});

Deno.test({
  name: "overlay fork: a mode change alone is captured as one",
  permissions: perms,
}, async () => {
  await edgeCase(
    (f) => {
      Deno.chmodSync(`${f}/plain.sh`, 0o755);
      Deno.chmodSync(`${f}/exec.sh`, 0o644);
      Deno.chmodSync(`${f}/a.txt`, 0o600);
    },
    ["M\texec.sh", "M\tplain.sh"],
    (_stack, _ov, patch) => {
      assert.match(
        patch,
        /^diff --git a\/plain.sh b\/plain.sh\nold mode 100644\nnew mode 100755\n/m,
      );
      assert.match(patch, /^diff --git a\/exec.sh b\/exec.sh\nold mode 100755\nnew mode 100644\n/m);
      assert.doesNotMatch(patch, /a\.txt/);
    },
  );
});

Deno.test({
  name: "overlay fork: hard links made inside the fork are captured as the files they are",
  permissions: perms,
}, async () => {
  await edgeCase(
    (f) => {
      Deno.linkSync(`${f}/d1/x`, `${f}/x-link`);
      Deno.writeTextFileSync(`${f}/fresh`, "fresh\n");
      Deno.linkSync(`${f}/fresh`, `${f}/d2/fresh-link`);
    },
    ["A\tfresh", "A\td2/fresh-link", "A\tx-link"],
    (stack) => {
      // Linking a lower file copied it up first.
      assert.equal(text(`${upperOf(stack, "ov")}/d1/x`), "x\n");
    },
  );
});

Deno.test({
  name: "overlay fork: a directory removed and made again is opaque and compared whole",
  permissions: perms,
}, async () => {
  await edgeCase(
    (f) => {
      Deno.removeSync(`${f}/d1`, { recursive: true });
      Deno.mkdirSync(`${f}/d1`);
      Deno.writeTextFileSync(`${f}/d1/x`, "x\n");
      Deno.writeTextFileSync(`${f}/d1/brand-new`, "new\n");
    },
    ["D\td1/new-in-L1", "D\td1/sub/z", "D\td1/y", "A\td1/brand-new"],
    (stack, ov) => {
      using upper = Dir.openAbsolute(upperOf(stack, "ov"));
      assert.deepEqual(upper.xattrAt("d1", `${xattrPrefix(stack.mode)}opaque`), enc.encode("y"));
      const c = ov.fork.candidates();
      assert.equal(c.kind, "tree");
      if (c.kind === "tree" && c.tree !== "all") assert.equal(c.tree.get("d1"), "all");
    },
  );
});

Deno.test({
  name: "overlay fork: deleting a lower layer's file leaves a whiteout that capture reads",
  permissions: perms,
}, async () => {
  await edgeCase(
    (f) => {
      Deno.removeSync(`${f}/d1/sub/z`);
      Deno.removeSync(`${f}/link`);
    },
    ["D\td1/sub/z", "D\tlink"],
    (stack, ov) => {
      const st = Deno.lstatSync(`${upperOf(stack, "ov")}/d1/sub/z`);
      assert.equal(st.isCharDevice, true);
      assert.equal(st.rdev, 0);
      // The candidates are exactly what the upper dir holds.
      const c = ov.fork.candidates();
      assert.ok(c.kind === "tree" && c.tree !== "all");
      const flat = (t: ReadonlyMap<string, unknown>, rel = ""): string[] =>
        [...t].flatMap(([k, v]) =>
          v instanceof Map ? [`${rel}${k}/`, ...flat(v, `${rel}${k}/`)] : [`${rel}${k}`]
        );
      assert.deepEqual(flat(c.tree).sort(), ["d1/", "d1/sub/", "d1/sub/z", "link"]);
      using upper = Dir.openAbsolute(upperOf(stack, "ov"));
      assert.deepEqual(upperCandidates(upper, stack.mode), c.tree);
    },
  );
});

Deno.test({
  name: "overlay fork: a nested .git made inside the fork is rejected, found in the upper dir",
  permissions: perms,
}, () => {
  for (const rel of ["d1/.git", "d1/sub/.git", "newdir/deeper/.git", "build/.git"]) {
    using stack = Stack.make(EDGE_STACK);
    const ov = stack.overlayFork("ov");
    Deno.mkdirSync(`${ov.path}/${rel}`, { recursive: true });
    Deno.writeTextFileSync(`${ov.path}/${rel}/HEAD`, "ref: refs/heads/main\n");
    const err = throwsA(() => stack.capture(ov), RejectedError);
    assert.equal(err.reason, `nested .git at ${rel}`);
  }
});

Deno.test({
  name: "overlay fork: a same-size edit with its mtime put back is still captured",
  permissions: perms,
}, async () => {
  await edgeCase(async (f) => {
    const before = Deno.lstatSync(`${f}/d1/x`).mtime!;
    Deno.writeTextFileSync(`${f}/d1/x`, "X\n");
    Deno.utimeSync(`${f}/d1/x`, before, before);
    await Promise.resolve();
  }, ["M\td1/x"]);
});

Deno.test({
  name: "overlay fork: ignored new paths are skipped exactly as in a copy fork",
  permissions: perms,
}, async () => {
  await edgeCase((f) => {
    Deno.writeTextFileSync(`${f}/new.log`, "ignored\n");
    Deno.mkdirSync(`${f}/build/out`, { recursive: true });
    Deno.writeTextFileSync(`${f}/build/out/o`, "ignored\n");
    Deno.writeTextFileSync(`${f}/d1/kept.txt`, "kept\n");
  }, ["A\td1/kept.txt"]);
});

Deno.test({
  name: "overlay fork: a branch's umount fails while splitfs holds the fork, and umount -l " +
    "leaves capture reading the same overlay",
  permissions: perms,
}, async () => {
  using stack = Stack.make(EDGE_STACK);
  const ov = stack.overlayFork("ov");
  Deno.writeTextFileSync(`${ov.path}/a.txt`, "edited\n");
  Deno.removeSync(`${ov.path}/d2/w`);
  const want = ["D\td2/w", "M\ta.txt"];
  const before = stack.capture(ov);
  assert.deepEqual(files(before), want);

  const plain = await new Deno.Command("umount", {
    args: [ov.path],
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.notEqual(plain.code, 0);
  assert.match(dec.decode(plain.stderr), /busy/i);
  assert.notEqual(findRecordedMount(ov.fork.mount!), null);
  assert.deepEqual(stack.capture(ov).patch, before.patch);

  await run("umount", ["-l", ov.path], GIT);
  assert.equal(findRecordedMount(ov.fork.mount!), null, "detached from the mount table");
  // The path now shows the empty mount point; the held descriptor still reads the overlay.
  assert.deepEqual([...Deno.readDirSync(ov.path)], []);
  Deno.writeTextFileSync(`${ov.path}/planted`, "on the mount point, not in the fork\n");
  const after = stack.capture(ov);
  assert.deepEqual(after.patch, before.patch);
  const consumer = await stack.applyToBaseCopy(after.patch);
  assert.equal(text(`${consumer}/a.txt`), "edited\n");
  Deno.removeSync(`${ov.path}/planted`);
  // Unmounting a detached fork is done already.
  ov.fork.close();
  unmount(stack.split, "ov", ov.fork.mount!);
});

// ---------------------------------------------------------------------------
// unmount()

Deno.test({
  name: "unmount: verified through mountinfo, and the upper dir is kept",
  permissions: perms,
}, () => {
  using stack = Stack.make(EDGE_STACK);
  const ov = stack.overlayFork("ov");
  Deno.writeTextFileSync(`${ov.path}/kept`, "kept\n");
  const record = ov.fork.mount!;
  assert.equal(record.upper, upperOf(stack, "ov"));
  assert.equal(record.mountPoint, ov.path);
  assert.equal(record.mode, "overlay");
  const m = findMount({ path: ov.path })!;
  assert.equal(m.id, record.mountId);
  assert.deepEqual([m.major, m.minor], [record.major, record.minor]);
  assert.equal(mountOf(ov.fork.dir).id, record.mountId);
  assert.deepEqual(JSON.parse(JSON.stringify(record)), record);
  // The identity is the mounted root's.
  const st = Deno.statSync(ov.path);
  assert.deepEqual(ov.fork.identity.map(Number), [st.dev, st.ino]);

  ov.fork.close();
  unmount(stack.split, "ov", record);
  assert.equal(findMount({ id: record.mountId }), null);
  assert.equal(findRecordedMount(record), null);
  assert.deepEqual([...Deno.readDirSync(ov.path)], []);
  assert.equal(text(`${record.upper}/kept`), "kept\n");
  unmount(stack.split, "ov", record);
});

Deno.test({
  name: "unmount: a busy fork gives MountBusyError naming the path and leaves everything mounted",
  permissions: perms,
}, () => {
  using stack = Stack.make(EDGE_STACK);
  const ov = stack.overlayFork("ov");
  const record = ov.fork.mount!;
  // The fork's own descriptor is still open: busy.
  const err = throwsA(() => unmount(stack.split, "ov", record), MountBusyError);
  assert.equal(err.path, ov.path);
  assert.match(err.message, new RegExp(`^cannot unmount "${ov.path}": it is busy`));
  assert.notEqual(findRecordedMount(record), null);
  assert.equal(text(`${ov.path}/a.txt`), "a from L1\n");
  // A file held open by anyone else keeps it busy too.
  ov.fork.close();
  const file = Deno.openSync(`${ov.path}/d1/x`);
  try {
    throwsA(() => unmount(stack.split, "ov", record), MountBusyError);
    assert.notEqual(findRecordedMount(record), null);
  } finally {
    file.close();
  }
  unmount(stack.split, "ov", record);
  assert.equal(findRecordedMount(record), null);
});

Deno.test({
  name: "unmount: refuses when another mount covers the recorded one",
  permissions: perms,
}, () => {
  using stack = Stack.make(EDGE_STACK);
  const ov = stack.overlayFork("ov");
  const record = ov.fork.mount!;
  ov.fork.close();
  let cover: MountRecord;
  {
    using target = stack.split.openDir("ov");
    cover = mountReadOnly("overlay", stack.layers, target);
  }
  try {
    const err = throwsA(() => unmount(stack.split, "ov", record), Error);
    assert.match(err.message, /is not what is there/);
    assert.notEqual(findRecordedMount(record), null);
    assert.notEqual(findRecordedMount(cover), null);
  } finally {
    unmount(stack.split, "ov", cover);
  }
});

Deno.test({
  name: "OverlayForkStrategy refuses a stack whose options cannot fit one page",
  permissions: perms,
}, () => {
  using stack = Stack.make([{ "a": "a\n" }]);
  const many = Array.from({ length: 300 }, () => stack.layers[0]!);
  const err = throwsA(() => new OverlayForkStrategy("overlay", many), Error);
  assert.match(err.message, /over the 4096-byte page mount\(2\) accepts/);
  const target = stack.split.openDir("base");
  try {
    throwsA(() => mountReadOnly("overlay", many, target), Error);
  } finally {
    target.close();
  }
});

// ---------------------------------------------------------------------------
// probeOverlay()

Deno.test({
  name: "probeOverlay: root in the host namespace may use overlay",
  permissions: perms,
}, () => {
  const dir = Deno.makeTempDirSync({ prefix: "marsh-overlay-probe-" });
  try {
    using scratch = Dir.openAbsolute(dir);
    const probe = probeOverlay(scratch);
    assert.equal(probe.mode, "overlay", probe.reason);
    assert.deepEqual([...Deno.readDirSync(dir)], [], "the probe cleans up");
    assert.deepEqual(readMounts().filter((m) => m.mountPoint.startsWith(dir)), []);
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

/** The Deno running these tests: the pinned one (`./bin/deno --which`). */
const denoPath = Deno.execPath();

Deno.test({
  name: "probeOverlay: an unprivileged user is told why overlay is refused",
  permissions: { ...perms, run: ["runuser"] },
}, async () => {
  const top = Deno.makeTempDirSync({ dir: "/work", prefix: "tmp-ovtest-" });
  try {
    Deno.chmodSync(top, 0o777);
    const script = `${top}/probe.ts`;
    Deno.writeTextFileSync(
      script,
      `import { Dir } from ${JSON.stringify(new URL("../fd/dir.ts", import.meta.url).href)};
import { probeOverlay } from ${JSON.stringify(new URL("./overlay.ts", import.meta.url).href)};
using scratch = Dir.openAbsolute(${JSON.stringify(top)});
console.log(JSON.stringify(probeOverlay(scratch)));
`,
    );
    const out = await new Deno.Command("runuser", {
      args: [
        "-u",
        "nobody",
        "--",
        denoPath,
        "run",
        "--quiet",
        "--no-prompt",
        "--allow-ffi",
        script,
      ],
      cwd: top,
      clearEnv: true,
      env: {
        PATH: "/usr/sbin:/usr/bin:/sbin:/bin",
        HOME: top,
        DENO_DIR: `${top}/deno-dir`,
        DENO_NO_UPDATE_CHECK: "1",
      },
      stdout: "piped",
      stderr: "piped",
    }).output();
    assert.equal(out.code, 0, dec.decode(out.stderr));
    const probe = JSON.parse(dec.decode(out.stdout));
    assert.equal(probe.mode, null);
    assert.match(
      probe.reason,
      /^overlay: the daemon may not mount \(not root, no CAP_SYS_ADMIN\);/,
    );
    assert.match(
      probe.reason,
      /; userns-overlay: the daemon may not mount \(not in a user and mount namespace/,
    );
    assert.deepEqual(
      [...Deno.readDirSync(top)].map((e) => e.name).filter((n) => n.startsWith(".marsh")),
      [],
    );
  } finally {
    Deno.removeSync(top, { recursive: true });
  }
});

// ---------------------------------------------------------------------------
// userns-overlay, end to end inside `unshare -Urm`

Deno.test({
  name: "userns-overlay: inside unshare -Urm a fork mounts, edits and captures from its upper dir",
  permissions: perms,
}, async () => {
  const top = Deno.realPathSync(Deno.makeTempDirSync({ prefix: "marsh-overlay-userns-" }));
  try {
    const script = `${top}/userns.ts`;
    const here = (f: string) => JSON.stringify(new URL(f, import.meta.url).href);
    Deno.writeTextFileSync(
      script,
      `import { Dir } from ${here("../fd/dir.ts")};
import { writeChanges } from ${here("../capture/capture.ts")};
import { compareTrees } from ${here("../capture/compare.ts")};
import { mountReadOnly, OverlayForkStrategy, probeOverlay, removeOverlayFork, unmount, xattrPrefix } from ${
        here("./overlay.ts")
      };
const top = ${JSON.stringify(top)};
const enc = new TextEncoder();
using scratch = Dir.openAbsolute(top);
const probe = probeOverlay(scratch);
for (const d of ["L0/d", "L1", "empty", "split/base", "marks"]) Deno.mkdirSync(top + "/" + d, { recursive: true });
Deno.writeTextFileSync(top + "/L0/a.txt", "a\\n");
Deno.writeTextFileSync(top + "/L0/d/x", "x\\n");
Deno.writeTextFileSync(top + "/L0/d/y", "y\\n");
Deno.writeTextFileSync(top + "/L1/b.txt", "b\\n");
using l0 = Dir.openAbsolute(top + "/L0");
using l1 = Dir.openAbsolute(top + "/L1");
using empty = Dir.openAbsolute(top + "/empty");
using split = Dir.openAbsolute(top + "/split");
let baseRecord;
{
  using target = split.openDir("base");
  baseRecord = mountReadOnly("userns-overlay", [l1, l0, empty], target);
}
const base = split.openDir("base");
const fork = new OverlayForkStrategy("userns-overlay", [l1, l0]).create(split, base, "f");
Deno.mkdirSync(top + "/marks/f");
const readyNs = Dir.openAbsolute(top + "/marks").statAt("f").ctimeNs;
const f = top + "/split/f";
Deno.writeTextFileSync(f + "/a.txt", "a changed\\n");
Deno.removeSync(f + "/b.txt");
Deno.removeSync(f + "/d", { recursive: true });
Deno.mkdirSync(f + "/d");
Deno.writeTextFileSync(f + "/d/x", "x\\n");
Deno.writeTextFileSync(f + "/new.txt", "new\\n");
using upper = Dir.openAbsolute(top + "/split/.overlay/f/upper");
const opaque = new TextDecoder().decode(upper.xattrAt("d", xattrPrefix("userns-overlay") + "opaque") ?? new Uint8Array());
const trustedOpaque = upper.xattrAt("d", "trusted.overlay.opaque");
const c = fork.candidates();
const stats = { changedBytes: 0, skippedIgnored: 0, skippedSpecial: 0 };
const parts = [];
const files = [];
writeChanges(compareTrees({ old: base, new: fork.dir, readyNs, nestedGit: "reject", newIgnore: null,
  candidates: c.kind === "tree" ? c.tree : undefined }, stats),
  { patch: (b) => parts.push(new TextDecoder().decode(b)), files: (l) => files.push(l.trim()) }, null, stats);
fork.close();
removeOverlayFork(split, "f", fork.mount);
base.close();
unmount(split, "base", baseRecord);
console.log(JSON.stringify({ probe, strategy: fork.strategy, record: fork.mount, opaque, trustedOpaque, files, patch: parts.join("") }));
`,
    );
    // The child runs in a new user and mount namespace (as root there, so the mounts are its own).
    const out = await new Deno.Command("unshare", {
      args: [
        "-Urm",
        "--",
        denoPath,
        "run",
        "--quiet",
        "--no-prompt",
        "--allow-ffi",
        `--config=${new URL("../../deno.json", import.meta.url).pathname}`,
        `--allow-read=${top}`,
        `--allow-write=${top}`,
        script,
      ],
      cwd: top,
      stdout: "piped",
      stderr: "piped",
    }).output();
    assert.equal(out.code, 0, dec.decode(out.stderr));
    const r = JSON.parse(dec.decode(out.stdout));
    assert.equal(r.probe.mode, "userns-overlay", r.probe.reason);
    assert.match(r.probe.reason, /^overlay: /);
    assert.equal(r.strategy, "userns-overlay");
    assert.equal(r.record.mode, "userns-overlay");
    assert.equal(r.opaque, "y");
    assert.equal(r.trustedOpaque, null);
    assert.deepEqual(r.files.sort(), ["A\tnew.txt", "D\tb.txt", "D\td/y", "M\ta.txt"]);
    // The host never saw the mounts; git apply of the patch on the base gives the fork.
    assert.deepEqual(readMounts().filter((m) => m.mountPoint.startsWith(top)), []);
    const consumer = `${top}/consumer`;
    Deno.mkdirSync(`${consumer}/d`, { recursive: true });
    Deno.writeTextFileSync(`${consumer}/a.txt`, "a\n");
    Deno.writeTextFileSync(`${consumer}/b.txt`, "b\n");
    Deno.writeTextFileSync(`${consumer}/d/x`, "x\n");
    Deno.writeTextFileSync(`${consumer}/d/y`, "y\n");
    Deno.writeTextFileSync(`${top}/p.diff`, r.patch);
    await gitOk(consumer, ["apply", `${top}/p.diff`], GIT);
    assert.deepEqual(
      [...fingerprint(consumer)].map(([k]) => k).sort(),
      ["a.txt", "d", "d/x", "new.txt"],
    );
    assert.equal(text(`${consumer}/a.txt`), "a changed\n");
  } finally {
    Deno.removeSync(top, { recursive: true });
  }
});
