/**
 * Acceptance (issue 14 §2, docs/guide.md "Checking out a checkpoint"):
 * `marsh checkout`, its dry run, its refusal over project changes, the
 * retire flag and `marsh undo`, through the real CLI, daemon and service,
 * on a session made in the journal whose stacks are real snapshot layers
 * (`_checkout_world.ts`).
 */

import assert from "node:assert/strict";
import { type Result, show } from "./_acceptance.ts";
import { assertUnchanged, picture, pictureDiff } from "./_resolve.ts";
import { DIFFERING, IGNORED, type Listed, PERMS, stamps, world } from "./_checkout_world.ts";

function ok(r: Result, what: string): void {
  assert.equal(r.code, 0, `${what}: ${show(r)}`);
}

/** The files no checkout of the head touches. */
const UNTOUCHED = [".gitignore", "same.txt", ...IGNORED];

async function listed(w: { sb: { marsh: (a: string[]) => Promise<Result> } }): Promise<Listed[]> {
  const r = await w.sb.marsh(["resolutions", "--json"]);
  ok(r, "resolutions");
  return (JSON.parse(r.stdout) as { resolutions: Listed[] }).resolutions;
}

/** The paths of a dry run's text plan, one `take`/`delete` line each. */
function planned(stdout: string): string[] {
  return stdout.split("\n").filter((l) => /^(take|delete) /.test(l)).map((l) =>
    l.replace(/^(take|delete)\s+/, "").replace(/ \(.*\)$/, "")
  ).sort();
}

