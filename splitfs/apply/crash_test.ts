/**
 * Crash tests of the applier (docs/resolution.md, "The recovery rule"): the
 * apply runs as a real process (testdata/apply_main.ts) and is killed with
 * SIGKILL at every step; recovery is then killed too, mid-way, and run
 * again. The tree must be byte-identical (content, modes, symlink targets)
 * to exactly the pre-state or the post-state, as the commit record says.
 */

import assert from "node:assert/strict";
import { fingerprintDiff, sandbox } from "../_testing.ts";
import { blobId, hexOf } from "../git/tree_id.ts";
import { listResolutions } from "./recover.ts";
import { binary, planOf, type Spec, treeOf, treeOfSpec, writeSpec } from "./_apply_testing.ts";

const PERMS = { read: true, write: true, ffi: true, env: true, run: true } as const;
const DRIVER = new URL("./testdata/apply_main.ts", import.meta.url).pathname;
const enc = new TextEncoder();
const dec = new TextDecoder();

/** Every plan kind at once: bytes, the executable bit, symlinks, a delete, file↔directory, nested new dirs, binary. */
const PRE: Spec = {
  "keep.txt": { file: "keep\n" },
  "edit.txt": { file: "old\n" },
  "run.sh": { file: "#!/bin/sh\necho hi\n" },
  "link": { link: "keep.txt" },
  "gone.txt": { file: "bye\n" },
  "f2d": { file: "a file\n" },
  "d2f/a.txt": { file: "a" },
  "d2f/sub/b.txt": { file: "b" },
  "bin.dat": { file: binary(200_000, 7) },
};
const POST: Spec = {
  "keep.txt": { file: "keep\n" },
  "edit.txt": { file: "new\n" },
  "run.sh": { file: "#!/bin/sh\necho hi\n", mode: 0o755 },
  "link": { link: "edit.txt" },
  "newlink": { link: "../outside/x" },
  "f2d/inner.txt": { file: "inner\n" },
  "d2f": { file: "now a file\n" },
  "bin.dat": { file: binary(250_000, 8) },
  "new/deep/er/file.bin": { file: binary(5000, 9) },
};

type Scope = "git" | "filesystem";

/**
 * Writes the plan of PRE → POST and its blobs: in the `git` scope files
 * only, as a Git merge plans (the applier makes and removes directories
 * itself); in the `filesystem` scope every directory made or removed too.
 */
function writeFixture(dir: string, scope: Scope = "git"): void {
  const { plan } = planOf(PRE, POST, { scope, filesOnly: scope === "git" });
  Deno.writeTextFileSync(`${dir}/plan.json`, JSON.stringify(plan));
  Deno.mkdirSync(`${dir}/blobs`);
  for (const w of Object.values(POST)) {
    if (!("file" in w)) continue;
    const bytes = typeof w.file === "string" ? enc.encode(w.file) : w.file;
    Deno.writeFileSync(`${dir}/blobs/${hexOf(blobId(bytes))}`, bytes);
  }
}

