/**
 * `deno task check`'s import-cycle check: builds the import graph of every
 * non-test `.ts` file under the project root and exits 1 on any module or
 * top-level folder cycle, printing each cycle in import order (see
 * `README.md`, "No import cycles"), or on a `model/` module that imports
 * outside `model/` or does I/O (`model_rule.ts`). Exits 2 when the graph
 * cannot be read.
 *
 * Usage: `deno run --allow-read=. --allow-run=./bin/deno tools/import_cycles_main.ts
 * [--root=DIR] [--deno=PATH]`. `--root` defaults to the working directory,
 * `--deno` to `./bin/deno` (the pinned Deno); the run permission must name it.
 *
 * @module
 */

import {
  folderCycles,
  formatCycles,
  importGraph,
  moduleCycles,
  sourceFiles,
} from "./import_cycles.ts";
import { MODEL_DIR, modelViolations } from "./model_rule.ts";

const USAGE = "Usage: import_cycles_main.ts [--root=DIR] [--deno=PATH]";

let root = ".";
let deno = "./bin/deno";
for (const arg of Deno.args) {
  if (arg.startsWith("--root=")) root = arg.slice("--root=".length);
  else if (arg.startsWith("--deno=")) deno = arg.slice("--deno=".length);
  else {
    console.error(`Unknown argument: "${arg}"\n${USAGE}`);
    Deno.exit(2);
  }
}

try {
  const files = await sourceFiles(root);
  const graph = await importGraph(root, files, deno);
  const report = formatCycles(moduleCycles(graph), folderCycles(graph));
  const sources = new Map<string, string>();
  for (const file of files.filter((f) => f.startsWith(`${MODEL_DIR}/`))) {
    sources.set(file, await Deno.readTextFile(`${root}/${file}`));
  }
  const violations = modelViolations(graph, sources);
  if (report !== "" || violations.length > 0) {
    if (report !== "") console.error(report);
    for (const line of violations) console.error(line);
    Deno.exit(1);
  }
  console.error(`No import cycles among ${files.length} modules`);
  if (sources.size > 0) console.error(`${sources.size} model/ modules keep the model rule`);
} catch (error) {
  console.error(`Cannot check import cycles: ${error instanceof Error ? error.message : error}`);
  Deno.exit(2);
}