Deno.test({
  name:
    "marsh checkout: --dry-run changes nothing; the checkout writes exactly the differing paths; undo puts back every byte",
  permissions: PERMS,
}, async () => {
  await using w = await world();
  const { sb } = w;
  const git = picture(`${sb.project}/.git`);
  const before = stamps(sb.project, UNTOUCHED);

  const dry = await sb.marsh(["checkout", "--dry-run"]);
  ok(dry, "dry run");
  assert.deepEqual(planned(dry.stdout), DIFFERING, dry.stdout);
  assert.match(dry.stdout, /take\s+sub\/b\.txt \(file 0755 /);
  const doc = await sb.marsh(["checkout", "--dry-run", "--json"]);
  ok(doc, "dry run --json");
  const plan = JSON.parse(doc.stdout);
  assert.equal(plan.schema, "marsh.merge.plan/v1");
  assert.equal(plan.scope, "checkout");
  assert.deepEqual(plan.summary, { take: 7, delete: 4, converged: 0, conflict: 0 });
  assert.equal(plan.trees.result, w.head.root);
  assertUnchanged(sb.project, w.pre, "after the dry runs");
  assert.deepEqual(stamps(sb.project, UNTOUCHED), before);
  assert.deepEqual(await listed(w), [], "a dry run journals nothing");

  const r = await sb.marsh(["checkout"]);
  ok(r, "checkout");
  assert.match(r.stdout, /checked out checkpoint [0-9a-f]{12} of session fix/);
  assert.deepEqual(pictureDiff(w.post, picture(sb.project)), [], "the tree is the head's root");
  assert.deepEqual(stamps(sb.project, UNTOUCHED), before, "only the differing paths were written");
  assert.deepEqual(picture(`${sb.project}/.git`), git, ".git is never touched");
  const [c, ...more] = await listed(w);
  assert.equal(more.length, 0);
  assert.equal(c?.kind, "checkout");
  assert.equal(c?.scope, "checkout");
  assert.equal(c?.state, "applied");
  assert.equal(c?.paths_changed, DIFFERING.length);
  assert.deepEqual(c?.checkout, { session: "sess1", name: "fix", checkpoint: w.head.id });
  const text = await sb.marsh(["resolutions"]);
  assert.match(text.stdout, new RegExp(`checkout\\s+checkout\\s+applied\\s+session:fix@`));

  const again = await sb.marsh(["checkout"]);
  ok(again, "checkout again");
  assert.match(again.stdout, /nothing to check out/);
  assert.equal((await listed(w)).length, 1);

  const undo = await sb.marsh(["undo", c!.id]);
  ok(undo, "undo");
  assert.match(
    undo.stdout,
    /undid resolution .* \(checkout of checkpoint [0-9a-f]{12} of session fix\)/,
  );
  assertUnchanged(sb.project, w.pre, "after the undo");
  assert.deepEqual(stamps(sb.project, UNTOUCHED), before);
  assert.deepEqual(picture(`${sb.project}/.git`), git);
  const states = (await listed(w)).map((x) => `${x.kind}:${x.state}`);
  assert.deepEqual(states, ["undo:applied", "checkout:undone"]);
});

Deno.test({
  name:
    "marsh checkout over project changes since the start: refused with the paths, nothing changed; --retire-project-changes applies and undo brings them back",
  permissions: PERMS,
}, async () => {
  await using w = await world();
  const { sb } = w;
  Deno.writeTextFileSync(`${sb.project}/same.txt`, "mine\n");
  Deno.writeTextFileSync(`${sb.project}/user.txt`, "user\n");
  Deno.chmodSync(`${sb.project}/a.txt`, 0o600);
  const mine = picture(sb.project);

  for (const args of [["checkout"], ["checkout", "--dry-run"]]) {
    const r = await sb.marsh(args);
    assert.equal(r.code, 1, `${args.join(" ")}: ${show(r)}`);
    assert.match(
      r.stderr,
      /the project changed 3 paths since the session's line began|retires 3 changes/,
    );
    for (const p of ["a.txt", "same.txt", "user.txt"]) {
      assert.ok(r.stderr.includes(`  project change ${p}\n`), `${p} listed: ${r.stderr}`);
    }
    assertUnchanged(sb.project, mine, `${args.join(" ")}: nothing changed`);
  }
  assert.deepEqual(await listed(w), [], "a refusal journals nothing");

  const r = await sb.marsh(["checkout", "--retire-project-changes", "--json"]);
  ok(r, "checkout --retire-project-changes");
  const out = JSON.parse(r.stdout);
  assert.equal(out.outcome, "applied");
  assert.deepEqual(out.source_changes, ["a.txt", "same.txt", "user.txt"]);
  assert.deepEqual(pictureDiff(w.post, picture(sb.project)), [], "the checkpoint's side won");
  const undo = await sb.marsh(["undo", out.resolution.id]);
  ok(undo, "undo");
  assertUnchanged(sb.project, mine, "the project's own changes are back");
});

Deno.test({
  name:
    "marsh checkout: the line goes on from a checkout, so the next head's checkout writes only what the operation changed",
  permissions: PERMS,
}, async () => {
  await using w = await world();
  const { sb } = w;
  ok(await sb.marsh(["checkout"]), "first checkout");
  const after = picture(sb.project);
  // An operation on the head, made as the layers and journal would have it.
  w.add("op2", (p) => Deno.writeTextFileSync(`${p}/new.txt`, "newer\n"));
  Deno.writeTextFileSync(`${sb.project}/new.txt`, "new\n");
  assertUnchanged(sb.project, after, "the project is the first checkout's");
  const dry = await sb.marsh(["checkout", "--dry-run"]);
  ok(dry, "dry run");
  assert.deepEqual(planned(dry.stdout), ["new.txt"]);
  ok(await sb.marsh(["checkout"]), "second checkout");
  assert.equal(Deno.readTextFileSync(`${sb.project}/new.txt`), "newer\n");
  // --checkpoint: back to the session's start, which is the project's line base no more.
  const back = await sb.marsh(["checkout", "--checkpoint", w.startId.slice(0, 8)]);
  ok(back, "checkout of the start");
  assertUnchanged(sb.project, w.pre, "the start's tree");
  const bad = await sb.marsh(["checkout", "--checkpoint", "zzzz"]);
  assert.equal(bad.code, 2, show(bad));
  const none = await sb.marsh(["checkout", "--session", "nope"]);
  assert.equal(none.code, 2, show(none));
  assert.match(none.stderr, /no open session "nope".*\(open: fix; see marsh sessions\)/);
  assertUnchanged(sb.project, w.pre, "bad requests change nothing");
});
