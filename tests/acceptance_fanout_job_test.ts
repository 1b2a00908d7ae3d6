/**
 * `marsh fanout | marsh collect` and `marsh context` inside a real Kit container (docs/guide.md,
 * "marsh fanout and marsh collect"), through the real CLI, daemon and worker: the in-job `marsh`
 * runs argv branches in the job's own container on its fork's files, refuses `-b` with the
 * session-shell message, and prints the job's own `context.md`, also from `env -i`.
 *
 * The job reports what it saw by writing files into its fork; the test reads them back from the
 * captured patch.
 */

import assert from "node:assert/strict";
import { handleId, PERMISSIONS as permissions, show } from "./_acceptance.ts";
import { World } from "./_kit_world.ts";

/** The lines a branch's patch adds to `path` (a new file), joined with newlines. */
function added(patch: string, path: string): string {
  const at = patch.indexOf(`diff --git a/${path} b/${path}\n`);
  assert.ok(at >= 0, `${path} in the patch:\n${patch}`);
  const rest = patch.slice(at).split("\n").slice(1);
  const end = rest.findIndex((l) => l.startsWith("diff --git "));
  return (end < 0 ? rest : rest.slice(0, end))
    .filter((l) => l.startsWith("+") && !l.startsWith("+++"))
    .map((l) => l.slice(1))
    .join("\n");
}

Deno.test({
  name: "in a Kit job: fanout | collect on the fork's files, -b refused, marsh context",
  permissions,
}, async () => {
  await using w = await World.create();
  const r = await w.split([
    "-n",
    ":::",
    "a",
    "fixture",
    "sh",
    "-c",
    [
      `echo in | marsh fanout ::: x sh -c 'cat; echo "$FANOUT_BRANCH" > x.txt' ` +
      `::: y sh -c 'echo y > y.txt; echo bad >&2; exit 3' | marsh collect > collect.txt; ` +
      `echo $? >> collect.txt`,
      "marsh fanout -n -b z='touch z.txt' > b.txt 2>&1; echo $? >> b.txt",
      "marsh context > ctx.txt",
      "env -i /run/marsh/bin/marsh context > ctx-env-i.txt",
      "cmp -s ctx.txt /run/marsh/context.md; echo $? > same.txt",
    ].join("; "),
  ]);
  assert.equal(r.code, 0, show(r));
  const m = await w.manifest(handleId(r.stdout));
  const job = m.branches[0]!.job_id!;
  const patch = Deno.readTextFileSync(`${m.out}/a/diff.patch`);

  assert.equal(
    added(patch, "collect.txt"),
    ["== x: exited 0", "in", "", "== y: exited 3", "== y stderr ==", "bad", "", "3"].join("\n"),
  );
  // The branches wrote the job's own files (its fork), with FANOUT_BRANCH set.
  assert.match(added(patch, "x.txt"), /^[a-z0-9]{12}\/x$/);
  assert.equal(added(patch, "y.txt"), "y");
  assert.equal(
    added(patch, "b.txt"),
    "marsh fanout: z: shell branches (-b, split { }) run only from the session shell; from a job or a split branch use argv branches: ::: LABEL CMD [ARG...]\n2",
  );
  assert.ok(!patch.includes("z.txt"), "the refused -b branch never ran");
  const ctx = added(patch, "ctx.txt");
  assert.match(ctx, new RegExp(`^# marsh job ${job} \\(fixture\\)\n`));
  assert.match(ctx, /\nYou may start: fixture\.\n/);
  assert.ok(ctx.split("\n").length <= 60, "at most 60 lines");
  assert.equal(added(patch, "ctx-env-i.txt"), ctx);
  assert.equal(added(patch, "same.txt"), "0");
});