interface Run {
  readonly paused: boolean;
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs the driver until it exits, or until it pauses, when it is killed with SIGKILL. */
async function drive(
  args: string[],
  control: string,
  env: Record<string, string> = {},
): Promise<Run> {
  const flag = `${control}/paused`;
  try {
    Deno.removeSync(flag);
  } catch (error) {
    if (!(error instanceof Deno.errors.NotFound)) throw error;
  }
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--quiet",
      "--no-prompt",
      "--allow-read",
      "--allow-write",
      "--allow-ffi",
      "--allow-env",
      DRIVER,
      ...args,
    ],
    env: { MARSH_TEST_PAUSE_DIR: control, ...env },
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const output = child.output();
  let exited = false;
  output.finally(() => exited = true).catch(() => {});
  let paused = false;
  while (!exited) {
    try {
      Deno.statSync(flag);
      paused = true;
      child.kill("SIGKILL");
      break;
    } catch (error) {
      if (!(error instanceof Deno.errors.NotFound)) throw error;
    }
    await new Promise((r) => setTimeout(r, 10));
  }
  const out = await output;
  return { paused, code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
}

const show = (r: Run) => `exit ${r.code}\nstdout: ${r.stdout}\nstderr: ${r.stderr}`;

/** The steps an apply of the fixture passes through, from a run that records them. */
async function recordSteps(scope: Scope): Promise<string[]> {
  using sb = sandbox("marsh-crash-");
  writeSpec(sb.root, PRE);
  writeFixture(sb.top, scope);
  const file = `${sb.top}/steps`;
  const r = await drive(["apply", sb.root, sb.top, "r1"], sb.top, { MARSH_TEST_STEPS: file });
  assert.equal(r.code, 0, show(r));
  assert.deepEqual(fingerprintDiff(treeOfSpec(sb.top, POST), treeOf(sb.root)), []);
  return Deno.readTextFileSync(file).split("\n").filter((l) => l !== "");
}

for (const scope of ["git", "filesystem"] as const) {
  Deno.test({
    name:
      `crash: kill -9 at every step of an apply (${scope} scope), and during recovery, gives exactly the pre- or the post-state`,
    permissions: PERMS,
  }, async (t) => {
    const steps = await recordSteps(scope);
    // begin, staged, ready, each step logged and done, synced, committed, done.
    assert.ok(steps.length > 30, steps.join(" "));
    assert.deepEqual(steps.slice(0, 3), ["begin", "staged", "ready"]);
    assert.deepEqual(steps.slice(-3), ["synced", "committed", "done"]);
    const committedAt = steps.indexOf("committed");
    for (const [i, step] of steps.entries()) {
      await t.step(step, async () => {
        using sb = sandbox("marsh-crash-");
        writeSpec(sb.root, PRE);
        writeFixture(sb.top, scope);
        const pre = treeOf(sb.root);
        const post = treeOfSpec(sb.top, POST);
        const applied = await drive(["apply", sb.root, sb.top, "r1"], sb.top, {
          MARSH_TEST_PAUSE_AT: step,
        });
        assert.ok(applied.paused, show(applied));
        // The first recovery is killed at its second step (when it has one).
        const first = await drive(["recover", sb.root, "r1"], sb.top, {
          MARSH_TEST_PAUSE_AT: "#2",
        });
        assert.ok(first.paused || first.code === 0, show(first));
        const want = i >= committedAt ? "post" : "pre";
        // The next start recovers whatever is left under .marsh/resolve.
        const second = await drive(["recover-all", sb.root], sb.top);
        assert.equal(second.code, 0, show(second));
        const settled = JSON.parse(second.stdout) as Record<string, string>;
        if (first.paused) assert.deepEqual(settled, { r1: want }, show(second));
        else {
          assert.equal(first.stdout.trim(), want, show(first));
          assert.deepEqual(settled, want === "post" ? { r1: "post" } : {}, show(second));
        }
        assert.deepEqual(
          fingerprintDiff(want === "pre" ? pre : post, treeOf(sb.root)),
          [],
          `after ${step}`,
        );
        const res = `${sb.root}/.marsh/resolve/r1`;
        if (want === "pre") assert.deepEqual(listResolutions(sb.root), []);
        else {
          const kept = [...Deno.readDirSync(res)].map((e) => e.name).sort();
          assert.deepEqual(kept, ["backup", "log"]);
        }
        // Recovery is idempotent: once more changes nothing.
        const third = await drive(["recover-all", sb.root], sb.top);
        assert.equal(third.stdout.trim(), want === "post" ? '{"r1":"post"}' : "{}", show(third));
        assert.deepEqual(fingerprintDiff(want === "pre" ? pre : post, treeOf(sb.root)), []);
      });
    }
  });
}

Deno.test({
  name:
    "crash: kill -9 during an undo, recovered, leaves the post-state; the undo then gives the pre-state",
  permissions: PERMS,
}, async () => {
  using sb = sandbox("marsh-crash-");
  writeSpec(sb.root, PRE);
  writeFixture(sb.top);
  const pre = treeOf(sb.root);
  const applied = await drive(["apply", sb.root, sb.top, "r1"], sb.top);
  assert.equal(applied.code, 0, show(applied));
  const post = treeOf(sb.root);
  const killed = await drive(["undo", sb.root, "r1", "u1"], sb.top, {
    MARSH_TEST_PAUSE_AT: "place-20:logged",
  });
  assert.ok(killed.paused, show(killed));
  assert.notDeepEqual(treeOf(sb.root), post, "the undo was killed half-way");
  const rec = await drive(["recover", sb.root, "u1"], sb.top);
  assert.equal(rec.stdout.trim(), "pre", show(rec));
  assert.deepEqual(fingerprintDiff(post, treeOf(sb.root)), []);
  const again = await drive(["undo", sb.root, "r1", "u2"], sb.top);
  assert.equal(again.code, 0, show(again));
  assert.deepEqual(fingerprintDiff(pre, treeOf(sb.root)), []);
});

Deno.test({
  name:
    "crash: kill -9 of an undo after its commit: recovery finishes it and marks the original undone",
  permissions: PERMS,
}, async () => {
  using sb = sandbox("marsh-crash-");
  writeSpec(sb.root, PRE);
  writeFixture(sb.top);
  const pre = treeOf(sb.root);
  const applied = await drive(["apply", sb.root, sb.top, "r1"], sb.top);
  assert.equal(applied.code, 0, show(applied));
  const killed = await drive(["undo", sb.root, "r1", "u1"], sb.top, {
    MARSH_TEST_PAUSE_AT: "committed",
  });
  assert.ok(killed.paused, show(killed));
  const rec = await drive(["recover-all", sb.root], sb.top);
  assert.deepEqual(JSON.parse(rec.stdout), { r1: "post", u1: "post" }, show(rec));
  assert.deepEqual(fingerprintDiff(pre, treeOf(sb.root)), []);
  assert.deepEqual([...Deno.readDirSync(`${sb.root}/.marsh/resolve/r1`)].map((e) => e.name), [
    "log",
  ]);
  const again = await drive(["undo", sb.root, "r1", "u2"], sb.top);
  assert.notEqual(again.code, 0);
  assert.match(again.stderr, /resolution r1 was undone already, by u1/);
});
