/**
 * The service's checkout frames on real snapshot layers
 * (docs/checkpoints.md, "Checkout and commit"): every kind of change
 * planned and applied so the tree becomes the target's, the project's own
 * changes since the base found, ignored entries kept, and the trees no
 * plan can take refused before anything is written.
 */

import assert from "node:assert/strict";
import { Dir } from "../fd/dir.ts";
import { readRel } from "../fd/read_rel.ts";
import { readGitSource } from "../git/git_source.ts";
import { ignoreRulesOf, loadIgnoreInputs } from "../git/ignore_load.ts";
import { ignoreKeyOf, LayerStore } from "../layers/layers.ts";
import { RefusedError } from "../errors.ts";
import { ProjectLocks } from "../project_lock.ts";
import { ProjectRecovery } from "../resolve/recovery.ts";
import {
  fingerprint,
  fingerprintDiff,
  gitProject,
  put,
  run,
  type Sandbox,
  sandbox,
} from "../_testing.ts";
import type { StackRef } from "../../protocol/splitfs_checkout.ts";
import type { CheckoutPlannedReply } from "../../protocol/splitfs_checkout.ts";
import { handleCheckout } from "./frames.ts";

const locks = new ProjectLocks(null);
const recovery = new ProjectRecovery(() => locks, () => {});

/** Everything but `.git`, `.marsh` and the ignored `*.log` files. */
function covered(root: string): Map<string, string> {
  return fingerprint(root, {
    skip: (rel) => rel === ".git" || rel === ".marsh" || rel.endsWith(".log"),
  });
}

function wipe(root: string): void {
  for (const e of Deno.readDirSync(root)) {
    if (e.name !== ".git" && e.name !== ".marsh") {
      Deno.removeSync(`${root}/${e.name}`, { recursive: true });
    }
  }
}

/** The base's tree: one of each kind of entry, and ignored files. */
function buildA(root: string): void {
  wipe(root);
  put(root, ".gitignore", "*.log\n");
  put(root, "same.txt", "same\n");
  put(root, "f2d", "a file, then a directory\n");
  put(root, "d2f/one.txt", "one\n");
  put(root, "d2f/sub/two.txt", "two\n");
  put(root, "mode600.txt", "mode\n");
  put(root, "exe.sh", "#!/bin/sh\n");
  put(root, "gone/a.txt", "a\n");
  put(root, "gone/x.log", "ignored: kept\n");
  put(root, "top.log", "ignored\n");
  put(root, "x.txt", "x\n");
  put(root, "y.txt", "y\n");
  Deno.symlinkSync("x.txt", `${root}/link`);
}

/** The target's tree. */
function buildB(root: string): void {
  wipe(root);
  put(root, ".gitignore", "*.log\n");
  put(root, "same.txt", "same\n");
  put(root, "f2d/inner.txt", "now a directory\n");
  put(root, "d2f", "now a file\n");
  put(root, "mode600.txt", "mode\n", 0o600);
  put(root, "exe.sh", "#!/bin/sh\n", 0o755);
  put(root, "top.log", "ignored\n");
  put(root, "x.txt", "x\n");
  put(root, "y.txt", "y\n");
  Deno.symlinkSync("y.txt", `${root}/link`);
  Deno.mkdirSync(`${root}/empty`);
  // Directories the checkout makes get the target's bits, not the umask's.
  Deno.chmodSync(`${root}/empty`, 0o700);
  Deno.chmodSync(`${root}/f2d`, 0o750);
}

function snapshot(sb: Sandbox): StackRef {
  using root = Dir.openAbsolute(sb.root);
  using marsh = root.ensureDir(".marsh", 0o755);
  using store = LayerStore.open(marsh);
  const git = readGitSource((rel, max) => readRel(root, rel, max))!;
  const inputs = loadIgnoreInputs(root, sb.root, git, { HOME: sb.home });
  const s = store.snapshot({
    source: root,
    ignore: ignoreRulesOf(inputs),
    skipTop: new Set([".marsh"]),
    chain: "tracked",
    ignoreKey: ignoreKeyOf(inputs),
  });
  return { layers: [...s.layers], rootId: s.rootId };
}

interface Trees {
  readonly base: StackRef;
  readonly target: StackRef;
  readonly a: Map<string, string>;
  readonly b: Map<string, string>;
}

async function trees(sb: Sandbox): Promise<Trees> {
  await gitProject(sb, { README: "r\n" });
  buildA(sb.root);
  const base = snapshot(sb);
  const a = covered(sb.root);
  buildB(sb.root);
  const target = snapshot(sb);
  const b = covered(sb.root);
  buildA(sb.root);
  return { base, target, a, b };
}

