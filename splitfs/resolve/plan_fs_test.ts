import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import {
  exists,
  fingerprint,
  fingerprintDiff,
  gitOk,
  put,
  type Sandbox,
  sandbox,
} from "../_testing.ts";
import { binary, type Spec, writeSpec } from "../apply/_apply_testing.ts";
import { applyPlan } from "../apply/transaction.ts";
import { Dir } from "../fd/dir.ts";
import { RefusedError, RejectedError } from "../errors.ts";
import { SplitWorkspace } from "../workspace/workspace.ts";
import { isClean, type MergePlan, type PlanEntry } from "../../model/resolution_plan.ts";
import type { PlanFsRequest, PlannedReply } from "../../protocol/splitfs_resolve.ts";

// Real files, real splits (copied and overlay forks: the tests run as root),
// real capture; each plan is applied with the real applier and the project
// compared, byte for byte, with the tree it should become.
const PERMS: Deno.PermissionOptions = {
  ffi: true,
  read: true,
  write: true,
  env: true,
  run: ["git", "awk", "umount"],
};

const POLICIES = ["copy", "auto"] as const;
type Policy = typeof POLICIES[number];

interface Setup {
  readonly sb: Sandbox;
  readonly ws: SplitWorkspace;
  /** The branch's fork, `a`. */
  readonly fork: string;
  [Symbol.dispose](): void;
}

/** A project written from `pre` (a Git repository with it committed when `git`), split, forked as `a`. */
async function setup(
  forks: Policy,
  pre: Spec,
  opts: { git?: boolean; withIgnored?: boolean; extra?: (root: string) => void } = {},
): Promise<Setup> {
  const sb = sandbox("marsh-plan-fs-");
  try {
    writeSpec(sb.root, pre);
    sqlite(`${sb.root}/data.db`, "CREATE TABLE t (k, v); INSERT INTO t VALUES (1, 'base');");
    if (opts.git) {
      const g = { home: sb.home };
      await gitOk(sb.root, ["init", "-q", "-b", "main"], g);
      await gitOk(sb.root, ["add", "-A"], g);
      await gitOk(sb.root, ["commit", "-q", "-m", "pre"], g);
    }
    opts.extra?.(sb.root);
    const ws = SplitWorkspace.create({
      root: sb.root,
      id: "s1",
      forks,
      env: { HOME: sb.home },
      ...(opts.withIgnored ? { withIgnored: true } : {}),
    });
    assert.equal(ws.forkChoice.strategy, forks === "auto" ? "overlay" : "copy");
    const fork = ws.fork("a").path;
    return {
      sb,
      ws,
      fork,
      [Symbol.dispose]() {
        ws.close();
        sb[Symbol.dispose]();
      },
    };
  } catch (error) {
    sb[Symbol.dispose]();
    throw error;
  }
}

/** The project's state, `.marsh` (the split, its forks and store) included. */
const everything = (root: string) => fingerprint(root);

/** Plans, checking that planning changed nothing anywhere under the project. */
function plan(
  s: Setup,
  scope: PlanFsRequest["scope"],
  paths?: string[],
): PlannedReply {
  const before = everything(s.sb.root);
  const reply = s.ws.planFs({
    v: 1,
    t: "plan-fs",
    id: "s1",
    label: "a",
    scope,
    ...(paths ? { paths } : {}),
  });
  assert.deepEqual(fingerprintDiff(before, everything(s.sb.root)), [], "planning changed nothing");
  assert.equal(reply.plan.scope, scope);
  return reply;
}

/** `path op` per entry (`op` with the taken kind), for compact assertions. */
function summary(p: MergePlan): string[] {
  return p.entries.map((e: PlanEntry) =>
    `${e.path} ${e.op}${e.op === "take" ? ` ${e.after.kind}` : ""}${
      e.op === "take" && e.after.kind === "file" ? ` ${e.after.mode.toString(8)}` : ""
    }`
  );
}

