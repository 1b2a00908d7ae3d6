/**
 * `marsh run` (docs/guide.md "marsh run", docs/rules.md "Running a
 * registered command as a job") through the real CLI, daemon, worker and
 * Docker engine: stdio and exit status passed through, the project's view
 * from the host (`.git` read-only), lineage across a three-level tree,
 * spawn sets, the caps, a shell branch's links, and Ctrl-C.
 */

import assert from "node:assert/strict";
import { PERMISSIONS as permissions, show } from "./_acceptance.ts";
import { listContainers } from "./_engine.ts";
import { World } from "./_kit_world.ts";

/** The containers of `marsh run` jobs of this world (their label `marsh.split` is `run`). */
function runContainers(w: World) {
  return listContainers(w.socket, ["marsh.split=run", `marsh.owner=${w.sb.home}`]);
}

Deno.test({
  name: "marsh run from the host: stdin, stdout, stderr, exit; writes land in the project; .git read-only",
  permissions,
}, async () => {
  await using w = await World.create({ "a.txt": "hello\n" });
  const r = await w.sb.marsh([
    "run",
    "fixture",
    "sh",
    "-c",
    [
      "cat",
      "echo to-err >&2",
      "pwd",
      "echo written > out.txt",
      "touch .git/hooks/planted 2>/dev/null; echo git=$?",
      "cat a.txt",
      "exit 3",
    ].join("; "),
  ], { stdin: "from-stdin\n" });
  assert.equal(r.code, 3, show(r));
  assert.equal(r.stdout, `from-stdin\n${w.sb.project}\ngit=1\nhello\n`, show(r));
  assert.equal(r.stderr, "to-err\n", show(r));
  assert.equal(Deno.readTextFileSync(`${w.sb.project}/out.txt`), "written\n");
  assert.throws(() => Deno.statSync(`${w.sb.project}/.git/hooks/planted`), Deno.errors.NotFound);
  const jobs = await w.jobs();
  assert.equal(jobs.length, 1);
  assert.deepEqual([jobs[0]!.state, jobs[0]!.code, jobs[0]!.cleanup], ["finished", 3, "removed"]);
  assert.deepEqual(await runContainers(w), []);
});
