import assert from "node:assert/strict";
import { commentRegions, LexError, lexSpans } from "./ts_comments.ts";

const texts = (src: string, kind: "comment" | "string") =>
  lexSpans(src).filter((s) => s.kind === kind).map((s) => src.slice(s.start, s.end));

Deno.test(
  { name: "a // inside a string or a URL template is no comment", permissions: "none" },
  () => {
    const src = `const a = "x // y"; const b = 'p /* q */'; const u = \`unix://\${p}\`; // real\n`;
    assert.deepEqual(texts(src, "comment"), ["// real"]);
    assert.deepEqual(texts(src, "string"), [`"x // y"`, `'p /* q */'`, "`unix://${", "}`"]);
  },
);

Deno.test({
  name: "template literals nest: code, strings and comments in ${}",
  permissions: "none",
}, () => {
  const src = "const t = `a ${f({ k: `b ${'c'}` /* in */ })} d`; /* after */";
  assert.deepEqual(texts(src, "comment"), ["/* in */", "/* after */"]);
  assert.deepEqual(texts(src, "string"), ["`a ${", "`b ${", "'c'", "}`", "} d`"]);
});

Deno.test({
  name: "a regular expression literal hides // and /*; a division does not",
  permissions: "none",
}, () => {
  const src = [
    "const re = /a\\/\\/b[/*]/g; // one",
    "const half = (x) / 2; // two",
    "if (ok) return /\\/\\//.test(s); /* three */",
    "const q = a / b / c; // four",
  ].join("\n");
  assert.deepEqual(texts(src, "comment"), ["// one", "// two", "/* three */", "// four"]);
});

Deno.test({ name: "what does not end is refused, naming its line", permissions: "none" }, () => {
  assert.throws(
    () => lexSpans("const a = 1;\n/* open"),
    new LexError("unterminated comment from line 2"),
  );
  assert.throws(() => lexSpans('x = "open\n"'), new LexError("unterminated string on line 1"));
  assert.throws(
    () => lexSpans("x = `open ${y}"),
    new LexError("unterminated template literal from line 1"),
  );
});

Deno.test({
  name: "consecutive // lines are one region; a code line between splits them",
  permissions: "none",
}, () => {
  const src = "  // a\n  // b\n  x();\n  // c\n/** d */\n";
  assert.deepEqual(commentRegions(src).map((r) => src.slice(r.start, r.end)), [
    "// a\n  // b",
    "// c",
    "/** d */",
  ]);
});
