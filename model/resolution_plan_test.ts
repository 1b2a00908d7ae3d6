import assert from "node:assert/strict";
import fc from "fast-check";
import { assertProperty } from "../tests/_property.ts";
import {
  ABSENT,
  checkPlan,
  comparePaths,
  type MergePlan,
  pathProblem,
  type PlanEntry,
  PlanError,
  planProblems,
  type Present,
  sameSignature,
  type Signature,
  sortEntries,
  threeWay,
  threeWayEntry,
} from "./resolution_plan.ts";

const blob = (c: string) => c.repeat(40);
const file = (c: string, mode = 0o644): Present => ({ kind: "file", mode, blob: blob(c) });
const link = (target: string): Present => ({ kind: "symlink", target });
const DIR: Present = { kind: "dir" };
const NO_TREES = { base: null, source: null, branch: null, result: null };

/** Small domains, so that equal signatures are drawn often. */
const signature: fc.Arbitrary<Signature> = fc.oneof(
  fc.constant(ABSENT),
  fc.constant(DIR),
  fc.record({
    kind: fc.constant("file" as const),
    mode: fc.constantFrom(0o644, 0o755, 0o600),
    blob: fc.constantFrom(blob("a"), blob("b"), blob("c")),
  }),
  fc.record({ kind: fc.constant("symlink" as const), target: fc.constantFrom("x", "../y") }),
);

Deno.test("the three-way rule's laws hold for every triple of signatures", (t) => {
  assertProperty(
    t,
    fc.property(signature, signature, signature, (base, source, branch) => {
      const d = threeWay(base, source, branch);
      const swapped = threeWay(base, branch, source);
      // Converged and conflict do not depend on which side is the source.
      assert.equal(d.op === "converged", swapped.op === "converged");
      assert.equal(d.op === "conflict", swapped.op === "conflict");
      // One side's change is the other side's "unchanged".
      if (d.op === "take" || d.op === "delete") assert.equal(swapped.op, "unchanged");
      if (sameSignature(source, branch)) assert.equal(d.op, "converged");
      else if (sameSignature(base, source)) {
        assert.deepEqual(
          d,
          branch.kind === "absent" ? { op: "delete" } : { op: "take", after: branch },
        );
      } else if (sameSignature(base, branch)) assert.equal(d.op, "unchanged");
      else assert.equal(d.op, "conflict");
      // Any two equal → never a conflict; a take is exactly the branch's state.
      if (
        sameSignature(base, source) || sameSignature(base, branch) || sameSignature(source, branch)
      ) {
        assert.notEqual(d.op, "conflict");
      }
      if (d.op === "take") assert.ok(sameSignature(d.after, branch) && branch.kind !== "absent");
      // Applying the decision and planning again finds the path converged or left alone.
      const fresh = threeWay(base, source, branch); // unnarrowed by the asserts above
      if (fresh.op === "take" || fresh.op === "delete") {
        const applied = fresh.op === "take" ? fresh.after : ABSENT;
        assert.equal(threeWay(base, applied, branch).op, "converged");
      }
    }),
  );
});

Deno.test("mode, content and target each make a signature differ", () => {
  assert.equal(threeWay(file("a"), file("a"), file("a", 0o755)).op, "take");
  assert.equal(threeWay(file("a"), file("a", 0o755), file("b")).op, "conflict");
  assert.equal(threeWay(link("x"), link("y"), link("z")).op, "conflict");
  assert.equal(threeWay(link("x"), link("x"), file("a")).op, "take");
  assert.equal(threeWay(file("a"), file("a"), ABSENT).op, "delete");
  assert.equal(threeWay(ABSENT, file("b"), file("b")).op, "converged");
  assert.equal(threeWay(file("a"), file("b"), ABSENT).op, "conflict");
});

Deno.test("threeWayEntry gives taken files their bytes and drops unchanged paths", () => {
  assert.deepEqual(threeWayEntry("a", file("a"), file("a"), file("b"), "branch"), {
    op: "take",
    path: "a",
    before: file("a"),
    after: file("b"),
    bytes: "branch",
  });
  assert.deepEqual(threeWayEntry("l", ABSENT, ABSENT, link("t"), "branch"), {
    op: "take",
    path: "l",
    before: ABSENT,
    after: link("t"),
  });
  assert.equal(threeWayEntry("a", file("a"), file("b"), file("a"), "store"), null);
  assert.equal(threeWayEntry("a", file("a"), file("b"), file("c"), "store")?.op, "conflict");
});

