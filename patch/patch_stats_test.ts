/**
 * `patchStats` against real Git: random changes written by our patch writer,
 * counted by us and by `git apply --numstat` (a property test; it prints its
 * seed). `cUnquote` inverts `cQuote` on every character Git quotes.
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import fc from "fast-check";
import { assertProperty } from "../tests/_property.ts";
import type { FileChange, GitMode } from "./change.ts";
import { gitOk, patchFor, tempDir, utf8 } from "./_testing.ts";
import { parseFilesList, patchStats } from "./patch_stats.ts";
import { cQuote, cUnquote } from "./quote.ts";
import { filesLine } from "./writer.ts";

const GIT_PERMISSIONS = { read: true, write: true, run: ["git"], env: ["PATH"] };

const lineArb = fc.constantFrom("a", "b", "c", "-- x", "++ y", "--- a/z", "+++ b/z", "@@ q", "");
const textArb = fc.array(lineArb, { maxLength: 12 }).map((lines) =>
  utf8(lines.map((l) => l + "\n").join(""))
);
const binaryArb = fc.uint8Array({ minLength: 1, maxLength: 64 }).map((b) => {
  const out = b.slice();
  out[0] = 0;
  return out;
});
const sideArb = fc.record({
  mode: fc.constantFrom<GitMode>(0o100644, 0o100755),
  bytes: fc.oneof({ weight: 4, arbitrary: textArb }, { weight: 1, arbitrary: binaryArb }),
});
const changesArb = fc.uniqueArray(
  fc.record({
    path: fc.constantFrom<string>("a.txt", "b.txt", "d/c.txt", "e f.txt", "bin.dat"),
    old: fc.option(sideArb, { nil: null }),
    new: fc.option(sideArb, { nil: null }),
  }),
  { selector: (c) => c.path, maxLength: 5 },
).map((cs) =>
  (cs as FileChange[]).filter((c) => c.old !== null || c.new !== null)
    .filter((c) =>
      c.old === null || c.new === null || c.old.mode !== c.new.mode ||
      c.old.bytes.join() !== c.new.bytes.join()
    )
    .sort((a, b) => (a.path < b.path ? -1 : 1))
);

Deno.test({
  name: "patchStats counts the lines and binary files git apply --numstat counts",
  permissions: GIT_PERMISSIONS,
  async fn(t) {
    await using dir = await tempDir("marsh_stats_");
    await assertProperty(
      t,
      fc.asyncProperty(changesArb, async (changes) => {
        const { patch } = patchFor(changes);
        const ours = patchStats(patch);
        const file = join(dir.path, "p.patch");
        await Deno.writeFile(file, patch);
        let added = 0, removed = 0, binary = 0, rows = 0;
        if (patch.length > 0) {
          const out = new TextDecoder().decode(await gitOk(dir.path, ["apply", "--numstat", file]));
          for (const row of out.split("\n").filter((r) => r !== "")) {
            rows++;
            const [a, r] = row.split("\t");
            if (a === "-") binary++;
            else {
              added += Number(a);
              removed += Number(r);
            }
          }
        }
        assert.equal(ours.sections, rows);
        assert.deepEqual(
          { added: ours.added, removed: ours.removed, binary: ours.binary },
          { added, removed, binary },
        );
      }),
      { numRuns: 60 },
    );
  },
});

Deno.test("patchStats counts a hand-written patch exactly", () => {
  const patch = utf8(
    "diff --git a/x b/x\nindex 1..2 100644\n--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n-- old\n+++ new\n same\n" +
      "diff --git a/y b/y\nnew file mode 100644\nindex 0..3\nGIT binary patch\nliteral 3\nKcmZ>\n\nliteral 0\nKcmV+\n\n",
  );
  assert.deepEqual(patchStats(patch), { sections: 2, added: 1, removed: 1, binary: 1 });
});

Deno.test("cUnquote inverts cQuote", (t) => {
  assertProperty(
    t,
    fc.property(
      fc.string({
        unit: fc.constantFrom("a", " ", "é", "\t", "\n", "\x01", "\x7f", '"', "\\", "日"),
      }),
      (s) => {
        if (s === "") return;
        assert.equal(cUnquote(cQuote(s)), s);
      },
    ),
  );
});

Deno.test("parseFilesList reads a files list and names a malformed line", () => {
  const text = filesLine("M", "a b") + filesLine("A", "tab\there") + filesLine("D", "é");
  assert.deepEqual(parseFilesList(text), [
    { status: "M", path: "a b" },
    { status: "A", path: "tab\there" },
    { status: "D", path: "é" },
  ]);
  assert.throws(() => parseFilesList("M\ta\nX b\n"), /line 2 is malformed/);
  assert.throws(() => cUnquote('"a\\q"'), /malformed quoted path/);
  assert.throws(() => cUnquote('"abc'), /malformed quoted path/);
});
