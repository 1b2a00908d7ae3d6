import assert from "node:assert/strict";
import fc from "fast-check";
import { assertProperty } from "../tests/_property.ts";
import {
  ABSENT,
  type MergePlan,
  type PlanEntry,
  PlanError,
  type Present,
  type Signature,
  sortEntries,
  threeWayEntry,
} from "./resolution_plan.ts";
import { parsePlanJson, PLAN_SCHEMA, planToJson, renderPlanText } from "./resolution_plan_json.ts";

const blob = (c: string) => c.repeat(40);
const file = (c: string, mode = 0o644): Present => ({ kind: "file", mode, blob: blob(c) });
const TREES = { base: blob("1"), source: blob("2"), branch: blob("3"), result: null };

const SAMPLE: MergePlan = {
  scope: "filesystem",
  trees: TREES,
  entries: [
    {
      op: "conflict",
      path: "db.sqlite",
      base: file("a"),
      source: file("b"),
      branch: file("c"),
      reason: "both sides changed it",
    },
    { op: "take", path: "link", before: ABSENT, after: { kind: "symlink", target: "src/x.ts" } },
    { op: "delete", path: "old.txt", before: file("d") },
    { op: "converged", path: "same.txt", state: file("e", 0o755) },
    { op: "take", path: "src/x.ts", before: file("a"), after: file("f", 0o600), bytes: "branch" },
  ],
};

Deno.test("the v1 document says everything per path, and parses back to the same plan", () => {
  const doc = planToJson(SAMPLE);
  assert.equal(doc.schema, PLAN_SCHEMA);
  assert.equal(doc.schema, "marsh.merge.plan/v1");
  assert.equal(doc.clean, false);
  assert.deepEqual(doc.summary, { take: 2, delete: 1, converged: 1, conflict: 1 });
  assert.deepEqual(doc.paths[4], {
    path: "src/x.ts",
    action: "take",
    before: { type: "file", mode: "0644", blob: blob("a") },
    after: { type: "file", mode: "0600", blob: blob("f") },
    bytes: "branch",
  });
  assert.deepEqual(doc.paths[1], {
    path: "link",
    action: "take",
    before: { type: "absent" },
    after: { type: "symlink", target: "src/x.ts" },
  });
  // Through real JSON text, as the CLI prints it.
  assert.deepEqual(parsePlanJson(JSON.parse(JSON.stringify(doc))), SAMPLE);
});

Deno.test("a document that is not v1, or whose summary lies, is refused with where", () => {
  const doc = planToJson(SAMPLE);
  const bad: [unknown, RegExp][] = [
    [{ ...doc, schema: "marsh.merge.plan/v2" }, /schema is "marsh.merge.plan\/v2"/],
    [{ ...doc, scope: "memory" }, /unknown scope "memory"/],
    [{ ...doc, clean: true }, /"clean" does not match/],
    [{ ...doc, summary: { ...doc.summary, take: 3 } }, /"summary.take" does not match/],
    [
      { ...doc, paths: [{ ...doc.paths[0], action: "merge" }] },
      /paths\[0\]: unknown action "merge"/,
    ],
    [
      { ...doc, paths: [{ path: "a", action: "delete", before: { type: "absent" } }] },
      /"before" cannot be absent/,
    ],
    [
      { ...doc, paths: [{ path: "../a", action: "converged", state: { type: "absent" } }] },
      /not normalised/,
    ],
    [{ ...doc, trees: { ...doc.trees, base: 7 } }, /plan.trees: "base" must be a tree id/],
    [[], /plan: expected an object/],
  ];
  for (const [x, re] of bad) {
    assert.throws(
      () => parsePlanJson(x),
      (e: unknown) => e instanceof PlanError && re.test(e.message),
    );
  }
});

Deno.test("the text form has one line per path and says whether it applies", () => {
  assert.equal(
    renderPlanText(SAMPLE),
    [
      `conflict  db.sqlite: both sides changed it (base file 0644 aaaaaaaaaa; source file 0644 bbbbbbbbbb; branch file 0644 cccccccccc)`,
      `take      link (symlink -> src/x.ts)`,
      `delete    old.txt`,
      `converged same.txt`,
      `take      src/x.ts (file 0600 ffffffffff)`,
      `2 to take, 1 to delete, 1 converged, 1 conflict: nothing would be changed`,
      ``,
    ].join("\n"),
  );
  const clean = {
    ...SAMPLE,
    scope: "git" as const,
    entries: [{ op: "delete" as const, path: " sp\nace", before: file("a") }],
  };
  assert.equal(
    renderPlanText(clean),
    `delete    " sp\\nace"\n0 to take, 1 to delete, 0 converged, 0 conflicts: the git plan applies cleanly\n`,
  );
});

const name = fc.constantFrom("a", "b", "é", "x y", "\u{1f600}");
// fc.record makes null-prototype objects; a plain copy compares as parsed JSON does.
const sig: fc.Arbitrary<Signature> = fc.oneof(
  fc.constant(ABSENT),
  fc.record({
    kind: fc.constant("file" as const),
    mode: fc.constantFrom(0o644, 0o755, 0o600),
    blob: fc.constantFrom(blob("a"), blob("b")),
  }).map((r) => ({ ...r })),
  fc.constantFrom("t", "../u").map((target) => ({ kind: "symlink" as const, target })),
);

Deno.test("every plan the three-way rule makes survives JSON and back unchanged", (t) => {
  assertProperty(
    t,
    fc.property(
      fc.uniqueArray(fc.tuple(fc.array(name, { minLength: 1, maxLength: 3 }), sig, sig, sig), {
        selector: ([p]) => p.join("/"),
        maxLength: 12,
      }),
      (rows) => {
        // Leaf paths only: a prefix of another path would need directory entries.
        const paths = rows.map(([p]) => p.join("/"));
        const leaves = rows.filter(([p]) => !paths.some((q) => q.startsWith(p.join("/") + "/")));
        const entries = leaves.map(([p, b, s, r]) => threeWayEntry(p.join("/"), b, s, r, "branch"))
          .filter((e): e is PlanEntry => e !== null);
        const plan: MergePlan = {
          scope: "filesystem",
          trees: TREES,
          entries: sortEntries(entries),
        };
        assert.deepEqual(parsePlanJson(JSON.parse(JSON.stringify(planToJson(plan)))), plan);
        assert.equal(renderPlanText(plan).split("\n").length, entries.length + 2);
      },
    ),
  );
});