async function plan(sb: Sandbox, t: Trees, withIgnored = false): Promise<CheckoutPlannedReply> {
  const r = await handleCheckout({
    v: 1,
    t: "checkout-plan",
    root: sb.root,
    target: t.target,
    base: t.base,
    withIgnored,
    env: { HOME: sb.home },
  }, recovery);
  assert.equal(r.t, "checkout-planned", JSON.stringify(r));
  return r as CheckoutPlannedReply;
}

Deno.test("checkout: every kind of change planned and applied; ignored entries kept", async () => {
  using sb = sandbox("marsh-checkout-");
  const t = await trees(sb);
  const before = fingerprint(sb.root, { skip: (rel) => rel === ".git" || rel === ".marsh" });
  const p = await plan(sb, t);
  assert.deepEqual(p.projectChanges, []);
  assert.deepEqual(
    p.plan.entries.map((e) => `${e.op} ${e.path}`),
    [
      "delete d2f/one.txt",
      "delete d2f/sub/two.txt",
      "delete d2f/sub",
      "take d2f",
      "take empty",
      "take exe.sh",
      "take f2d",
      "take f2d/inner.txt",
      "delete gone/a.txt",
      "take link",
      "take mode600.txt",
    ].sort((x, y) => {
      const a = x.split(" ")[1]!, b = y.split(" ")[1]!;
      return a < b ? -1 : a > b ? 1 : 0;
    }),
  );
  // Planning wrote nothing.
  assert.deepEqual(
    fingerprintDiff(before, fingerprint(sb.root, { skip: (r) => r === ".git" || r === ".marsh" })),
    [],
  );
  const applied = await handleCheckout({
    v: 1,
    t: "checkout-apply",
    root: sb.root,
    target: t.target,
    resolution: "c1",
    plan: p.plan,
  }, recovery);
  assert.equal(applied.t, "applied", JSON.stringify(applied));
  // The covered tree is the target's; the ignored files, and the directory holding one, stay.
  const after = covered(sb.root);
  after.delete("gone");
  assert.deepEqual(fingerprintDiff(t.b, after), []);
  assert.equal(Deno.readTextFileSync(`${sb.root}/gone/x.log`), "ignored: kept\n");
  assert.equal(Deno.readTextFileSync(`${sb.root}/top.log`), "ignored\n");
  // Nothing left to do.
  const again = await plan(sb, t);
  assert.deepEqual(again.plan.entries, []);
});

Deno.test("checkout: the project's changes since the base are listed, by content, bits and kind", async () => {
  using sb = sandbox("marsh-checkout-");
  const t = await trees(sb);
  Deno.chmodSync(`${sb.root}/same.txt`, 0o600);
  put(sb.root, "x.txt", "mine\n");
  put(sb.root, "new.txt", "new\n");
  Deno.removeSync(`${sb.root}/link`);
  Deno.symlinkSync("same.txt", `${sb.root}/link`);
  Deno.removeSync(`${sb.root}/d2f`, { recursive: true });
  put(sb.root, "more.log", "ignored: not a change\n");
  // The target's own change, made by hand: a change since the base, but not one checkout undoes.
  Deno.chmodSync(`${sb.root}/mode600.txt`, 0o600);
  const p = await plan(sb, t);
  assert.deepEqual(p.projectChanges, [
    "d2f/one.txt",
    "d2f/sub/two.txt",
    "link",
    "new.txt",
    "same.txt",
    "x.txt",
  ]);
  assert.equal(p.projectChangesMore, 0);
  // With --with-ignored's admission an ignored file the base lacks is a change too.
  const all = await plan(sb, t, true);
  assert.ok(all.projectChanges.includes("more.log"), all.projectChanges.join(","));
});

Deno.test("checkout: a tree no plan can take is refused before anything is written", async () => {
  using sb = sandbox("marsh-checkout-");
  const t = await trees(sb);
  const refused = async (why: RegExp) => {
    const tree = { times: true, skip: (rel: string) => rel === ".marsh" };
    const before = fingerprint(sb.root, tree);
    await assert.rejects(
      () => plan(sb, t),
      (e: Error) => e instanceof RefusedError && why.test(e.message),
    );
    assert.deepEqual(fingerprintDiff(before, fingerprint(sb.root, tree)), []);
  };
  put(sb.root, "d2f/sub/build.log", "ignored, in a directory the target makes a file\n");
  await refused(/replace the directory d2f with a file, but it holds d2f\/sub\/build\.log/);
  Deno.removeSync(`${sb.root}/d2f/sub/build.log`);
  Deno.removeSync(`${sb.root}/y.txt`);
  await run("mkfifo", [`${sb.root}/y.txt`], { home: sb.home });
  await refused(/has a fifo at y\.txt, where the checkpoint has a file/);
});
