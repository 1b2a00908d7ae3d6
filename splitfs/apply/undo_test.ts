import assert from "node:assert/strict";
import { fingerprintDiff, sandbox } from "../_testing.ts";
import { applyPlan } from "./transaction.ts";
import { listResolutions } from "./recover.ts";
import { undo } from "./undo.ts";
import { ResolutionStateError, UndoRefusedError } from "./errors.ts";
import { binary, planOf, rejection, type Spec, treeOf, writeSpec } from "./_apply_testing.ts";

const PERMS = { read: true, write: true, ffi: true, env: true } as const;

const PRE: Spec = {
  "keep.txt": { file: "keep\n" },
  "edit.txt": { file: "old\n", mode: 0o664 },
  "run.sh": { file: "#!/bin/sh\n" },
  "link": { link: "keep.txt" },
  "gone.txt": { file: "bye\n", mode: 0o600 },
  "f2d": { file: "a file\n" },
  "d2f/a.txt": { file: "a" },
  "d2f/sub/b.txt": { file: "b" },
  "d2f/sub": { dir: true, mode: 0o750 },
  "bin.dat": { file: binary(100_000, 1) },
};
const POST: Spec = {
  "keep.txt": { file: "keep\n" },
  "edit.txt": { file: "new\n" },
  "run.sh": { file: "#!/bin/sh\n", mode: 0o755 },
  "link": { link: "edit.txt" },
  "f2d/inner.txt": { file: "inner\n" },
  "d2f": { file: "now a file\n" },
  "bin.dat": { file: binary(120_000, 2) },
  "n1/n2/leaf": { file: "leaf" },
};

for (const scope of ["filesystem", "git"] as const) {
  Deno.test({
    name:
      `undo: apply (${scope} scope) then undo gives the byte-identical pre-state, times and modes included`,
    permissions: PERMS,
  }, async () => {
    using sb = sandbox("marsh-undo-");
    writeSpec(sb.root, PRE);
    const pre = treeOf(sb.root);
    const preTimes = fingerprintTimes(sb.root);
    const { plan, content } = planOf(PRE, POST, { scope, filesOnly: scope === "git" });
    const applied = await applyPlan(sb.root, plan, { content });
    const post = treeOf(sb.root);
    assert.notDeepEqual(post, pre);
    const undone = await undo(sb.root, applied.id);
    assert.deepEqual(fingerprintDiff(pre, treeOf(sb.root)), []);
    // The files put back are the very files the apply moved away: mtimes match too.
    assert.deepEqual(fingerprintDiff(preTimes, fingerprintTimes(sb.root)), []);
    // The undo is a resolution too, with its own restore point: undoing it re-applies.
    assert.deepEqual(listResolutions(sb.root), [applied.id, undone.id].sort());
    await undo(sb.root, undone.id);
    assert.deepEqual(fingerprintDiff(post, treeOf(sb.root)), []);
    const again = await rejection(undo(sb.root, applied.id), ResolutionStateError);
    assert.match(again.message, /was undone already, by /);
  });
}

/** Files' mtimes (a file put back by rename or link keeps its mtime; a copy would not). */
function fingerprintTimes(root: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const [rel, v] of treeOf(root)) {
    if (!v.startsWith("file ")) continue;
    out.set(rel, `${Deno.lstatSync(`${root}/${rel}`).mtime?.getTime()}`);
  }
  return out;
}

Deno.test({
  name: "undo: refused, listing every path changed since the apply; nothing changed",
  permissions: PERMS,
}, async () => {
  using sb = sandbox("marsh-undo-");
  writeSpec(sb.root, PRE);
  const { plan, content } = planOf(PRE, POST);
  const applied = await applyPlan(sb.root, plan, { content });
  // Later changes: an edit of a taken file, a chmod, a file inside a made directory.
  Deno.writeTextFileSync(`${sb.root}/edit.txt`, "edited after the merge\n");
  Deno.chmodSync(`${sb.root}/d2f`, 0o600);
  Deno.writeTextFileSync(`${sb.root}/n1/n2/mine.txt`, "user's\n");
  const tree = treeOf(sb.root);
  const err = await rejection(undo(sb.root, applied.id), UndoRefusedError);
  assert.deepEqual(err.changed.map((c) => c.path), ["d2f", "edit.txt", "n1/n2/mine.txt"]);
  assert.match(
    err.message,
    new RegExp(`cannot undo resolution ${applied.id}: 3 path\\(s\\) changed since it was applied`),
  );
  assert.match(err.message, /n1\/n2\/mine\.txt \(expected absent, found a file\)/);
  assert.deepEqual(fingerprintDiff(tree, treeOf(sb.root)), []);
  // Put two back: the file inside n1/n2, which the undo would remove with it, still refuses.
  Deno.writeTextFileSync(`${sb.root}/edit.txt`, "new\n");
  Deno.chmodSync(`${sb.root}/edit.txt`, 0o644);
  Deno.chmodSync(`${sb.root}/d2f`, 0o644);
  const blocked = await rejection(undo(sb.root, applied.id), UndoRefusedError);
  assert.deepEqual(blocked.changed.map((c) => c.path), ["n1/n2/mine.txt"]);
  Deno.removeSync(`${sb.root}/n1/n2/mine.txt`);
  await undo(sb.root, applied.id);
  assert.deepEqual(listResolutions(sb.root).length, 2);
});

Deno.test({ name: "undo: an unknown or invalid id is refused", permissions: PERMS }, async () => {
  using sb = sandbox("marsh-undo-");
  await rejection(undo(sb.root, "nope"), ResolutionStateError);
  await rejection(undo(sb.root, "../etc"), ResolutionStateError);
});
