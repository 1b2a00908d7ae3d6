/**
 * The git planner entrypoint, run for real through the registry
 * (`runGitPlanner`): the plan it prints is the one the library makes, its
 * failures come back as clear errors, and it writes nothing but objects in
 * the split's objects dir (and its scratch repository, removed).
 */

import assert from "node:assert/strict";
import { isClean } from "../model/resolution_plan.ts";
import { daemonFlags, denoPath, entryCommand, REPO_CONFIG } from "../protocol/entrypoints.ts";
import { EXIT_BAD_REQUEST, GitPlannerError } from "../protocol/git_planner.ts";
import { type MergeInputsReply, resolveFrameToWire } from "../protocol/splitfs_resolve.ts";
import { parsePlanJson } from "../model/resolution_plan_json.ts";
import { inputs, lines, NONE, TestStore } from "../resolve/_store_testing.ts";
import { planSmallMerge } from "../resolve/small_trees.ts";
import { runGitPlanner } from "./git_planner.ts";

/** Every entry under `dir`: path → kind, mode, size, mtime. */
function listing(dir: string, rel = ""): Map<string, string> {
  const out = new Map<string, string>();
  for (const e of Deno.readDirSync(`${dir}/${rel}`)) {
    const p = rel === "" ? e.name : `${rel}/${e.name}`;
    const st = Deno.lstatSync(`${dir}/${p}`);
    out.set(p, `${st.isDirectory ? "d" : "f"} ${st.mode} ${st.size} ${st.mtime?.getTime()}`);
    if (st.isDirectory) { for (const [k, v] of listing(dir, p)) out.set(k, v); }
  }
  return out;
}

async function mergeInputs(s: TestStore): Promise<MergeInputsReply> {
  return {
    v: 1,
    t: "merge-inputs",
    objects: s.objects,
    paths: [
      inputs(
        "src/a.txt",
        await s.file(lines(10)),
        await s.file(lines(10, { 1: "one (source)" })),
        await s.file(lines(10, { 10: "ten (branch)" })),
      ),
      inputs("new.txt", NONE, NONE, await s.file("new\n", 0o755)),
      inputs("link", NONE, NONE, { kind: "symlink", target: "src/a.txt" }),
      inputs("cfg/x", NONE, NONE, await s.file("x\n"), '"cfg" is a file in the source'),
    ],
  };
}

Deno.test("the planner entrypoint gives the library's plan, and writes only objects", async () => {
  using s = await TestStore.create();
  const req = await mergeInputs(s);
  const before = listing(s.top);
  const plan = await runGitPlanner(req, { tmpDir: s.tmp });
  const after = listing(s.top);
  // Nothing but new loose objects under store.git/objects, and tmp/ left empty (its mtime moved).
  const changed = [...after].filter(([p, v]) => before.get(p) !== v).map(([p]) => p);
  const gone = [...before.keys()].filter((p) => !after.has(p));
  assert.deepEqual(gone, []);
  assert.ok(changed.length > 0, "the planner wrote no object");
  for (const p of changed) {
    assert.match(p, /^(tmp|store\.git\/objects(\/[0-9a-f]{2}(\/[0-9a-f]{38})?)?)$/, p);
  }
  assert.deepEqual([...Deno.readDirSync(s.tmp)], []);
  // The same plan as the library's, in process.
  assert.deepEqual(plan, await planSmallMerge(req));
  assert.ok(!isClean(plan)); // the blocked path
  assert.deepEqual(plan.entries.map((e) => [e.path, e.op]), [
    ["cfg/x", "conflict"],
    ["link", "take"],
    ["new.txt", "take"],
    ["src/a.txt", "take"],
  ]);
  const a = plan.entries.find((e) => e.path === "src/a.txt");
  assert.ok(a?.op === "take" && a.after.kind === "file");
  assert.equal(await s.cat(a.after.blob), lines(10, { 1: "one (source)", 10: "ten (branch)" }));
});

Deno.test("a planner failure is an error with its message; its temp dir is removed", async () => {
  using s = await TestStore.create();
  const missing = "1".repeat(40);
  await assert.rejects(
    runGitPlanner({
      v: 1,
      t: "merge-inputs",
      objects: s.objects,
      paths: [inputs("m.txt", NONE, NONE, { kind: "file", mode: 0o644, blob: missing })],
    }, { tmpDir: s.tmp }),
    (e: unknown) => {
      assert.ok(e instanceof GitPlannerError, String(e));
      assert.match(e.message, /^the git planner failed: the small trees cannot be written/);
      return true;
    },
  );
  assert.deepEqual([...Deno.readDirSync(s.tmp)], []);
  // An objects dir that is not one.
  await assert.rejects(
    runGitPlanner({ v: 1, t: "merge-inputs", objects: `${s.top}/nowhere`, paths: [] }, {
      tmpDir: s.tmp,
    }),
    /the git planner failed: object directory .*nowhere cannot be read/,
  );
});

Deno.test("a request the planner cannot read exits 2 with one JSON error line", async () => {
  using s = await TestStore.create();
  const child = entryCommand("planner", { objects: s.objects, tmp: s.tmp }, {
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const w = child.stdin.getWriter();
  await w.write(new TextEncoder().encode(JSON.stringify({ v: 1, objects: "relative", paths: [] })));
  await w.close();
  const out = await child.output();
  assert.equal(out.code, EXIT_BAD_REQUEST);
  const line = new TextDecoder().decode(out.stdout);
  assert.deepEqual(JSON.parse(line), {
    error: "bad request: malformed git planner request frame: objects must be an absolute path",
  });
  assert.equal(line.split("\n").length, 2);
});

Deno.test("an aborted plan stops the planner and removes its temp dir", async () => {
  using s = await TestStore.create();
  const req = await mergeInputs(s);
  const ac = new AbortController();
  const run = runGitPlanner(req, { tmpDir: s.tmp, signal: ac.signal });
  setTimeout(() => ac.abort(new Error("test")), 20);
  await assert.rejects(run, /the git planner was stopped/);
  assert.deepEqual([...Deno.readDirSync(s.tmp)], []);
});

Deno.test("the daemon's own flags let it run the planner, with its temp dir in the control dir", async () => {
  using s = await TestStore.create();
  const home = `${s.top}/home-marsh`;
  Deno.mkdirSync(`${home}/tmp`, { recursive: true });
  const req = await mergeInputs(s);
  const out = await new Deno.Command(denoPath(), {
    args: [
      "run",
      ...daemonFlags(home, denoPath(), 16),
      `--config=${REPO_CONFIG}`,
      new URL("./testdata/git_planner_run.ts", import.meta.url).pathname,
      JSON.stringify(resolveFrameToWire(req)),
      `${home}/tmp`,
    ],
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
  const plan = parsePlanJson(JSON.parse(new TextDecoder().decode(out.stdout)));
  assert.deepEqual(plan, await planSmallMerge(req));
  assert.deepEqual([...Deno.readDirSync(`${home}/tmp`)], []);
});