/** Applies a clean plan with the taken files' bytes read from the fork, as the service does. */
async function apply(s: Setup, p: MergePlan): Promise<void> {
  assert.ok(isClean(p));
  using fork = Dir.openAbsolute(s.fork);
  const opened: Dir[] = [];
  try {
    await applyPlan(s.sb.root, p, {
      content: (f) => {
        const i = f.path.lastIndexOf("/");
        if (i < 0) return { from: fork, name: f.path };
        const dir = fork.openPath(f.path.slice(0, i));
        opened.push(dir);
        return { from: dir, name: f.path.slice(i + 1) };
      },
    });
  } finally {
    for (const d of opened) d.close();
  }
}

/** The project's tree as a branch result is compared: no `.git`, no `.marsh`. */
function view(root: string, also: (rel: string) => boolean = () => false): Map<string, string> {
  return fingerprint(root, { skip: (rel) => rel === ".git" || rel === ".marsh" || also(rel) });
}

function sqlite(path: string, sql: string): void {
  const db = new DatabaseSync(path);
  try {
    db.exec(sql);
  } finally {
    db.close();
  }
}

const PRE: Spec = {
  "text.txt": { file: "one\ntwo\n" },
  "img.bin": { file: binary(70_000, 1) },
  "run.sh": { file: "#!/bin/sh\necho hi\n" },
  "secret.txt": { file: "s\n", mode: 0o644 },
  "link": { link: "text.txt" },
  "gone/a.txt": { file: "a\n" },
  "gone/deep/b.txt": { file: "b\n" },
  "f2d": { file: "will be a dir\n" },
  "d2f/x.txt": { file: "x\n" },
  "keep/k.txt": { file: "k\n" },
  "keep/also.txt": { file: "also\n" },
  "remade/same.txt": { file: "same\n" },
  "remade/dropped.txt": { file: "dropped\n" },
};

/** Every kind of change a branch can make, in its fork. */
function changeEverything(fork: string): void {
  Deno.writeTextFileSync(`${fork}/text.txt`, "one\nTWO\n");
  const img = binary(70_000, 1);
  img[123] = 255 - img[123]!;
  Deno.writeFileSync(`${fork}/img.bin`, img);
  Deno.chmodSync(`${fork}/run.sh`, 0o755);
  Deno.chmodSync(`${fork}/secret.txt`, 0o600);
  Deno.removeSync(`${fork}/link`);
  Deno.symlinkSync("../elsewhere", `${fork}/link`);
  Deno.removeSync(`${fork}/gone`, { recursive: true });
  Deno.removeSync(`${fork}/f2d`);
  put(fork, "f2d/inner.txt", "inside\n");
  Deno.removeSync(`${fork}/d2f`, { recursive: true });
  Deno.writeTextFileSync(`${fork}/d2f`, "now a file\n");
  Deno.mkdirSync(`${fork}/empty/sub`, { recursive: true });
  put(fork, "keep/new.txt", "new\n");
  // Removed and made again: an overlay fork's upper dir holds it opaque, compared whole.
  Deno.removeSync(`${fork}/remade`, { recursive: true });
  put(fork, "remade/same.txt", "same\n");
  sqlite(`${fork}/data.db`, "INSERT INTO t VALUES (2, 'branch');");
}

const EVERYTHING = [
  "d2f take file 644",
  "d2f/x.txt delete",
  "data.db take file 644",
  "empty take dir",
  "empty/sub take dir",
  "f2d take dir",
  "f2d/inner.txt take file 644",
  "gone delete",
  "gone/a.txt delete",
  "gone/deep delete",
  "gone/deep/b.txt delete",
  "img.bin take file 644",
  "keep/new.txt take file 644",
  "link take symlink",
  "remade/dropped.txt delete",
  "run.sh take file 755",
  "secret.txt take file 600",
  "text.txt take file 644",
];

