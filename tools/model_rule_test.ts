import assert from "node:assert/strict";
import type { ImportGraph } from "./import_cycles.ts";
import { importSpecifiers, modelViolations } from "./model_rule.ts";

const graph = (edges: Record<string, string[]>): ImportGraph => new Map(Object.entries(edges));

Deno.test({
  name: "model rule: model/ importing model/ and pure built-ins passes",
  permissions: {},
}, () => {
  const g = graph({
    "model/a.ts": ["model/b.ts"],
    "model/b.ts": [],
    "daemon/x.ts": ["model/a.ts", "journal/j.ts"],
  });
  const sources = new Map([
    ["model/a.ts", 'import { b } from "./b.ts";\nimport { Buffer } from "node:buffer";\n'],
    [
      "model/b.ts",
      '/** Not `Deno.env`: see `import x from "npm:y"`. */\nexport const b = 1; // Deno.exit\n',
    ],
  ]);
  assert.deepEqual(modelViolations(g, sources), []);
});

Deno.test({ name: "model rule: imports leaving model/ are refused", permissions: {} }, () => {
  const g = graph({
    "model/a.ts": ["model/b.ts", "protocol/frame.ts"],
    "model/b.ts": [],
    "protocol/frame.ts": [],
  });
  const sources = new Map([
    ["model/a.ts", 'import "./b.ts";\nimport { f } from "../protocol/frame.ts";\n'],
    ["model/b.ts", 'export * from "npm:ignore@7";\nconst fs = await import("node:fs");\n'],
  ]);
  const found = modelViolations(g, sources);
  assert.equal(found.length, 3, found.join("\n"));
  assert.match(found[0]!, /^model\/a\.ts imports protocol\/frame\.ts: model\/ may import only/);
  assert.match(found[1]!, /^model\/b\.ts imports "node:fs": model\/ may import only model\//);
  assert.match(found[2]!, /^model\/b\.ts imports "npm:ignore@7"/);
});

Deno.test({ name: "model rule: Deno's I/O in model/ is refused", permissions: {} }, () => {
  const g = graph({ "model/a.ts": [] });
  const sources = new Map([["model/a.ts", "export const home = () => Deno.env.get('HOME');\n"]]);
  assert.deepEqual(modelViolations(g, sources), [
    "model/a.ts uses Deno.env: model/ does no I/O; pass the value in instead",
  ]);
});

Deno.test(
  { name: "import specifiers: static, side-effect, re-export, dynamic", permissions: {} },
  () => {
    const source = `
import a from "./a.ts";
import type { B } from './b.ts';
import "./c.ts";
export { d } from "./d.ts";
const e = await import("./e.ts");
/* import x from "./commented.ts"; */
// import y from "./also_commented.ts";
const url = "https://example.com"; import { f } from "./f.ts";
`;
    assert.deepEqual(importSpecifiers(source), [
      "./a.ts",
      "./b.ts",
      "./c.ts",
      "./d.ts",
      "./e.ts",
      "./f.ts",
    ]);
  },
);

Deno.test({ name: "the tree's model/ obeys the rule", permissions: { read: true } }, async () => {
  // The real folder, read through the same pieces the check uses (the
  // graph from source text here: `deno info` would need --allow-run).
  const root = new URL("../model/", import.meta.url);
  const g = new Map<string, string[]>();
  const sources = new Map<string, string>();
  for await (const entry of Deno.readDir(root)) {
    if (!entry.name.endsWith(".ts") || entry.name.endsWith("_test.ts")) continue;
    const file = `model/${entry.name}`;
    const text = await Deno.readTextFile(new URL(entry.name, root));
    sources.set(file, text);
    g.set(
      file,
      importSpecifiers(text).filter((s) => s.startsWith(".")).map((s) =>
        new URL(s, new URL(file, "file:///r/")).pathname.slice(3)
      ),
    );
  }
  assert.ok(sources.size >= 5, "model/ has its modules");
  assert.deepEqual(modelViolations(g, sources), []);
});
