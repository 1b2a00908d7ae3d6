/**
 * The world of the `marsh checkout` acceptance tests (docs/guide.md,
 * "Checking out a checkpoint"): a Git project with a gitignored build dir,
 * a session "fix" made in the journal directly whose start is a real
 * snapshot of the project (ignored files left out, as a session without
 * `--with-ignored` takes it) and whose head is one operation's checkpoint,
 * a real snapshot layer on top. The project itself is left as the start.
 */

import assert from "node:assert/strict";
import { ensureControlDir, JOURNAL_NAME } from "../protocol/control_dir.ts";
import { Journal } from "../journal/journal.ts";
import { Dir } from "../splitfs/fd/dir.ts";
import { readRel } from "../splitfs/fd/read_rel.ts";
import { readGitSource } from "../splitfs/git/git_source.ts";
import { ignoreRulesOf, loadIgnoreInputs } from "../splitfs/git/ignore_load.ts";
import { ignoreKeyOf, LayerStore } from "../splitfs/layers/layers.ts";
import { Sandbox } from "./_acceptance.ts";
import { picture } from "./_resolve.ts";

/** What the tests run with: the CLI, Git, the layer store through FFI. */
export const PERMS: Deno.PermissionOptions = {
  run: true,
  read: true,
  write: true,
  env: true,
  ffi: true,
  sys: ["uid", "gid"],
};

/** The committed files. */
export const FILES = {
  ".gitignore": "build/\n",
  "a.txt": "alpha\n",
  "sub/b.txt": "b\n",
  "keep.txt": "keep\n",
  "same.txt": "same\n",
  "deep/x/y.txt": "y\n",
};

/** The gitignored build state, never in the session. */
export const IGNORED = ["build/out.o", "build/cache/z"];

/**
 * The paths the head's root differs from the start in, as the plan lists
 * them: a content change, a new file, a deletion, a mode change, a symlink,
 * a new directory tree, and a directory tree removed.
 */
export const DIFFERING = [
  "a.txt",
  "deep",
  "deep/x",
  "deep/x/y.txt",
  "keep.txt",
  "link",
  "new.txt",
  "newdir",
  "newdir/deep",
  "newdir/deep/x.txt",
  "sub/b.txt",
];

/** The options of a world. */
export interface WorldOptions {
  /** Files the head adds under `bulk/` (a slow apply, for the tests that race it). */
  readonly bulk?: number;
}

/** A session "fix" whose start is the project and whose head is one operation's change. */
export interface World extends AsyncDisposable {
  readonly sb: Sandbox;
  readonly startId: string;
  readonly head: { readonly id: string; readonly root: string };
  /** The project as the start has it (and as it is when the world is made). */
  readonly pre: Map<string, string>;
  /** The project as the head's root has it (the ignored build dir kept). */
  readonly post: Map<string, string>;
  /** Adds an operation checkpoint on the head whose snapshot `change` makes; the project is left changed. */
  readonly add: (op: string, change: (project: string) => void) => string;
}

function write(path: string, text: string): void {
  const slash = path.lastIndexOf("/");
  Deno.mkdirSync(path.slice(0, slash), { recursive: true });
  Deno.writeTextFileSync(path, text);
}

/** The head's change to the start. */
function change(p: string, bulk: number): void {
  Deno.writeTextFileSync(`${p}/a.txt`, "alpha 2\n");
  Deno.writeTextFileSync(`${p}/new.txt`, "new\n");
  Deno.removeSync(`${p}/keep.txt`);
  Deno.chmodSync(`${p}/sub/b.txt`, 0o755);
  Deno.symlinkSync("a.txt", `${p}/link`);
  write(`${p}/newdir/deep/x.txt`, "x\n");
  Deno.removeSync(`${p}/deep`, { recursive: true });
  for (let i = 0; i < bulk; i++) {
    write(`${p}/bulk/${String(i).padStart(5, "0")}.txt`, `bulk ${i}\n`.repeat(64));
  }
}

/** Its exact inverse. */
function unchange(p: string): void {
  Deno.writeTextFileSync(`${p}/a.txt`, "alpha\n");
  Deno.removeSync(`${p}/new.txt`);
  Deno.writeTextFileSync(`${p}/keep.txt`, "keep\n");
  Deno.chmodSync(`${p}/sub/b.txt`, 0o644);
  Deno.removeSync(`${p}/link`);
  Deno.removeSync(`${p}/newdir`, { recursive: true });
  write(`${p}/deep/x/y.txt`, "y\n");
  try {
    Deno.removeSync(`${p}/bulk`, { recursive: true });
  } catch (error) {
    if (!(error instanceof Deno.errors.NotFound)) throw error;
  }
}

