import assert from "node:assert/strict";
import {
  folderCycles,
  folderOf,
  formatCycles,
  graphFromDenoInfo,
  type ImportGraph,
  importGraph,
  moduleCycles,
  sourceFiles,
} from "./import_cycles.ts";

const graph = (edges: Record<string, string[]>): ImportGraph => new Map(Object.entries(edges));

Deno.test({ name: "a DAG has no module or folder cycle", permissions: {} }, () => {
  const g = graph({
    "main.ts": ["client/cli.ts", "protocol/frame.ts"],
    "client/cli.ts": ["protocol/frame.ts", "client/io.ts"],
    "client/io.ts": [],
    "protocol/frame.ts": [],
  });
  assert.deepEqual(moduleCycles(g), []);
  assert.deepEqual(folderCycles(g), []);
  assert.equal(formatCycles([], []), "");
});

Deno.test({ name: "a two-file cycle is found, in import order", permissions: {} }, () => {
  const g = graph({
    "splitfs/overlay.ts": ["splitfs/fork.ts", "splitfs/ffi.ts"],
    "splitfs/fork.ts": ["splitfs/overlay.ts"],
    "splitfs/ffi.ts": [],
  });
  const [cycle, ...rest] = moduleCycles(g);
  assert.deepEqual(rest, []);
  assert.deepEqual(cycle?.files, ["splitfs/fork.ts", "splitfs/overlay.ts"]);
  assert.deepEqual(cycle?.knot, ["splitfs/fork.ts", "splitfs/overlay.ts"]);
  assert.deepEqual(folderCycles(g), [], "one folder: no folder cycle");
});

Deno.test({ name: "a file importing itself is a cycle", permissions: {} }, () => {
  assert.deepEqual(moduleCycles(graph({ "a.ts": ["a.ts"], "b.ts": ["a.ts"] })), [
    { files: ["a.ts"], knot: ["a.ts"], imports: [{ from: "a.ts", to: "a.ts" }] },
  ]);
});

Deno.test({
  name: "a knot shows its shortest cycle and every import inside it",
  permissions: {},
}, () => {
  // d/splits.ts ↔ d/jobs.ts, and d/kits.ts → d/splits.ts → d/names.ts → d/kits.ts.
  const g = graph({
    "d/splits.ts": ["d/jobs.ts", "d/names.ts", "d/leaf.ts"],
    "d/jobs.ts": ["d/splits.ts", "d/leaf.ts"],
    "d/names.ts": ["d/kits.ts"],
    "d/kits.ts": ["d/splits.ts"],
    "d/leaf.ts": [],
    "d/other.ts": ["x/y.ts"],
    "x/y.ts": ["x/z.ts"],
    "x/z.ts": ["x/y.ts"],
  });
  const cycles = moduleCycles(g);
  assert.deepEqual(cycles.map((c) => c.files), [["d/jobs.ts", "d/splits.ts"], [
    "x/y.ts",
    "x/z.ts",
  ]]);
  assert.deepEqual(cycles[0]?.knot, ["d/jobs.ts", "d/kits.ts", "d/names.ts", "d/splits.ts"]);
  assert.deepEqual(cycles[0]?.imports, [
    { from: "d/jobs.ts", to: "d/splits.ts" },
    { from: "d/kits.ts", to: "d/splits.ts" },
    { from: "d/names.ts", to: "d/kits.ts" },
    { from: "d/splits.ts", to: "d/jobs.ts" },
    { from: "d/splits.ts", to: "d/names.ts" },
  ]);
  const report = formatCycles(cycles, []);
  assert.match(report, /^Module cycle: d\/jobs\.ts → d\/splits\.ts → d\/jobs\.ts$/m);
  assert.match(report, /^ {2}d\/names\.ts imports d\/kits\.ts$/m);
  assert.match(report, /^2 module cycle\(s\), 0 folder cycle\(s\)/m);
});

