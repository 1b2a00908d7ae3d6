import assert from "node:assert/strict";
import { ResolveGitError } from "./git.ts";
import {
  nulFields,
  parseCatFileBatch,
  parseLsTree,
  parseMergeTree,
  parseRawDiff,
  RAW_ABSENT,
  signatureOf,
} from "./git_raw.ts";

const enc = new TextEncoder();
const bytes = (s: string) => enc.encode(s);
const A = "a".repeat(40), B = "b".repeat(40), T = "1".repeat(40);
const isGitError = (re: RegExp) => (e: unknown) =>
  e instanceof ResolveGitError && re.test(e.message);

Deno.test("NUL fields: a trailing NUL ends a field, an inner empty field is kept", () => {
  const f = nulFields(bytes("a\0\0b\0")).map((x) => new TextDecoder().decode(x));
  assert.deepEqual(f, ["a", "", "b"]);
  assert.deepEqual(nulFields(new Uint8Array()), []);
});

Deno.test("merge-tree -z: the tree, each conflicted stage, and messages with their paths", () => {
  // The shape git 2.39 prints (checked against a real run in git_merge_test.ts).
  const out = bytes(
    `${T}\u{0}100644 ${A} 1\tb.txt\u{0}100644 ${B} 2\tb.txt\u{0}120000 ${A} 3\tdir/l\0\0` +
      `1\0a.txt\0Auto-merging\0Auto-merging a.txt\n\0` +
      `2\0b.txt\0c.txt\0CONFLICT (rename/rename)\0CONFLICT (rename/rename): x\n\0`,
  );
  const m = parseMergeTree(out);
  assert.equal(m.tree, T);
  assert.deepEqual(m.stages, [
    { path: "b.txt", stage: 1, state: { mode: "100644", oid: A } },
    { path: "b.txt", stage: 2, state: { mode: "100644", oid: B } },
    { path: "dir/l", stage: 3, state: { mode: "120000", oid: A } },
  ]);
  assert.deepEqual(m.messages, [
    { paths: ["a.txt"], type: "Auto-merging", text: "Auto-merging a.txt" },
    {
      paths: ["b.txt", "c.txt"],
      type: "CONFLICT (rename/rename)",
      text: "CONFLICT (rename/rename): x",
    },
  ]);
  // A clean merge with no messages is the tree alone.
  assert.deepEqual(parseMergeTree(bytes(`${T}\0`)), { tree: T, stages: [], messages: [] });
  for (
    const [bad, re] of [
      ["oops\0", /no tree id/],
      [`${T}\0garbage\0`, /stage "garbage"/],
      [`${T}\0\x003\0a\0`, /cut short/],
      [`${T}\0\0x\0a\0t\0m\0`, /message path count "x"/],
    ] as const
  ) assert.throws(() => parseMergeTree(bytes(bad)), isGitError(re));
});

Deno.test("diff-tree raw: each side's mode and id, absent sides, UTF-8 paths only", () => {
  const out = bytes(
    `:100644 100755 ${A} ${A} M\0run.sh\0:000000 120000 ${"0".repeat(40)} ${B} A\0é/l\0` +
      `:100644 000000 ${A} ${"0".repeat(40)} D\0gone\0`,
  );
  assert.deepEqual(parseRawDiff(out), [
    { path: "run.sh", src: { mode: "100644", oid: A }, dst: { mode: "100755", oid: A } },
    { path: "é/l", src: RAW_ABSENT, dst: { mode: "120000", oid: B } },
    { path: "gone", src: { mode: "100644", oid: A }, dst: RAW_ABSENT },
  ]);
  const latin = new Uint8Array([...bytes(`:000000 100644 ${A} ${B} A\0`), 0xe9, 0]);
  assert.throws(() => parseRawDiff(latin), isGitError(/is not UTF-8; the --git scope/));
  assert.throws(
    () => parseRawDiff(bytes(`:100644 100644 ${A} ${B} R100\0a\0b\0`)),
    isGitError(/diff-tree/),
  );
});

Deno.test("ls-tree and cat-file --batch read back what git prints", () => {
  const ls = parseLsTree(bytes(`100644 blob ${A}\ta b\u{0}040000 tree ${B}\td\0`));
  assert.deepEqual([...ls], [["a b", { mode: "100644", oid: A }], ["d", {
    mode: "040000",
    oid: B,
  }]]);
  const cat = parseCatFileBatch(bytes(`${A} blob 3\nx\ny\n${B} blob 0\n\n`));
  assert.deepEqual([...cat].map(([k, v]) => [k, new TextDecoder().decode(v)]), [[A, "x\ny"], [
    B,
    "",
  ]]);
  assert.throws(
    () => parseCatFileBatch(bytes(`${A} missing\n`)),
    isGitError(/cat-file: .* missing/),
  );
  assert.throws(() => parseCatFileBatch(bytes(`${A} blob 9\nabc\n`)), isGitError(/cut short/));
});

Deno.test("raw states become signatures; a submodule is refused with the scope to use", () => {
  const targets = new Map([[B, "../t"]]);
  assert.deepEqual(signatureOf({ mode: "100755", oid: A }, "x", targets), {
    kind: "file",
    mode: 0o755,
    blob: A,
  });
  assert.deepEqual(signatureOf({ mode: "120000", oid: B }, "l", targets), {
    kind: "symlink",
    target: "../t",
  });
  assert.deepEqual(signatureOf({ mode: "040000", oid: B }, "d", targets), { kind: "dir" });
  assert.deepEqual(signatureOf(RAW_ABSENT, "x", targets), { kind: "absent" });
  assert.throws(
    () => signatureOf({ mode: "160000", oid: A }, "vendor/lib", targets),
    isGitError(/vendor\/lib is a submodule: .*--filesystem/),
  );
  assert.throws(
    () => signatureOf({ mode: "100600", oid: A }, "x", targets),
    isGitError(/mode Git does not write/),
  );
});
