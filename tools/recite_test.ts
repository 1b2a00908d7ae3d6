import assert from "node:assert/strict";
import {
  asMarkdown,
  checkTargets,
  compile,
  headings,
  leftovers,
  LINE_WIDTH,
  MappingError,
  parseMapping,
  reflow,
  rewrite,
  slug,
} from "./recite.ts";

// Citations are built, never written out, so that this file passes the check it tests.
const S = "spec";
const D = "DESIGN";
const c000 = (s: string) => `${S} 000 §${s}`;

const MAP = [
  "# a comment line, then a blank one",
  "",
  `${c000("1")}\tdocs/rules.md "Branches"`,
  `${c000("13")}\tdocs/engine.md "Capture and verification"`,
  `${c000("4, §6; ")}${S} 004 §8\tdocs/rules.md "Kit jobs"`,
  `${c000("4")}\tdocs/rules.md "Budgets and capabilities"`,
  `${D}.md §4\tdocs/architecture.md "Permissions"`,
].join("\n");

const compiled = () => compile(parseMapping(MAP));

Deno.test({ name: "parseMapping: lines, comments and blank lines", permissions: "none" }, () => {
  const m = parseMapping(MAP);
  assert.deepEqual(m.map((c) => [c.line, c.text]), [
    [3, c000("1")],
    [4, c000("13")],
    [5, `${c000("4, §6; ")}${S} 004 §8`],
    [6, c000("4")],
    [7, `${D}.md §4`],
  ]);
});

Deno.test({
  name: "parseMapping: a malformed, repeated or circular line is refused",
  permissions: "none",
}, () => {
  assert.throws(() => parseMapping(`${c000("1")} docs/rules.md "Branches"`), MappingError);
  assert.throws(
    () => parseMapping(`${c000("1")}\tdocs/a.md "A"\n${c000("1")}\tdocs/b.md "B"`),
    new MappingError(`line 2: "${c000("1")}" is mapped already on line 1`),
  );
  assert.throws(() => parseMapping(`issue 3 §4\tdocs/a.md "A"`), /cites neither/);
  assert.throws(() => parseMapping(`${c000("1")}\tsee ${c000("2")}`), /cites a spec again/);
});

Deno.test({ name: "rewrite: only comments change, strings stay", permissions: "none" }, () => {
  const src = [
    `/** The pool (${c000("4")}). */`,
    `const name = "kept (${c000("4")})";`,
    `run(); // budgets (${c000("4")})`,
    "",
  ].join("\n");
  const out = rewrite("daemon/pool.ts", src, compiled());
  assert.equal(out.count, 2);
  assert.equal(
    out.text,
    [
      `/** The pool (docs/rules.md "Budgets and capabilities"). */`,
      `const name = "kept (${c000("4")})";`,
      `run(); // budgets (docs/rules.md "Budgets and capabilities")`,
      "",
    ].join("\n"),
  );
  assert.deepEqual(leftovers("daemon/pool.ts", out.text).map((l) => [l.line, l.where]), [
    [2, "string"],
  ]);
  assert.deepEqual(leftovers("daemon/pool.ts", out.text, true), []);
});

Deno.test({
  name: "rewrite: a citation over a line break, in /** */ and in // lines",
  permissions: "none",
}, () => {
  const src = [
    "/**",
    ` * Uncertain jobs keep their slots (${c000("4,")}`,
    ` * §6; ${S} 004 §8) until a reset.`,
    " */",
    `  // the pool (${S} 000`,
    "  // §4) again",
    "",
  ].join("\n");
  const out = rewrite("daemon/jobs.ts", src, compiled());
  assert.equal(out.count, 2);
  assert.equal(
    out.text,
    [
      "/**",
      ` * Uncertain jobs keep their slots (docs/rules.md "Kit jobs") until a reset.`,
      " */",
      `  // the pool (docs/rules.md "Budgets and capabilities") again`,
      "",
    ].join("\n"),
  );
});

Deno.test(
  { name: "rewrite: §1 is not the head of §13, nor a list's head", permissions: "none" },
  () => {
    const src = `// a (${c000("13")}), b (${c000("1")}), c (${c000("1, §8")})\n`;
    const out = rewrite("x.ts", src, compiled());
    assert.equal(
      out.text,
      `// a (docs/engine.md "Capture and verification"), b (docs/rules.md "Branches"), c (${
        c000("1, §8")
      })\n`,
    );
    assert.deepEqual(leftovers("x.ts", out.text).map((l) => l.where), ["comment"]);
  },
);