Deno.test({
  name: "a folder cycle through a third folder is found, with the import of each hop",
  permissions: {},
}, () => {
  // No module cycle: each file is imported one way only, yet the folders loop.
  const g = graph({
    "protocol/fork_view.ts": ["splitfs/layout.ts"],
    "splitfs/layout.ts": [],
    "splitfs/client.ts": ["engine/flags.ts"],
    "engine/flags.ts": ["protocol/frame.ts"],
    "engine/other.ts": ["protocol/frame.ts"],
    "protocol/frame.ts": [],
  });
  assert.deepEqual(moduleCycles(g), []);
  assert.deepEqual(folderCycles(g), [{
    folders: ["engine", "protocol", "splitfs"],
    hops: [
      { from: "engine/flags.ts", to: "protocol/frame.ts" },
      { from: "protocol/fork_view.ts", to: "splitfs/layout.ts" },
      { from: "splitfs/client.ts", to: "engine/flags.ts" },
    ],
    knot: ["engine", "protocol", "splitfs"],
  }]);
  const report = formatCycles([], folderCycles(g));
  assert.match(report, /^Folder cycle: engine → protocol → splitfs → engine$/m);
  assert.match(report, /^ {2}protocol\/fork_view\.ts imports splitfs\/layout\.ts$/m);
});

Deno.test({ name: "subfolders belong to their top-level folder", permissions: {} }, () => {
  assert.equal(folderOf("splitfs/git/reader.ts"), "splitfs");
  assert.equal(folderOf("main.ts"), ".");
  const g = graph({
    "splitfs/fork.ts": ["splitfs/git/reader.ts"],
    "splitfs/git/reader.ts": ["splitfs/errors.ts"],
    "splitfs/errors.ts": [],
  });
  assert.deepEqual(folderCycles(g), []);
});

Deno.test({
  name: "deno info's output: project files only, code and type imports both",
  permissions: {},
}, () => {
  const root = "file:///p/";
  const info = {
    modules: [
      { specifier: "data:application/typescript;base64,AA==" },
      {
        specifier: "file:///p/a/x.ts",
        dependencies: [
          { specifier: "commander", code: { specifier: "npm:commander@15.1.0" } },
          { specifier: "../b/y.ts", type: { specifier: "file:///p/b/y.ts" } },
          { specifier: "./z%20w.ts", code: { specifier: "file:///p/a/z%20w.ts" } },
          { specifier: "./z%20w.ts", code: { specifier: "file:///p/a/z%20w.ts" } },
        ],
      },
      { specifier: "file:///p/b/y.ts" },
      { specifier: "file:///p/a/z%20w.ts" },
      { specifier: "npm:commander@15.1.0", error: "npm specifiers were requested" },
      { specifier: "file:///elsewhere/q.ts" },
    ],
  };
  assert.deepEqual(
    graphFromDenoInfo(info, root),
    new Map([["a/x.ts", ["b/y.ts", "a/z w.ts"]], ["b/y.ts", []], ["a/z w.ts", []]]),
  );
  assert.throws(
    () =>
      graphFromDenoInfo(
        { modules: [{ specifier: "file:///p/gone.ts", error: "not found" }] },
        root,
      ),
    /^Error: Cannot load gone\.ts: not found$/,
  );
  assert.throws(() => graphFromDenoInfo({}, root), /no module list/);
});

/** A temporary project holding `files` (path → source), removed on dispose. */
async function project(files: Record<string, string>) {
  const dir = await Deno.makeTempDir({ prefix: "marsh-import-cycles-" });
  for (const [path, source] of Object.entries(files)) {
    await Deno.mkdir(`${dir}/${path}`.replace(/\/[^/]*$/, ""), { recursive: true });
    await Deno.writeTextFile(`${dir}/${path}`, source);
  }
  return { dir, [Symbol.asyncDispose]: () => Deno.remove(dir, { recursive: true }) };
}

const CYCLIC = {
  // A type-only import and a dynamic import are dependencies too.
  "protocol/frame.ts":
    'import type { Layout } from "../splitfs/layout.ts";\nexport let l: Layout;\n',
  "splitfs/layout.ts":
    'export type Layout = string;\nexport const f = () => import("./fork.ts");\n',
  "splitfs/fork.ts": 'import "../protocol/frame.ts";\n',
  // Tests may import anything: they are not walked.
  "splitfs/fork_test.ts": 'import "../main.ts";\n',
  "main.ts": 'import "./splitfs/fork.ts";\n',
};

