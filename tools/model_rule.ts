/**
 * The rule that keeps `model/` pure (docs/architecture.md, "Which folder
 * owns what"): a non-test module of `model/` imports only other `model/`
 * modules and the few `node:` built-ins that compute without I/O, and
 * never touches `Deno.*` (files, processes, the network, the environment).
 * The later model checker reads exactly these modules, so one stray import
 * would drag a process's I/O into it.
 *
 * The check is pure ({@linkcode modelViolations}): it takes the import
 * graph `import_cycles.ts` builds and the modules' source text.
 * `tools/import_cycles_main.ts` runs it as part of `deno task check`.
 *
 * @module
 */

import { folderOf, type ImportGraph } from "./import_cycles.ts";

/** The folder of pure domain rules. */
export const MODEL_DIR = "model";

/** `node:` built-ins a model module may import: they compute, they do no I/O. */
export const PURE_BUILTINS: ReadonlySet<string> = new Set([
  "node:assert",
  "node:assert/strict",
  "node:buffer",
  "node:path",
  "node:path/posix",
  "node:string_decoder",
  "node:url",
  "node:util",
]);

/** Removes comments, so that a word in a JSDoc (`Deno.env`, `from "x"`) is not code. */
function stripComments(source: string): string {
  return source.replace(/\/\*[\s\S]*?\*\//g, "").replace(/(^|[^:"'`\\])\/\/.*$/gm, "$1");
}

/**
 * The module specifiers a source imports or re-exports: `import … from "x"`,
 * `import "x"`, `export … from "x"` and `import("x")`, in source order.
 */
export function importSpecifiers(source: string): string[] {
  const code = stripComments(source);
  const found: string[] = [];
  const pattern = /\b(?:from\s*|import\s*\(\s*|import\s+)(["'])([^"'\n]+)\1/g;
  for (const m of code.matchAll(pattern)) found.push(m[2]!);
  return found;
}

/**
 * What breaks the model rule, one line each, sorted; empty when nothing
 * does. `graph` is the project's import graph (non-test files); `sources`
 * maps each of its `model/` files to its text.
 */
export function modelViolations(
  graph: ImportGraph,
  sources: ReadonlyMap<string, string>,
): string[] {
  const out: string[] = [];
  for (const [file, targets] of graph) {
    if (folderOf(file) !== MODEL_DIR) continue;
    for (const to of new Set(targets)) {
      if (folderOf(to) !== MODEL_DIR) {
        out.push(`${file} imports ${to}: model/ may import only model/ modules`);
      }
    }
    const source = sources.get(file);
    if (source === undefined) {
      out.push(`${file}: its source was not read`);
      continue;
    }
    for (const spec of new Set(importSpecifiers(source))) {
      if (spec.startsWith("./") || spec.startsWith("../")) continue;
      if (!PURE_BUILTINS.has(spec)) {
        out.push(
          `${file} imports "${spec}": model/ may import only model/ modules and ` +
            `the pure built-ins ${[...PURE_BUILTINS].join(", ")}`,
        );
      }
    }
    const io = /\bDeno\s*\.\s*([A-Za-z_$][\w$]*)/.exec(stripComments(source));
    if (io !== null) {
      out.push(`${file} uses Deno.${io[1]}: model/ does no I/O; pass the value in instead`);
    }
  }
  return out.sort();
}
