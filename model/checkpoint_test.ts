import assert from "node:assert/strict";
import fc from "fast-check";
import {
  argvProblem,
  CHECKPOINT_PREIMAGE_VERSION,
  checkpointPreimage,
  cwdProblem,
  deltaProblem,
  headCas,
  isCheckpointId,
  isRecordId,
  isRootId,
  MAX_ARGV_BYTES,
  sessionNameProblem,
  sessionViewPath,
  staleHeadMessage,
} from "./checkpoint.ts";
import { labelProblem, MAX_LABEL } from "./layout.ts";

const R1 = "a".repeat(40);
const R2 = "b".repeat(40);
const C1 = "1".repeat(64);
const D = "d".repeat(64);

Deno.test("session names follow the label rule, with their own message", () => {
  for (const ok of ["fix", "a", "A.b_c-1", "x".repeat(MAX_LABEL)]) {
    assert.equal(sessionNameProblem(ok), null, ok);
  }
  for (const bad of ["", "-a", ".a", "a/b", "a b", "é", "x".repeat(MAX_LABEL + 1)]) {
    assert.match(sessionNameProblem(bad) ?? "", /^invalid session name/, bad);
  }
  // The same strings as a label (the reserved label names aside: a session is no split entry).
  fc.assert(
    fc.property(fc.string({ maxLength: 70 }), (s) => {
      const label = labelProblem(s);
      const reserved = label !== null && label.includes("reserved");
      assert.equal(sessionNameProblem(s) === null, label === null || reserved, s);
    }),
  );
});

Deno.test("a session's view is under the project's .marsh/session", () => {
  assert.equal(sessionViewPath("/p", "fix"), "/p/.marsh/session/fix/view");
  assert.equal(sessionViewPath("/p/", "fix"), "/p/.marsh/session/fix/view");
  assert.throws(() => sessionViewPath("/p", "../x"), TypeError);
  assert.throws(() => sessionViewPath("p", "fix"), TypeError);
});

Deno.test("ids: root ids are 40 hex, checkpoint ids 64, record ids lowercase names", () => {
  assert.ok(isRootId(R1));
  assert.equal(isRootId(C1), false);
  assert.equal(isRootId("A".repeat(40)), false);
  assert.ok(isCheckpointId(C1));
  assert.equal(isCheckpointId(R1), false);
  assert.ok(isRecordId("op-1"));
  assert.equal(isRecordId("-op"), false);
  assert.equal(isRecordId("Op"), false);
  assert.equal(isRecordId("x".repeat(65)), false);
});

Deno.test("cwd: relative to the project's root, no dot segments", () => {
  for (const ok of [".", "src", "src/a.b", "..a/b"]) assert.equal(cwdProblem(ok), null, ok);
  for (const bad of ["", "/src", "src/", "a//b", "./a", "a/..", "a/./b", "a\0b"]) {
    assert.notEqual(cwdProblem(bad), null, bad);
  }
});

Deno.test("argv: stored as data, refused when empty, with NUL, or too long", () => {
  assert.equal(argvProblem(["bash", "-c", "echo 'a b' \"$x\""]), null);
  assert.equal(argvProblem([""]), null);
  assert.match(argvProblem([]) ?? "", /needs a command/);
  assert.match(argvProblem(["a\0b"]) ?? "", /NUL/);
  assert.match(argvProblem(["x".repeat(MAX_ARGV_BYTES)]) ?? "", /too long/);
});

Deno.test("head CAS: ok only from the head read; stale names both", () => {
  assert.deepEqual(headCas(C1, C1), { kind: "ok" });
  const stale = headCas(C1, D);
  assert.deepEqual(stale, { kind: "stale", expected: C1, current: D });
  if (stale.kind === "stale") {
    const msg = staleHeadMessage("fix", stale);
    assert.ok(msg.includes(C1) && msg.includes(D) && msg.includes('"fix"'), msg);
  }
  fc.assert(
    fc.property(fc.string(), fc.string(), (a, b) => {
      assert.equal(headCas(a, b).kind === "ok", a === b);
    }),
  );
});

Deno.test("checkpoint preimage: versioned, one field per line, every field in it", () => {
  const op = { kind: "operation", operation: "op-1", parent: C1, root: R1, changes: D } as const;
  const text = checkpointPreimage(op);
  assert.ok(text.startsWith(`${CHECKPOINT_PREIMAGE_VERSION}\noperation op-1\n`));
  for (const field of ["operation", "parent", "root", "changes"] as const) {
    const changed = { ...op, [field]: field === "operation" ? "op-2" : field === "root" ? R2 : D };
    if (changed[field] === op[field]) continue;
    assert.notEqual(checkpointPreimage(changed), text, field);
  }
  assert.notEqual(checkpointPreimage({ ...op, parent: D }), text);
  assert.equal(
    checkpointPreimage({ kind: "start", session: "s1", root: R1 }),
    `${CHECKPOINT_PREIMAGE_VERSION}\nstart\nsession s1\nroot ${R1}\n`,
  );
  assert.throws(() => checkpointPreimage({ ...op, root: C1 }), TypeError);
  assert.throws(() => checkpointPreimage({ ...op, parent: R1 }), TypeError);
  assert.throws(() => checkpointPreimage({ ...op, operation: "a\nroot x" }), TypeError);
  assert.throws(() => checkpointPreimage({ ...op, changes: "x" }), TypeError);
});

Deno.test("delta: a layer changes the root, no change keeps it", () => {
  assert.equal(deltaProblem(R1, R1, { kind: "no-change" }), null);
  assert.equal(deltaProblem(R1, R2, { kind: "layer", layer: "l1" }), null);
  assert.match(deltaProblem(R1, R2, { kind: "no-change" }) ?? "", /keeps its parent's root/);
  assert.match(deltaProblem(R1, R1, { kind: "layer", layer: "l1" }) ?? "", /must change the root/);
});