Deno.test({
  name: "the real graph of a small project: test files left out, cycles found",
  permissions: { read: true, write: true, run: true },
}, async () => {
  await using p = await project(CYCLIC);
  const files = await sourceFiles(p.dir);
  assert.deepEqual(files, ["main.ts", "protocol/frame.ts", "splitfs/fork.ts", "splitfs/layout.ts"]);
  const g = await importGraph(p.dir, files, Deno.execPath());
  assert.deepEqual(g.get("splitfs/layout.ts"), ["splitfs/fork.ts"]);
  assert.deepEqual(moduleCycles(g).map((c) => c.files), [[
    "protocol/frame.ts",
    "splitfs/layout.ts",
    "splitfs/fork.ts",
  ]]);
  assert.deepEqual(folderCycles(g).map((c) => c.folders), [["protocol", "splitfs"]]);
});

async function runMain(dir: string) {
  const deno = Deno.execPath();
  const main = new URL("./import_cycles_main.ts", import.meta.url).pathname;
  const output = await new Deno.Command(deno, {
    // The permissions `deno task check` grants, and no more.
    args: ["run", "--no-prompt", "--allow-read=.", `--allow-run=${deno}`, main, `--deno=${deno}`],
    cwd: dir,
  }).output();
  return { code: output.code, stderr: new TextDecoder().decode(output.stderr) };
}

Deno.test({
  name: "the check exits 1 with the cycles, and 0 once they are untied",
  permissions: { read: true, write: true, run: true },
}, async () => {
  await using p = await project(CYCLIC);
  const failed = await runMain(p.dir);
  assert.equal(failed.code, 1, failed.stderr);
  assert.match(
    failed.stderr,
    /^Module cycle: protocol\/frame\.ts → splitfs\/layout\.ts → splitfs\/fork\.ts → protocol\/frame\.ts$/m,
  );
  assert.match(failed.stderr, /^Folder cycle: protocol → splitfs → protocol$/m);
  // The cure the report suggests: the shared type moves to a leaf both import.
  await Deno.writeTextFile(`${p.dir}/protocol/layout.ts`, "export type Layout = string;\n");
  await Deno.writeTextFile(
    `${p.dir}/protocol/frame.ts`,
    'import type { Layout } from "./layout.ts";\nexport let l: Layout;\n',
  );
  const passed = await runMain(p.dir);
  assert.equal(passed.code, 0, passed.stderr);
  assert.equal(passed.stderr, "No import cycles among 5 modules\n");
});

Deno.test({
  name: "an import that does not resolve stops the check (exit 2), not a silent pass",
  permissions: { read: true, write: true, run: true },
}, async () => {
  await using p = await project({ "a/x.ts": 'import "./missing.ts";\n' });
  const result = await runMain(p.dir);
  assert.equal(result.code, 2, result.stderr);
  assert.match(result.stderr, /^Cannot check import cycles: .*missing\.ts/m);
});

Deno.test({
  name: "the check exits 1 when a model/ module imports outside model/ or does I/O",
  permissions: { read: true, write: true, run: true },
}, async () => {
  await using p = await project({
    "model/rule.ts":
      'import { f } from "../protocol/frame.ts";\nexport const g = () => Deno.cwd() + f;\n',
    "protocol/frame.ts": 'export const f = "";\n',
  });
  const failed = await runMain(p.dir);
  assert.equal(failed.code, 1, failed.stderr);
  assert.match(
    failed.stderr,
    /^model\/rule\.ts imports protocol\/frame\.ts: model\/ may import only/m,
  );
  assert.match(failed.stderr, /^model\/rule\.ts uses Deno\.cwd: model\/ does no I\/O/m);
  await Deno.writeTextFile(`${p.dir}/model/rule.ts`, "export const g = (cwd: string) => cwd;\n");
  const passed = await runMain(p.dir);
  assert.equal(passed.code, 0, passed.stderr);
  assert.equal(
    passed.stderr,
    "No import cycles among 2 modules\n1 model/ modules keep the model rule\n",
  );
});
