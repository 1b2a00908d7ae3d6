/**
 * Acceptance (issue 13 §2, docs/resolution.md "The commands", "Restart"):
 * `kill -9` of the daemon (and with it the split-filesystem service) during
 * `marsh merge`, then a fresh daemon, twice. The merge is settled at the
 * start to exactly the pre-state (`failed`) or the post-state (`applied`),
 * never a mix, and a second restart changes nothing.
 *
 * The daemon's test hook `MARSH_TEST_PAUSE_AT=<step>` makes it write
 * `<control dir>/paused-<step>` and stop there: `resolve-journaled` (the
 * resolution is journaled `applying`, the service not yet asked) and
 * `resolve-answered` (the service applied it, the journal not yet told).
 * Every step inside the applier is killed in `splitfs/apply/crash_test.ts`.
 */

import assert from "node:assert/strict";
import { exists, finish, NINE, PERMISSIONS, Sandbox, show, waitFor } from "./_acceptance.ts";
import { assertUnchanged, picture, pictureDiff, splitOf } from "./_resolve.ts";

const STEPS = {
  "resolve-journaled": { state: "failed", tree: "pre" },
  "resolve-answered": { state: "applied", tree: "post" },
} as const;

interface Listed {
  readonly id: string;
  readonly state: string;
}

async function resolutions(sb: Sandbox): Promise<Listed[]> {
  const r = await sb.marsh(["resolutions", "--json"]);
  assert.equal(r.code, 0, show(r));
  return (JSON.parse(r.stdout) as { resolutions: Listed[] }).resolutions;
}

for (const [step, expected] of Object.entries(STEPS)) {
  Deno.test({
    name: `kill -9 of the daemon at ${step}: the next start settles the merge ${expected.tree}`,
    permissions: PERMISSIONS,
  }, async () => {
    await using sb = await Sandbox.create({ files: { "a.txt": NINE, "b.txt": "b\n" } });
    const started = await sb.marsh(["daemon", "start"], { env: { MARSH_TEST_PAUSE_AT: step } });
    assert.equal(started.code, 0, show(started));
    const id = await splitOf(sb, {
      fix: String.raw`sed -i 's/^5$/five/' a.txt && rm b.txt && printf 'n\n' > n.txt`,
    });
    const pre = picture(sb.project);
    // The post-state, as a clean run of the same merge leaves it.
    const post = new Map(pre);
    const merging = sb.spawnMarsh(["merge", id, "fix"]);
    await waitFor(`the daemon to pause at ${step}`, () => exists(`${sb.home}/paused-${step}`));
    const oldPid = sb.daemonPid();
    assert.ok(oldPid);
    Deno.kill(oldPid, "SIGKILL");
    const lost = await finish(merging, "the interrupted marsh merge");
    assert.notEqual(lost.code, 0, show(lost));

    for (const round of [1, 2]) {
      const restarted = await sb.marsh(["daemon", "start"]);
      assert.equal(restarted.code, 0, show(restarted));
      const [r, ...more] = await resolutions(sb);
      assert.equal(more.length, 0);
      assert.equal(r?.state, expected.state, `round ${round}: ${JSON.stringify(r)}`);
      if (expected.tree === "pre") {
        assertUnchanged(sb.project, pre, `round ${round}: the pre-state`);
      } else {
        const now = picture(sb.project);
        assert.deepEqual(
          pictureDiff(pre, now).map((l) => l.split(":")[0]),
          ["a.txt", "b.txt", "n.txt"],
          `round ${round}: the post-state`,
        );
        assert.equal(Deno.readTextFileSync(`${sb.project}/a.txt`), NINE.replace("5\n", "five\n"));
        post.clear();
        for (const [k, v] of now) post.set(k, v);
      }
      assert.ok(
        !exists(`${sb.project}/.marsh/resolve/${r!.id}/stage`),
        "no staging left after recovery",
      );
      const stopped = await sb.marsh(["daemon", "stop"]);
      assert.equal(stopped.code, 0, show(stopped));
    }

    // Settled is settled: an applied merge undoes to the pre-state; a failed one is not undone.
    await sb.marsh(["daemon", "start"]);
    const [r] = await resolutions(sb);
    const undo = await sb.marsh(["undo", r!.id]);
    if (expected.state === "applied") {
      assert.equal(undo.code, 0, show(undo));
      assertUnchanged(sb.project, pre, "the undo of a recovered merge");
    } else {
      assert.equal(undo.code, 1, show(undo));
      assertUnchanged(sb.project, pre, "a refused undo");
    }
  });
}
