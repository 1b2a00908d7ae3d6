/**
 * The resolution frames through the real split-filesystem service: a Git
 * project split and captured by the service, the inputs of a `--git` merge,
 * plans applied with bytes from the store and from the branch's fork, a
 * refusal that leaves the tree byte-identical, and an undo.
 */

import assert from "node:assert/strict";
import { blobId } from "../../patch/blob_id.ts";
import type { MergePlan, PlanEntry, Signature } from "../../model/resolution_plan.ts";
import type { CreatedReply, ForkedReply } from "../../protocol/splitfs.ts";
import type {
  AppliedReply,
  ApplyRefusedReply,
  MergeInputsReply,
  PathInputs,
} from "../../protocol/splitfs_resolve.ts";
import { SplitfsError, SplitfsService } from "../../protocol/splitfs_client.ts";
import { exists, fingerprintDiff, gitProject, put, sandbox, text } from "../_testing.ts";
import { treeOf } from "../apply/_apply_testing.ts";

const PERMS: Deno.PermissionOptions = { run: true, read: true, write: true, env: true };
const enc = new TextEncoder();
const id = (s: string) => blobId(enc.encode(s));
const file = (content: string, mode = 0o644): Signature => ({
  kind: "file",
  mode,
  blob: id(content),
});
const ABSENT: Signature = { kind: "absent" };

const BASE: Record<string, string> = {
  "mod.txt": "one\ntwo\n",
  "del.txt": "delete me\n",
  "run.sh": "#!/bin/sh\necho hi\n",
  "dirty.txt": "clean\n",
  "keep.txt": "keep\n",
  "sub/deep.txt": "deep\n",
};

interface Split {
  readonly svc: SplitfsService;
  readonly root: string;
  readonly created: CreatedReply;
  readonly fork: string;
}

/**
 * A Git project split by the service, with branch `a` changed and captured:
 * a modified, an added, a deleted, a chmod'ed file, a changed and an added
 * symlink, two paths the source blocks, and one the source edits after.
 */
async function splitWithBranch(
  sb: { root: string; home: string },
  svc: SplitfsService,
): Promise<Split> {
  await gitProject(sb as Parameters<typeof gitProject>[0], BASE);
  Deno.symlinkSync("keep.txt", `${sb.root}/link`);
  const created = await svc.request<CreatedReply>({
    v: 1,
    t: "create",
    id: "s1",
    cwd: sb.root,
    env: { HOME: sb.home },
    withIgnored: false,
    forks: "auto",
  });
  const f = await svc.request<ForkedReply>({ v: 1, t: "fork", id: "s1", label: "a" });
  put(f.path, "mod.txt", "one\n2\n");
  put(f.path, "new.bin", new Uint8Array([0, 1, 2, 255]));
  Deno.removeSync(`${f.path}/del.txt`);
  Deno.chmodSync(`${f.path}/run.sh`, 0o755);
  Deno.removeSync(`${f.path}/link`);
  Deno.symlinkSync("mod.txt", `${f.path}/link`);
  Deno.symlinkSync("sub/deep.txt", `${f.path}/newlink`);
  put(f.path, "d/inner.txt", "inner\n");
  put(f.path, "e", "e is a file\n");
  put(f.path, "dirty.txt", "branch\n");
  await svc.request({ v: 1, t: "capture", id: "s1", label: "a" });
  // The source after the split: a dirty edit, a file where the branch needs a directory, a directory where it adds a file.
  put(sb.root, "dirty.txt", "source\n");
  put(sb.root, "d", "d is a file\n");
  put(sb.root, "e/x.txt", "x\n");
  return { svc, root: sb.root, created, fork: f.path };
}

function byPath(reply: MergeInputsReply): Map<string, PathInputs> {
  return new Map(reply.paths.map((p) => [p.path, p]));
}