/** A snapshot of the project as a session without `--with-ignored` takes it. */
function snapshot(project: string, home: string): { root: string; layers: string[] } {
  using root = Dir.openAbsolute(project);
  using marsh = root.openDir(".marsh");
  using store = LayerStore.open(marsh);
  const git = readGitSource((rel, max) => readRel(root, rel, max));
  assert.ok(git !== null);
  const inputs = loadIgnoreInputs(root, project, git, { HOME: home });
  const s = store.snapshot({
    source: root,
    ignore: ignoreRulesOf(inputs),
    skipTop: new Set([".marsh"]),
    chain: "tracked",
    ignoreKey: ignoreKeyOf(inputs),
  });
  return { root: s.rootId, layers: [...s.layers] };
}

/** Makes a world (see the module doc). */
export async function world(opts: WorldOptions = {}): Promise<World> {
  const sb = await Sandbox.create({ files: FILES });
  try {
    return setUp(sb, opts.bulk ?? 0);
  } catch (error) {
    await sb[Symbol.asyncDispose]();
    throw error;
  }
}

function setUp(sb: Sandbox, bulk: number): World {
  const p = sb.project;
  for (const rel of IGNORED) write(`${p}/${rel}`, `${rel}\n`);
  Deno.mkdirSync(`${p}/.marsh`);
  Deno.writeTextFileSync(`${p}/.marsh/.gitignore`, "*\n");
  const s1 = snapshot(p, sb.scratch);
  ensureControlDir(sb.home);
  const journal = Journal.open(`${sb.home}/${JOURNAL_NAME}`);
  const session = journal.checkpoints.createSession({
    id: "sess1",
    project: p,
    name: "fix",
    withIgnored: false,
    start: s1,
    createdMs: Date.now(),
  });
  journal.close();
  let n = 0;
  const add = (op: string, edit: (project: string) => void): string => {
    edit(p);
    const s = snapshot(p, sb.scratch);
    const j = Journal.open(`${sb.home}/${JOURNAL_NAME}`);
    try {
      const c = j.checkpoints;
      const head = c.getSession("sess1")!.head;
      const r = c.recordOperation({
        id: op,
        session: "sess1",
        expectedHead: head,
        argv: ["bash", "-c", `edit ${op}`],
        cwd: ".",
        createdMs: Date.now() + n++,
      });
      assert.equal(r.kind, "recorded");
      assert.ok(c.launchOperation(op, Date.now()));
      assert.ok(c.drainOperation(op, { kind: "exited", code: 0 }, Date.now()));
      assert.ok(c.recordIntent(op, {
        root: s.root,
        layer: s.layers[s.layers.length - 1]!,
        changes: "d".repeat(64),
      }, Date.now()));
      const b = c.bindCheckpoint(op, { createdMs: Date.now() });
      if (b.kind !== "bound") throw new Error(`not bound: ${b.kind}`);
      assert.deepEqual(b.checkpoint.layers, s.layers);
      return b.checkpoint.id;
    } finally {
      j.close();
    }
  };
  const pre = picture(p);
  const headId = add("op1", (q) => change(q, bulk));
  const post = picture(p);
  // The project goes back to the start: the head is only in the journal and the layers.
  unchange(p);
  assert.deepEqual(picture(p), pre, "the project is the start again");
  const j = Journal.open(`${sb.home}/${JOURNAL_NAME}`);
  const head = j.checkpoints.getCheckpoint(headId)!;
  j.close();
  return {
    sb,
    startId: session.head,
    head: { id: headId, root: head.root },
    pre,
    post,
    add,
    [Symbol.asyncDispose]: () => sb[Symbol.asyncDispose](),
  };
}

/** Each regular file's inode and mtime, to show which ones a command wrote. */
export function stamps(root: string, paths: readonly string[]): Map<string, string> {
  return new Map(paths.map((rel) => {
    const st = Deno.lstatSync(`${root}/${rel}`);
    return [rel, `${st.ino}:${st.mtime?.getTime()}`];
  }));
}

/** The resolutions `marsh resolutions --json` lists. */
export interface Listed {
  readonly id: string;
  readonly kind: string;
  readonly scope: string;
  readonly state: string;
  readonly paths_changed: number | null;
  readonly checkout?: { session: string; name: string; checkpoint: string } | null;
  readonly message: string | null;
}