Deno.test("paths must be normalised, relative, and outside Git's and marsh's directories", () => {
  for (
    const ok of ["a", "a/b.txt", "é/ü", ".gitignore", ".github/x", "x/.marsh", "a..b", ".gitx"]
  ) {
    assert.equal(pathProblem(ok), null, ok);
  }
  const bad: [string, RegExp][] = [
    ["", /empty/],
    ["/etc/passwd", /absolute/],
    ["a//b", /normalised/],
    ["a/", /normalised/],
    ["./a", /normalised/],
    ["a/../b", /normalised/],
    ["..", /normalised/],
    ["a\0b", /NUL/],
    [".git/config", /Git directory/],
    ["sub/.GIT/hooks/pre-commit", /Git directory/],
    ["sub/.git. /x", /Git directory/],
    ["git~1/config", /Git directory/],
    [".marsh/split/x", /marsh's own/],
    [`${"n".repeat(256)}`, /255 bytes/],
    [`${"a/".repeat(2100)}b`, /4096 bytes/],
  ];
  for (const [path, re] of bad) assert.match(pathProblem(path) ?? "", re, JSON.stringify(path));
});

function plan(entries: PlanEntry[], scope: MergePlan["scope"] = "filesystem"): MergePlan {
  return { scope, trees: NO_TREES, entries };
}

Deno.test("a plan where a path is both a file and a parent is refused, on either side", () => {
  const takeFileA: PlanEntry = {
    op: "take",
    path: "a",
    before: ABSENT,
    after: file("a"),
    bytes: "store",
  };
  const takeAx: PlanEntry = {
    op: "take",
    path: "a/x",
    before: ABSENT,
    after: file("b"),
    bytes: "store",
  };
  assert.match(
    planProblems(plan([takeFileA, takeAx])).join(),
    /"a" would be both a file and the parent of "a\/x" \(after/,
  );
  // A file replaced by a directory: the plan says so explicitly and is fine.
  const fileToDir: PlanEntry = { op: "take", path: "a", before: file("a"), after: DIR };
  assert.deepEqual(planProblems(plan([fileToDir, takeAx])), []);
  // Deleting the file without saying a directory comes is refused.
  const delA: PlanEntry = { op: "delete", path: "a", before: file("a") };
  assert.match(planProblems(plan([delA, takeAx])).join(), /"a" would be absent and the parent/);
  // ...but a directory replaced by a file, whose child is kept, is not.
  const dirToFile: PlanEntry = {
    op: "take",
    path: "a",
    before: DIR,
    after: file("a"),
    bytes: "store",
  };
  const keepAx: PlanEntry = { op: "converged", path: "a/x", state: file("b") };
  assert.match(planProblems(plan([dirToFile, keepAx])).join(), /"a" would be both a file/);
  const delAx: PlanEntry = { op: "delete", path: "a/x", before: file("b") };
  assert.deepEqual(planProblems(plan([dirToFile, delAx])), []);
  // The before side: the source cannot have held a file at "a" and something under it.
  const badBefore: PlanEntry = { op: "delete", path: "a/x", before: file("b") };
  assert.match(planProblems(plan([delA, badBefore])).join(), /\(before the plan\)/);
});

Deno.test("malformed entries are each named, and checkPlan throws them all", () => {
  const entries: PlanEntry[] = [
    { op: "take", path: "a", before: file("a"), after: file("a"), bytes: "store" },
    { op: "take", path: "b", before: ABSENT, after: file("a") },
    { op: "take", path: "c", before: ABSENT, after: link("t"), bytes: "branch" },
    { op: "delete", path: "d", before: ABSENT as never },
    {
      op: "take",
      path: "e",
      before: ABSENT,
      after: { kind: "file", mode: 0o644, blob: "XYZ" },
      bytes: "store",
    },
    { op: "take", path: "f", before: ABSENT, after: file("a", 0o600), bytes: "store" },
    { op: "converged", path: "f", state: ABSENT },
    { op: "converged", path: "e", state: ABSENT },
  ];
  const problems = planProblems(plan(entries, "git"));
  for (
    const re of [
      /"a": take of what is already there/,
      /"b": a taken file, and only a file, says where its bytes are/,
      /"c": a taken file, and only a file/,
      /"d": delete of nothing/,
      /"e": blob id "XYZ"/,
      /"f": file mode 600 is not 644 or 755/,
      /path "f" appears twice/,
      /paths are not sorted: "f" before "e"/,
    ]
  ) assert.match(problems.join("\n"), re);
  assert.throws(() => checkPlan(plan(entries, "git")), PlanError);
  // The filesystem scope keeps every permission bit.
  assert.deepEqual(planProblems(plan([entries[5]!])), []);
});

Deno.test("plan order is UTF-8 byte order, as Git sorts paths", (t) => {
  const enc = new TextEncoder();
  const bytewise = (a: string, b: string) => {
    const x = enc.encode(a), y = enc.encode(b);
    for (let i = 0; i < Math.min(x.length, y.length); i++) if (x[i] !== y[i]) return x[i]! - y[i]!;
    return x.length - y.length;
  };
  assertProperty(
    t,
    fc.property(fc.string({ unit: "grapheme" }), fc.string({ unit: "grapheme" }), (a, b) => {
      assert.equal(Math.sign(comparePaths(a, b)), Math.sign(bytewise(a, b)));
    }),
  );
  const sorted = sortEntries(["b", "a/b", "a", "\u{1f600}", "\uffff"].map((path) => ({
    op: "converged" as const,
    path,
    state: ABSENT,
  })));
  assert.deepEqual(sorted.map((e) => e.path), ["a", "a/b", "b", "\uffff", "\u{1f600}"]);
});