Deno.test({
  name: "merge-inputs: every kind of change, a dirty source, blocked paths",
  permissions: PERMS,
}, async () => {
  using sb = sandbox("marsh-resolve-");
  await using svc = SplitfsService.start();
  const s = await splitWithBranch(sb, svc);
  const reply = await svc.request<MergeInputsReply>({
    v: 1,
    t: "merge-inputs",
    id: "s1",
    label: "a",
  });
  assert.equal(reply.objects, `${s.created.dir}/store.git/objects`);
  assert.deepEqual(
    reply.paths.map((p) => p.path),
    ["d/inner.txt", "del.txt", "dirty.txt", "e", "link", "mod.txt", "new.bin", "newlink", "run.sh"],
  );
  const p = byPath(reply);
  assert.deepEqual(p.get("mod.txt"), {
    path: "mod.txt",
    base: file("one\ntwo\n"),
    branch: file("one\n2\n"),
    source: file("one\ntwo\n"),
  });
  assert.deepEqual(p.get("new.bin")?.base, ABSENT);
  assert.deepEqual(p.get("new.bin")?.branch, {
    kind: "file",
    mode: 0o644,
    blob: blobId(new Uint8Array([0, 1, 2, 255])),
  });
  assert.deepEqual(p.get("new.bin")?.source, ABSENT);
  assert.deepEqual(p.get("del.txt")?.branch, ABSENT);
  assert.deepEqual(p.get("del.txt")?.source, file("delete me\n"));
  // A chmod alone: the patch names no blob; both sides hold the same bytes.
  assert.deepEqual(p.get("run.sh")?.base, file("#!/bin/sh\necho hi\n"));
  assert.deepEqual(p.get("run.sh")?.branch, file("#!/bin/sh\necho hi\n", 0o755));
  assert.deepEqual(p.get("link")?.base, { kind: "symlink", target: "keep.txt" });
  assert.deepEqual(p.get("link")?.branch, { kind: "symlink", target: "mod.txt" });
  assert.deepEqual(p.get("link")?.source, { kind: "symlink", target: "keep.txt" });
  assert.deepEqual(p.get("newlink")?.branch, { kind: "symlink", target: "sub/deep.txt" });
  // The dirty source: its bytes as they are, written into the store for Git.
  const dirty = p.get("dirty.txt")!;
  assert.deepEqual(dirty.source, file("source\n"));
  const obj = `${reply.objects}/${id("source\n").slice(0, 2)}/${id("source\n").slice(2)}`;
  assert.ok(exists(obj), `${obj} is in the store`);
  assert.equal(dirty.blocked, undefined);
  assert.equal(p.get("d/inner.txt")?.blocked, "d is a file in the source, not a directory");
  assert.deepEqual(p.get("e")?.source, { kind: "dir" });
  assert.equal(p.get("e")?.blocked, "e is a directory in the source");
  for (const clean of ["mod.txt", "new.bin", "del.txt", "run.sh", "link", "newlink"]) {
    assert.equal(p.get(clean)?.blocked, undefined, clean);
  }
  // A branch captured before capture wrote its raw list: the patch's headers give the same inputs.
  Deno.removeSync(`${s.created.dir}/out/a/raw`);
  assert.deepEqual(
    await svc.request<MergeInputsReply>({ v: 1, t: "merge-inputs", id: "s1", label: "a" }),
    reply,
  );
  await svc.request({ v: 1, t: "remove", id: "s1" });
});

Deno.test({
  name: "merge-inputs: a branch not captured, or a split not open, is refused",
  permissions: PERMS,
}, async () => {
  using sb = sandbox("marsh-resolve-");
  await using svc = SplitfsService.start();
  const s = await splitWithBranch(sb, svc);
  await svc.request({ v: 1, t: "fork", id: "s1", label: "b" });
  await assert.rejects(
    svc.request({ v: 1, t: "merge-inputs", id: "s1", label: "b" }),
    (e) =>
      e instanceof SplitfsError && e.kind === "input" &&
      /branch b of split s1 has no captured result .*wait for it to finish/.test(e.message),
  );
  // A branch whose capture rejected it: its patch is untrusted.
  await svc.request({ v: 1, t: "fork", id: "s1", label: "c" });
  put(`${s.created.dir}/c`, "mod.txt", "from c\n");
  await svc.request({ v: 1, t: "capture", id: "s1", label: "c" });
  await svc.request({
    v: 1,
    t: "publish",
    id: "s1",
    label: "c",
    status: "rejected: admin file changed: config (core.fsmonitor)",
    stdout: null,
    stderr: null,
  });
  await assert.rejects(
    svc.request({ v: 1, t: "merge-inputs", id: "s1", label: "c" }),
    (e) =>
      e instanceof SplitfsError && e.kind === "input" &&
      /branch c of split s1 was rejected: admin file changed.*cannot be merged/.test(e.message),
  );
  await assert.rejects(
    svc.request({ v: 1, t: "merge-inputs", id: "nope", label: "a" }),
    (e) => e instanceof SplitfsError && e.kind === "input" && /no open split nope/.test(e.message),
  );
  await svc.request({ v: 1, t: "remove", id: "s1" });
});

