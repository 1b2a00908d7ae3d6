/**
 * The one label rule (`labelProblem`): its bounds, its reserved names, and
 * the guide's list of them, which must name exactly the reserved set.
 */

import assert from "node:assert/strict";
import { labelProblem, MAX_LABEL, RESERVED_LABELS } from "./layout.ts";

Deno.test({ name: "labels: 1-63 characters; longer ones are too long", permissions: {} }, () => {
  assert.equal(labelProblem("a"), null);
  assert.equal(labelProblem("a".repeat(MAX_LABEL)), null);
  for (const n of [MAX_LABEL + 1, 255, 256, 257, 300_000]) {
    const problem = labelProblem("b".repeat(n));
    assert.equal(
      problem,
      `invalid label "${"b".repeat(32)}"... is too long (${n} characters): ` +
        `use 1-63 letters, digits, "_", "." or "-", starting with a letter or digit`,
    );
  }
  assert.match(labelProblem("") ?? "", /^invalid label "": use 1-63 letters/);
  assert.match(labelProblem("-a") ?? "", /^invalid label "-a": use 1-63/);
  // A control character is quoted, so the message stays one line.
  assert.equal(labelProblem("a\nb")?.includes("\n"), false);
  assert.equal(labelProblem(`${"c".repeat(70)}\n`)?.includes("\n"), false);
});

Deno.test({ name: "labels: the reserved names are refused", permissions: {} }, () => {
  assert.deepEqual([...RESERVED_LABELS].sort(), ["base", "layers", "out", "store.git"]);
  for (const name of RESERVED_LABELS) {
    assert.equal(labelProblem(name), `invalid label "${name}": the name is reserved`);
  }
  assert.equal(labelProblem("layer"), null);
});

Deno.test({
  name: "labels: docs/guide.md lists exactly the reserved names",
  permissions: { read: true },
}, () => {
  const guide = Deno.readTextFileSync(new URL("../docs/guide.md", import.meta.url));
  const m = /starting with a letter or digit, unique within the split;\n(.*?) are reserved\./s
    .exec(guide);
  assert.ok(m, "the guide's sentence on reserved labels");
  const listed = [...m[1]!.matchAll(/`([^`]+)`/g)].map((x) => x[1]!).sort();
  assert.deepEqual(listed, [...RESERVED_LABELS].sort());
});
