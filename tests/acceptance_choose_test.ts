/**
 * Acceptance (issue 13 §1 and §3, docs/resolution.md): `marsh choose`
 * resolves a group in one step, `marsh compare` shows the candidates, and
 * a branch can never resolve itself or its siblings.
 */

import assert from "node:assert/strict";
import { PERMISSIONS, Sandbox, show, waitFor } from "./_acceptance.ts";
import { assertUnchanged, expectExit, picture, splitOf } from "./_resolve.ts";

const FILES = { "a.txt": "a\n", "b.txt": "b\n" };

Deno.test({
  name: "choose --merge: the winner is merged, the others are discarded with their lineage kept",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create({ files: FILES });
  const id = await splitOf(sb, { one: "echo ONE > a.txt", two: "echo TWO > a.txt" });
  await expectExit(sb, ["choose", id, "two", "--merge"], 0);
  assert.equal(Deno.readTextFileSync(`${sb.project}/a.txt`), "TWO\n");
  const s = await sb.split(id);
  const one = s?.branches.find((b) => b.label === "one");
  assert.equal(one?.state, "discarded", JSON.stringify(s));
});

Deno.test({
  name: "compare: one row per branch with its counts, its overlaps and whether it merges cleanly",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create({ files: FILES });
  const id = await splitOf(sb, {
    one: "echo ONE > a.txt && echo new > n.txt",
    two: "echo TWO > a.txt",
    three: "printf 'b\\nb2\\n' > b.txt",
  });
  Deno.writeTextFileSync(`${sb.project}/a.txt`, "user\n");
  const before = picture(sb.project, { withGit: true });
  const r = await expectExit(sb, ["compare", id, "--json"], 0);
  assertUnchanged(sb.project, before, "compare changes nothing", { withGit: true });
  const doc = JSON.parse(r.stdout);
  const rows = doc.branches as {
    label: string;
    files: number;
    added: number;
    removed: number;
    clean: boolean;
    overlaps: { label: string }[];
  }[];
  const row = (l: string) => rows.find((x) => x.label === l)!;
  assert.deepEqual(rows.map((x) => x.label), ["one", "two", "three"]);
  assert.deepEqual([row("one").files, row("one").added, row("one").removed], [2, 2, 1]);
  assert.deepEqual(row("one").overlaps.map((o) => o.label), ["two"]);
  assert.deepEqual(row("three").overlaps, []);
  assert.equal(row("one").clean, false, "the user's edit of a.txt conflicts");
  assert.equal(row("three").clean, true);
  const text = await expectExit(sb, ["compare", id], 0);
  assert.match(text.stdout, /three/);
});

Deno.test({
  name: "a branch cannot merge, promote, discard, choose or undo: refused, saying who may",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create({ files: FILES });
  const idFile = `${sb.scratch}/id`;
  const rcFile = `${sb.scratch}/rc`;
  // The branch waits for its split's id, then tries every verb on itself and its sibling.
  const script = String.raw`
while [ ! -s '${idFile}' ]; do sleep 0.1; done
id=$(cat '${idFile}')
for verb in "merge $id other" "promote $id other" "discard $id other" "choose $id other --merge" "undo r-nosuch" "compare $id"; do
  "$M" $verb > /dev/null 2>> '${sb.scratch}/err'; echo "$verb:$?" >> '${rcFile}'
done`;
  const child = sb.spawnMarsh(["split", "-n", "-b", `me=${script}`, "-b", "other=echo o > a.txt"]);
  const s = await sb.runningSplit();
  Deno.writeTextFileSync(idFile, s.id);
  const done = await child.output();
  assert.equal(done.code, 0, new TextDecoder().decode(done.stderr));
  const rcs = await waitFor("the branch's results", () => {
    try {
      const t = Deno.readTextFileSync(rcFile).trim().split("\n");
      return t.length === 6 ? t : undefined;
    } catch (error) {
      if (error instanceof Deno.errors.NotFound) return undefined;
      throw error;
    }
  });
  for (const line of rcs) assert.doesNotMatch(line, /:0$/, `refused: ${line}`);
  const err = Deno.readTextFileSync(`${sb.scratch}/err`);
  assert.match(err, /creator|host/i, err);
  assert.equal(Deno.readTextFileSync(`${sb.project}/a.txt`), "a\n", "nothing merged");
  const after = await sb.split(s.id);
  assert.ok(
    after?.branches.every((b) => b.state !== "discarded"),
    show({
      code: 0,
      signal: null,
      stdout: JSON.stringify(after),
      stderr: "",
    }),
  );
});