/** The plan taking the branch's mod.txt (from the store), new.bin (from the fork), link, and deleting del.txt. */
function planFrom(reply: MergeInputsReply): MergePlan {
  const p = byPath(reply);
  const take = (path: string, bytes?: "store" | "branch"): PlanEntry => ({
    op: "take",
    path,
    before: p.get(path)!.source,
    after: p.get(path)!.branch as Exclude<Signature, { kind: "absent" }>,
    ...(bytes ? { bytes } : {}),
  });
  const del = p.get("del.txt")!;
  return {
    scope: "git",
    trees: { base: null, source: null, branch: null, result: null },
    entries: [
      {
        op: "delete",
        path: "del.txt",
        before: del.source as Exclude<Signature, { kind: "absent" }>,
      },
      take("link"),
      take("mod.txt", "store"),
      take("new.bin", "branch"),
      take("run.sh", "store"),
    ],
  };
}

Deno.test({
  name: "apply-plan: store and branch bytes, then undo through the frame",
  permissions: PERMS,
}, async () => {
  using sb = sandbox("marsh-resolve-");
  await using svc = SplitfsService.start();
  const s = await splitWithBranch(sb, svc);
  const inputs = await svc.request<MergeInputsReply>({
    v: 1,
    t: "merge-inputs",
    id: "s1",
    label: "a",
  });
  const before = treeOf(s.root);
  const applied = await svc.request<AppliedReply>({
    v: 1,
    t: "apply-plan",
    id: "s1",
    label: "a",
    root: s.created.root,
    resolution: "r1",
    plan: planFrom(inputs),
  });
  assert.deepEqual(applied, { v: 1, t: "applied", resolution: "r1", changed: 5 });
  assert.equal(text(`${s.root}/mod.txt`), "one\n2\n");
  assert.deepEqual(Deno.readFileSync(`${s.root}/new.bin`), new Uint8Array([0, 1, 2, 255]));
  assert.ok(!exists(`${s.root}/del.txt`));
  assert.equal(Deno.readLinkSync(`${s.root}/link`), "mod.txt");
  assert.equal(Deno.statSync(`${s.root}/run.sh`).mode! & 0o777, 0o755);
  assert.equal(
    text(`${s.root}/dirty.txt`),
    "source\n",
    "a path the plan does not name is left alone",
  );
  const after = treeOf(s.root);
  const undone = await svc.request<AppliedReply>({
    v: 1,
    t: "undo-resolution",
    root: s.created.root,
    resolution: "r1",
    by: "u1",
  });
  assert.deepEqual(undone, { v: 1, t: "applied", resolution: "u1", changed: 5 });
  assert.deepEqual(fingerprintDiff(before, treeOf(s.root)), []);
  // Undone already: the applier's refusal, as an error naming the resolution.
  await assert.rejects(
    svc.request({ v: 1, t: "undo-resolution", root: s.created.root, resolution: "r1", by: "u2" }),
    (e) => e instanceof SplitfsError && e.kind === "input" && /r1/.test(e.message),
  );
  assert.notDeepEqual(before, after);
  await svc.request({ v: 1, t: "remove", id: "s1" });
});

