/**
 * Rewrites the citations of documents the repository does not hold (the specs
 * and DESIGN.md) into citations of our own `docs/`, from `tools/citations.tsv`
 * (see `tools/recite.ts`), then lists every citation left. With `--check` it
 * writes nothing and only lists them: that is the check `deno task check`
 * runs.
 *
 * Looks at every `.ts` and `.md` file under the root except `.deno/`, `.git/`
 * and `node_modules/`; in `.ts` files only comments are rewritten. String
 * literals are checked too, except in {@linkcode STORED_STRINGS}.
 *
 * Exit status: 0 when no citation is left (and, when rewriting, every mapping
 * target exists), 1 when some are left or a target is missing, 2 on a bad
 * argument or an unreadable mapping or file.
 *
 * Usage: `deno run --allow-read=. --allow-write=. tools/recite_main.ts
 * [--check] [--root=DIR] [--map=FILE]`. `--root` defaults to the working
 * directory, `--map` to `<root>/tools/citations.tsv`. `--check` needs only
 * `--allow-read=.`. After a rewrite, run `./bin/deno fmt` on the Markdown files
 * it names.
 *
 * @module
 */

import {
  checkTargets,
  compile,
  type Leftover,
  leftovers,
  parseMapping,
  rewrite,
  STORED_STRINGS,
} from "./recite.ts";

const USAGE = "Usage: recite_main.ts [--check] [--root=DIR] [--map=FILE]";
const SKIP = new Set([".deno", ".git", "node_modules"]);

let root = ".";
let map: string | null = null;
let check = false;
for (const arg of Deno.args) {
  if (arg === "--check") check = true;
  else if (arg.startsWith("--root=")) root = arg.slice("--root=".length);
  else if (arg.startsWith("--map=")) map = arg.slice("--map=".length);
  else {
    console.error(`Unknown argument: "${arg}"\n${USAGE}`);
    Deno.exit(2);
  }
}

/** Every `.ts` and `.md` file under `dir`, relative to the root, sorted. */
async function files(dir: string, rel = ""): Promise<string[]> {
  const out: string[] = [];
  for await (const e of Deno.readDir(dir)) {
    if (SKIP.has(e.name)) continue;
    const path = rel === "" ? e.name : `${rel}/${e.name}`;
    if (e.isDirectory) out.push(...await files(`${dir}/${e.name}`, path));
    else if (e.isFile && (e.name.endsWith(".ts") || e.name.endsWith(".md"))) out.push(path);
  }
  return out.sort();
}

function report(left: readonly Leftover[]): void {
  for (const l of left) console.error(`${l.path}:${l.line}: (${l.where}) ${l.text}`);
}

try {
  const all = await files(root);
  const left: Leftover[] = [];
  let problems: string[] = [];
  if (!check) {
    const citations = parseMapping(await Deno.readTextFile(map ?? `${root}/tools/citations.tsv`));
    const docs = new Map<string, string>();
    for (const f of all) {
      if (/^docs\/[^/]+\.md$/.test(f)) {
        docs.set(f.slice(5), await Deno.readTextFile(`${root}/${f}`));
      }
    }
    problems = checkTargets(citations, docs);
    const compiled = compile(citations);
    let total = 0;
    const markdown: string[] = [];
    for (const f of all) {
      const text = await Deno.readTextFile(`${root}/${f}`);
      const done = rewrite(f, text, compiled);
      if (done.count === 0) continue;
      await Deno.writeTextFile(`${root}/${f}`, done.text);
      total += done.count;
      if (f.endsWith(".md")) markdown.push(f);
      console.error(`${f}: ${done.count} citation${done.count === 1 ? "" : "s"} rewritten`);
    }
    console.error(`${total} citations rewritten`);
    if (markdown.length > 0) console.error(`Now run: ./bin/deno fmt ${markdown.join(" ")}`);
  }
  for (const f of all) {
    const text = await Deno.readTextFile(`${root}/${f}`);
    left.push(...leftovers(f, text, STORED_STRINGS.includes(f)));
  }
  for (const p of problems) console.error(`tools/citations.tsv ${p}`);
  if (left.length > 0) {
    report(left);
    console.error(
      `${left.length} citation${left.length === 1 ? "" : "s"} of a spec or DESIGN.md left: ` +
        `state the rule in docs/ and cite it there (docs/rules.md "..."), ` +
        `or map the citation in tools/citations.tsv and run tools/recite_main.ts`,
    );
  }
  if (left.length > 0 || problems.length > 0) Deno.exit(1);
  if (check) console.error(`No spec or DESIGN.md citations in ${all.length} files`);
} catch (error) {
  console.error(`Cannot recite: ${error instanceof Error ? error.message : error}`);
  Deno.exit(2);
}