Deno.test({ name: "rewrite: running it again changes nothing", permissions: "none" }, () => {
  const src = `/** A (${c000("4")}), B (${D}.md §4). */\nexport const x = 1;\n`;
  const once = rewrite("a.ts", src, compiled());
  const twice = rewrite("a.ts", once.text, compiled());
  assert.equal(once.count, 2);
  assert.deepEqual(twice, { text: once.text, count: 0 });
});

Deno.test({
  name: "rewrite: a line made too long is reflowed into its paragraph",
  permissions: "none",
}, () => {
  const src = [
    "/**",
    ` * The split branch pool (${c000("4")}): at most 8 concurrent branches per`,
    " * creating session.",
    " *",
    " * @module",
    " */",
    `/** Open connections one attempt may hold on its socket, idle ones included (${
      c000("4")
    }). */`,
    "",
  ].join("\n");
  const out = rewrite("daemon/pool.ts", src, compiled()).text;
  assert.equal(
    out,
    [
      "/**",
      ` * The split branch pool (docs/rules.md "Budgets and capabilities"): at most 8 concurrent branches`,
      " * per creating session.",
      " *",
      " * @module",
      " */",
      "/**",
      " * Open connections one attempt may hold on its socket, idle ones included (docs/rules.md",
      ` * "Budgets and capabilities").`,
      " */",
      "",
    ].join("\n"),
  );
  for (const l of out.split("\n")) assert.ok(l.length <= LINE_WIDTH, l);
});

Deno.test(
  { name: "reflow: unchanged lines and code lines are left alone", permissions: "none" },
  () => {
    const long = `const x = 1; // ${"word ".repeat(30)}`;
    const comment = ` * ${"word ".repeat(30)}`;
    assert.deepEqual(reflow([long, comment], new Set([0])), [long, comment]);
    assert.deepEqual(reflow([comment], new Set()), [comment]);
  },
);

Deno.test(
  { name: "rewrite: Markdown gets links, relative to the file", permissions: "none" },
  () => {
    const md = `See the pool (${c000("4")}) and the flags (${D}.md §4).\n`;
    assert.equal(
      rewrite("docs/guide.md", md, compiled()).text,
      'See the pool ([rules.md, "Budgets and capabilities"](rules.md#budgets-and-capabilities)) and ' +
        'the flags ([architecture.md, "Permissions"](architecture.md#permissions)).\n',
    );
    assert.equal(
      asMarkdown('docs/rules.md "Cancel"', "README.md"),
      '[rules.md, "Cancel"](docs/rules.md#cancel)',
    );
    assert.equal(
      asMarkdown('docs/rules.md "Cancel"', "docs/rules.md"),
      '[rules.md, "Cancel"](#cancel)',
    );
  },
);

Deno.test({ name: "slug and headings follow GitHub's anchors", permissions: "none" }, () => {
  assert.equal(
    slug("Inside a Kit job: /run/marsh, marsh split and marsh join"),
    "inside-a-kit-job-runmarsh-marsh-split-and-marsh-join",
  );
  assert.equal(slug("An argv branch (Kit container)"), "an-argv-branch-kit-container");
  assert.deepEqual(headings("# A\ntext\n```\n# not one\n```\n### B ##\n"), ["A", "B"]);
});

Deno.test(
  { name: "checkTargets: a missing document or heading is named", permissions: "none" },
  () => {
    const docs = new Map([["rules.md", "# Rules\n## Branches\n## Kit jobs\n"]]);
    const m = parseMapping(
      [
        `${c000("1")}\tdocs/rules.md "Branches"`,
        `${c000("2")}\tdocs/rules.md "Nowhere"`,
        `${c000("3")}\tdocs/gone.md "X"`,
        `${c000("5")}\tsomewhere else`,
      ].join("\n"),
    );
    assert.deepEqual(checkTargets(m, docs), [
      'line 2: docs/rules.md has no heading "Nowhere"',
      "line 3: docs/gone.md does not exist",
      'line 4: "somewhere else" names no docs/X.md "Heading"',
    ]);
  },
);

Deno.test({
  name: "the project's mapping parses and every target exists",
  permissions: { read: true },
}, async () => {
  const root = new URL("..", import.meta.url).pathname;
  const citations = parseMapping(await Deno.readTextFile(`${root}tools/citations.tsv`));
  const docs = new Map<string, string>();
  for await (const e of Deno.readDir(`${root}docs`)) {
    if (e.isFile && e.name.endsWith(".md")) {
      docs.set(e.name, await Deno.readTextFile(`${root}docs/${e.name}`));
    }
  }
  assert.ok(citations.length > 0);
  assert.deepEqual(checkTargets(citations, docs), []);
});
