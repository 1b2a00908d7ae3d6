/**
 * Acceptance (issue 13 §3, authority): through the real CLI, daemon and
 * branch socket, a branch may not merge, promote, choose or undo the split
 * it runs in (nor its siblings), and the refusal says who may; the host is
 * refused a split still running, and an unknown resolution. None of these
 * reaches the split-filesystem service, so nothing in the project changes.
 */

import assert from "node:assert/strict";
import { finish, PERMISSIONS, Sandbox, show, waitFor } from "./_acceptance.ts";

Deno.test({
  name: "resolve: a branch is refused every resolving verb on its own split; the host waits",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create();
  const s = `${sb.scratch}`;
  const tries = [
    ["merge", `merge "$id" a`],
    ["promote", `promote "$id" b --retire-source-changes`],
    ["choose", `choose "$id" a --merge`],
    ["undo", `undo nope`],
  ].map(([name, args]) => `"$M" ${args} 2> '${s}/${name}.err'; echo $? > '${s}/${name}.code'`);
  const script = `while [ ! -e '${s}/id' ]; do sleep 0.05; done; id=$(cat '${s}/id'); ` +
    `${tries.join("; ")}; "$M" resolutions > '${s}/list.out' 2>&1; touch '${s}/done'`;
  const creator = sb.spawnMarsh(["split", "-n", "-b", `a=${script}`, "-b", "b=true"]);
  const split = await sb.runningSplit();

  // The host: the split is still running.
  const early = await sb.marsh(["merge", split.id, "b", "--dry-run"]);
  assert.equal(early.code, 2, show(early));
  assert.match(early.stderr, new RegExp(`marsh merge: split ${split.id} is still running`));

  Deno.writeTextFileSync(`${s}/id`, split.id);
  await waitFor("branch a's tries", () => {
    try {
      Deno.statSync(`${s}/done`);
      return true;
    } catch {
      return false;
    }
  });
  const read = (name: string) => Deno.readTextFileSync(`${s}/${name}`);
  for (const verb of ["merge", "promote", "choose"]) {
    assert.equal(read(`${verb}.code`), "1\n", read(`${verb}.err`));
    assert.match(
      read(`${verb}.err`),
      new RegExp(
        `^marsh ${verb}: branch a of split ${split.id} may not ${verb} split ${split.id}: ` +
          `only the host user \\(from a shell outside its branches\\) may; ` +
          `a branch never resolves itself or its siblings\\n$`,
      ),
    );
  }
  assert.equal(read("undo.code"), "2\n", read("undo.err"));
  assert.equal(read("undo.err"), "marsh undo: no resolution nope; marsh resolutions lists them\n");
  assert.equal(read("list.out"), "no resolutions\n");
  const done = await finish(creator, "the split");
  assert.equal(done.code, 0, show(done));

  const undo = await sb.marsh(["undo", "nope"]);
  assert.equal(undo.code, 2, show(undo));
  const list = await sb.marsh(["resolutions", "--json"]);
  assert.equal(list.code, 0, show(list));
  assert.deepEqual(JSON.parse(list.stdout), { resolutions: [], more: 0 });
  // Nothing was resolved: the project is as it was.
  assert.equal(Deno.readTextFileSync(`${sb.project}/a.txt`), "hello\n");
});
