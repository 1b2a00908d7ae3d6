import assert from "node:assert/strict";
import { join } from "node:path";
import { cQuote, quotePrefixed } from "./quote.ts";
import { gitOk, tempDir } from "./_testing.ts";

Deno.test("cQuote() leaves ordinary paths alone", { permissions: {} }, () => {
  for (
    const path of ["a", "dir/file.txt", "a b", " lead", "trail ", "é/日本", "-x", "a'b", "~$#"]
  ) {
    assert.equal(cQuote(path), path);
  }
});

Deno.test("cQuote() escapes like Git's quote_c_style", { permissions: {} }, () => {
  assert.equal(cQuote("a\tb"), '"a\\tb"');
  assert.equal(cQuote("a\nb"), '"a\\nb"');
  assert.equal(cQuote('say "hi"'), '"say \\"hi\\""');
  assert.equal(cQuote("back\\slash"), '"back\\\\slash"');
  assert.equal(cQuote("\x07\b\t\n\v\f\r"), '"\\a\\b\\t\\n\\v\\f\\r"');
  assert.equal(cQuote("\x01\x1b\x1f\x7f"), '"\\001\\033\\037\\177"');
  assert.equal(cQuote("é\t"), '"é\\t"');
});

Deno.test("quotePrefixed() puts the prefix inside the quotes", { permissions: {} }, () => {
  assert.equal(quotePrefixed("a/", "x"), "a/x");
  assert.equal(quotePrefixed("b/", "x y"), "b/x y");
  assert.equal(quotePrefixed("a/", "x\ty"), '"a/x\\ty"');
  assert.equal(quotePrefixed("b/", 'q"'), '"b/q\\""');
  assert.equal(quotePrefixed("a/", "dir /x", { always: true }), '"a/dir /x"');
});

Deno.test("cQuote() matches git ls-files with core.quotePath=false", {
  permissions: { read: true, write: true, run: ["git"], env: ["PATH"] },
}, async () => {
  await using dir = await tempDir();
  const names = [
    "plain",
    "with space",
    "tab\there",
    "new\nline",
    'quote"d',
    "back\\slash",
    "bell\x07",
    "esc\x1b",
    "del\x7f",
    "cr\r",
    "ünïcödé",
  ];
  await gitOk(dir.path, ["init", "--quiet", "."]);
  for (const name of names) await Deno.writeTextFile(join(dir.path, name), name);
  await gitOk(dir.path, ["add", "--all"]);
  const listed = new TextDecoder().decode(
    await gitOk(dir.path, ["-c", "core.quotePath=false", "ls-files"]),
  );
  const expected = names.map(cQuote).sort();
  assert.deepEqual(listed.split("\n").filter((l) => l !== "").sort(), expected);
});