for (const forks of POLICIES) {
  Deno.test({
    name: `filesystem: every kind of change plans and applies to the branch's tree (${forks})`,
    permissions: PERMS,
  }, async () => {
    using s = await setup(forks, PRE, { git: true });
    changeEverything(s.fork);
    s.ws.capture("a");
    const reply = plan(s, "filesystem");
    assert.deepEqual(summary(reply.plan), EVERYTHING);
    assert.deepEqual([reply.sourceChanges, reply.sourceChangesMore], [[], 0]);
    assert.ok(
      reply.plan.entries.every((e) =>
        e.op !== "take" || e.after.kind !== "file" || e.bytes === "branch"
      ),
    );
    await apply(s, reply.plan);
    assert.deepEqual(fingerprintDiff(view(s.fork), view(s.sb.root)), []);
    // The result is a database SQLite reads.
    const db = new DatabaseSync(`${s.sb.root}/data.db`);
    assert.deepEqual(db.prepare("SELECT v FROM t ORDER BY k").all().map((r) => r.v), [
      "base",
      "branch",
    ]);
    db.close();
    // Planned again, the branch's changes are all in the project.
    assert.ok(plan(s, "filesystem").plan.entries.every((e) => e.op === "converged"));
  });

  Deno.test({
    name:
      `filesystem: a path both sides changed is a conflict; the same change converges (${forks})`,
    permissions: PERMS,
  }, async () => {
    using s = await setup(forks, PRE);
    changeEverything(s.fork);
    s.ws.capture("a");
    const root = s.sb.root;
    Deno.writeTextFileSync(`${root}/text.txt`, "one\nthree\n");
    Deno.chmodSync(`${root}/run.sh`, 0o755);
    put(root, "gone/user.txt", "the user's\n");
    Deno.removeSync(`${root}/f2d`);
    Deno.symlinkSync("text.txt", `${root}/f2d`);
    put(root, "keep/also.txt", "the user edits a file the branch left alone\n");
    put(root, "d2f/x.txt", "the user edits a file in the directory the branch made a file\n");
    const reply = plan(s, "filesystem");
    const got = new Map(reply.plan.entries.map((e) => [e.path, e]));
    const reason = (p: string) => {
      const e = got.get(p)!;
      return e.op === "conflict" ? e.reason : e.op;
    };
    assert.equal(reason("text.txt"), "both sides changed it");
    assert.equal(got.get("run.sh")!.op, "converged");
    assert.equal(reason("gone"), "the source has gone/user.txt in it, which the branch did not");
    assert.equal(reason("f2d"), "both sides changed it");
    assert.match(reason("f2d/inner.txt"), /symlink at f2d|f2d is in conflict/);
    assert.equal(got.get("keep/also.txt"), undefined);
    assert.equal(reason("d2f/x.txt"), "both sides changed it");
    assert.equal(reason("d2f"), "d2f/x.txt below it is in conflict");
    assert.equal(got.get("img.bin")!.op, "take");
    assert.ok(!isClean(reply.plan));
  });

  Deno.test({
    name: `paths: narrows to the paths named; one the branch left alone plans nothing (${forks})`,
    permissions: PERMS,
  }, async () => {
    using s = await setup(forks, PRE);
    changeEverything(s.fork);
    s.ws.capture("a");
    const reply = plan(s, "paths", ["gone", "keep", "text.txt", "run.sh/x", "unchanged.txt"]);
    assert.deepEqual(summary(reply.plan), [
      "gone delete",
      "gone/a.txt delete",
      "gone/deep delete",
      "gone/deep/b.txt delete",
      "keep/new.txt take file 644",
      "text.txt take file 644",
    ]);
    assert.deepEqual(summary(plan(s, "paths", ["gone/deep/b.txt"]).plan), [
      "gone/deep/b.txt delete",
    ]);
    await apply(s, reply.plan);
    const want = view(s.fork, (rel) => !/^(gone|keep|text\.txt)(\/|$)/.test(rel));
    const got = view(s.sb.root, (rel) => !/^(gone|keep|text\.txt)(\/|$)/.test(rel));
    assert.deepEqual(fingerprintDiff(want, got), []);
    assert.equal(Deno.readTextFileSync(`${s.sb.root}/run.sh`), "#!/bin/sh\necho hi\n");
    for (const bad of [["../x"], ["/etc"], [".git/config"], [".marsh"], []]) {
      assert.throws(
        () => s.ws.planFs({ v: 1, t: "plan-fs", id: "s1", label: "a", scope: "paths", paths: bad }),
        RefusedError,
      );
    }
  });

  Deno.test({
    name: `promote: the project becomes the branch's tree; source changes are listed (${forks})`,
    permissions: PERMS,
  }, async () => {
    const pre = { ...PRE, ".gitignore": { file: "*.log\n" }, "old.log": { file: "ignored\n" } };
    using s = await setup(forks, pre, { git: true });
    changeEverything(s.fork);
    put(s.fork, "branch.log", "ignored, and the split did not take ignored files\n");
    s.ws.capture("a");
    const clean = plan(s, "promote");
    assert.deepEqual(summary(clean.plan), EVERYTHING);
    assert.deepEqual([clean.sourceChanges, clean.sourceChangesMore], [[], 0]);
    const root = s.sb.root;
    put(root, "keep/also.txt", "the user edits a file the branch left alone\n");
    put(root, "text.txt", "the user's text\n");
    put(root, "user/new.txt", "the user's new file\n");
    put(root, "user.log", "ignored: never touched\n");
    // An ignored file (which the split did not take) in a directory the branch removed.
    put(root, "gone/deep/cache.log", "ignored\n");
    assert.throws(() => plan(s, "promote"), (e: Error) =>
      e instanceof RefusedError &&
      e.message.includes(
        "promote would remove the directory gone/deep, but it holds " +
          "gone/deep/cache.log, which the split did not cover: move it out",
      ));
    Deno.removeSync(`${root}/gone/deep/cache.log`);
    const reply = plan(s, "promote");
    assert.deepEqual(reply.sourceChanges, ["keep/also.txt", "text.txt", "user", "user/new.txt"]);
    assert.deepEqual(
      summary(reply.plan).filter((l) => /^(keep|text|user)/.test(l)),
      [
        "keep/also.txt take file 644",
        "keep/new.txt take file 644",
        "text.txt take file 644",
        "user delete",
        "user/new.txt delete",
      ],
    );
    await apply(s, reply.plan);
    const logs = (rel: string) => rel.endsWith(".log");
    assert.deepEqual(fingerprintDiff(view(s.fork, logs), view(root, logs)), []);
    assert.equal(Deno.readTextFileSync(`${root}/user.log`), "ignored: never touched\n");
    assert.equal(Deno.readTextFileSync(`${root}/old.log`), "ignored\n");
    assert.ok(!exists(`${root}/branch.log`));
  });

  Deno.test({
    name: `filesystem: ignored files are planned when the split took them (${forks})`,
    permissions: PERMS,
  }, async () => {
    const pre = { ".gitignore": { file: "*.log\nbuild/\n" }, "a.txt": { file: "a\n" } };
    for (const withIgnored of [false, true]) {
      using s = await setup(forks, pre, {
        git: true,
        withIgnored,
        extra: (root) => put(root, "build/out.o", "object\n"),
      });
      put(s.fork, "build/out.o", "object, rebuilt\n");
      put(s.fork, "new.log", "a new ignored file\n");
      put(s.fork, "a.txt", "a, edited\n");
      s.ws.capture("a");
      const got = summary(plan(s, "filesystem").plan);
      assert.deepEqual(
        got,
        withIgnored
          ? ["a.txt take file 644", "build/out.o take file 644", "new.log take file 644"]
          : ["a.txt take file 644"],
      );
    }
  });

  Deno.test({
    name: `plan-fs refuses a branch with no fork or not captured, saying what to do (${forks})`,
    permissions: PERMS,
  }, async () => {
    using s = await setup(forks, PRE);
    const req = (label: string): PlanFsRequest => ({
      v: 1,
      t: "plan-fs",
      id: "s1",
      label,
      scope: "filesystem",
    });
    assert.throws(
      () => s.ws.planFs(req("a")),
      (e: Error) =>
        e instanceof RefusedError &&
        /has no captured result: it is still running \(wait until/.test(e.message),
    );
    assert.throws(
      () => s.ws.planFs(req("zz")),
      (e: Error) =>
        e instanceof RefusedError && /branch zz of split s1 has no fork/.test(e.message),
    );
    assert.throws(
      () => s.ws.planFs({ ...req("a"), parent: { split: "s0", label: "x" } }),
      (e: Error) => e instanceof RefusedError && /made by the project itself/.test(e.message),
    );
    // A capture that was rejected (a nested repository) leaves no result to plan from.
    const b = s.ws.fork("b").path;
    put(b, "vendor/lib/.git/HEAD", "ref: refs/heads/main\n");
    assert.throws(() => s.ws.capture("b"), RejectedError);
    assert.throws(
      () => s.ws.planFs(req("b")),
      (e: Error) => e instanceof RefusedError && /or its result was rejected$/.test(e.message),
    );
  });
}