Deno.test({
  name: "apply-plan: a path changed after planning is refused, the tree unchanged",
  permissions: PERMS,
}, async () => {
  using sb = sandbox("marsh-resolve-");
  await using svc = SplitfsService.start();
  const s = await splitWithBranch(sb, svc);
  const inputs = await svc.request<MergeInputsReply>({
    v: 1,
    t: "merge-inputs",
    id: "s1",
    label: "a",
  });
  put(s.root, "mod.txt", "edited meanwhile\n");
  const before = treeOf(s.root);
  const refused = await svc.request<ApplyRefusedReply>({
    v: 1,
    t: "apply-plan",
    id: "s1",
    label: "a",
    root: s.created.root,
    resolution: "r2",
    plan: planFrom(inputs),
  });
  assert.equal(refused.t, "apply-refused");
  assert.deepEqual(refused.changed.map((c) => c.path), ["mod.txt"]);
  assert.match(refused.changed[0]!.found, /^file 0644 /);
  assert.match(refused.message, /nothing was changed/);
  assert.deepEqual(fingerprintDiff(before, treeOf(s.root)), []);
  assert.ok(!exists(`${s.root}/.marsh/resolve/r2`));
  // A plan with a conflict, and a root that is not the split's source, are refused too.
  const conflicted: MergePlan = {
    ...planFrom(inputs),
    entries: [{
      op: "conflict",
      path: "mod.txt",
      base: ABSENT,
      source: file("x"),
      branch: file("y"),
      reason: "both sides changed it",
    }],
  };
  await assert.rejects(
    svc.request({
      v: 1,
      t: "apply-plan",
      id: "s1",
      label: "a",
      root: s.created.root,
      resolution: "r3",
      plan: conflicted,
    }),
    (e) =>
      e instanceof SplitfsError &&
      /1 conflicting path\(s\), so nothing was changed: mod.txt/.test(e.message),
  );
  await assert.rejects(
    svc.request({
      v: 1,
      t: "apply-plan",
      id: "s1",
      label: "a",
      root: sb.outside,
      resolution: "r4",
      plan: planFrom(inputs),
    }),
    (e) => e instanceof SplitfsError && /is not the source of split s1/.test(e.message),
  );
  assert.deepEqual(fingerprintDiff(before, treeOf(s.root)), []);
  await svc.request({ v: 1, t: "remove", id: "s1" });
});

Deno.test({
  name: "merge-inputs and apply-plan of a nested split: the source is the creator's fork",
  permissions: PERMS,
}, async () => {
  using sb = sandbox("marsh-resolve-");
  await using svc = SplitfsService.start();
  const s = await splitWithBranch(sb, svc);
  const parent = { split: "s1", label: "a" };
  const nested = await svc.request<CreatedReply>({
    v: 1,
    t: "create",
    id: "n1",
    cwd: s.fork,
    env: { HOME: sb.home },
    withIgnored: false,
    forks: "auto",
    parent,
  });
  const x = await svc.request<ForkedReply>({ v: 1, t: "fork", id: "n1", label: "x" });
  put(x.path, "keep.txt", "kept by x\n");
  await svc.request({ v: 1, t: "capture", id: "n1", label: "x" });
  // The creator's fork moved on meanwhile; the project root did not change keep.txt at all.
  put(s.fork, "mod.txt", "creator edit\n");
  const inputs = await svc.request<MergeInputsReply>({
    v: 1,
    t: "merge-inputs",
    id: "n1",
    label: "x",
    parent,
  });
  assert.equal(inputs.objects, `${nested.dir}/store.git/objects`);
  assert.deepEqual(inputs.paths, [{
    path: "keep.txt",
    base: file("keep\n"),
    branch: file("kept by x\n"),
    source: file("keep\n"),
  }]);
  // Without its creator, a nested split's resolution is refused.
  await assert.rejects(
    svc.request({ v: 1, t: "merge-inputs", id: "n1", label: "x" }),
    (e) => e instanceof SplitfsError && /split n1 was made by s1\/a/.test(e.message),
  );
  const rootBefore = treeOf(sb.root);
  const applied = await svc.request<AppliedReply>({
    v: 1,
    t: "apply-plan",
    id: "n1",
    label: "x",
    root: s.fork,
    resolution: "n-r1",
    parent,
    plan: {
      scope: "git",
      trees: { base: null, source: null, branch: null, result: null },
      entries: [{
        op: "take",
        path: "keep.txt",
        before: file("keep\n"),
        after: file("kept by x\n") as Exclude<Signature, { kind: "absent" }>,
        bytes: "store",
      }],
    },
  });
  assert.equal(applied.changed, 1);
  assert.equal(text(`${s.fork}/keep.txt`), "kept by x\n");
  assert.equal(
    text(`${sb.root}/keep.txt`),
    "keep\n",
    "the project root is not the nested split's source",
  );
  assert.deepEqual(
    fingerprintDiff(rootBefore, treeOf(sb.root)).filter((l) => !l.includes(".marsh")),
    [],
  );
  await svc.request({ v: 1, t: "remove", id: "n1" });
  await svc.request({ v: 1, t: "remove", id: "s1" });
});
