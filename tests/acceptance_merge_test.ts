/**
 * Acceptance (issue 13 §4, docs/resolution.md): `marsh merge` through the
 * real CLI, daemon, service and Git: a clean `--git` merge onto a tree the
 * user edited since the split, a conflicting one that changes nothing, every
 * `--dry-run` leaving the tree byte-identical, and `marsh undo`.
 */

import assert from "node:assert/strict";
import { NINE, PERMISSIONS, Sandbox } from "./_acceptance.ts";
import { assertUnchanged, expectExit, picture, splitOf } from "./_resolve.ts";

const FILES = { "a.txt": NINE, "b.txt": "b\n", "sub/c.txt": "c\n" };

Deno.test({
  name: "merge --git: the branch's edit lands beside the user's later edit; undo takes it back",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create({ files: FILES });
  const id = await splitOf(sb, {
    fix: String.raw`sed -i 's/^5$/five/' a.txt && printf 'new\n' > sub/new.txt && rm b.txt`,
  });
  // The user goes on working: a dirty tree is the source side, never a blocker.
  Deno.writeTextFileSync(`${sb.project}/a.txt`, NINE.replace("1\n", "one\n"));
  const gitBefore = picture(`${sb.project}/.git`, { withGit: true });

  const dry = await expectExit(sb, ["merge", id, "fix", "--dry-run", "--json"], 0);
  const plan = JSON.parse(dry.stdout);
  assert.equal(plan.schema, "marsh.merge.plan/v1");
  assert.equal(plan.clean, true);
  assert.deepEqual(
    plan.paths.map((p: { path: string; action: string }) => `${p.action} ${p.path}`),
    ["take a.txt", "delete b.txt", "take sub/new.txt"],
  );

  const before = picture(sb.project);
  await expectExit(sb, ["merge", id, "fix"], 0);
  assert.equal(
    Deno.readTextFileSync(`${sb.project}/a.txt`),
    NINE.replace("1\n", "one\n").replace("5\n", "five\n"),
  );
  assert.equal(Deno.readTextFileSync(`${sb.project}/sub/new.txt`), "new\n");
  assert.throws(() => Deno.lstatSync(`${sb.project}/b.txt`), Deno.errors.NotFound);
  assertUnchanged(`${sb.project}/.git`, gitBefore, "merge never touches .git", { withGit: true });

  const listed = await expectExit(sb, ["resolutions", "--json"], 0);
  const text = listed.stdout;
  assert.match(text, new RegExp(id), "the resolution names its split");
  const resolutions = JSON.parse(text);
  const all = Array.isArray(resolutions) ? resolutions : resolutions.resolutions;
  assert.equal(all.length, 1, text);
  const rid = all[0].id as string;

  await expectExit(sb, ["undo", rid], 0);
  assertUnchanged(sb.project, before, "undo puts back exactly the pre-merge tree");
  // Undone once: a second undo is refused and changes nothing.
  await expectExit(sb, ["undo", rid], 1);
  assertUnchanged(sb.project, before, "a refused undo");
});

Deno.test({
  name: "merge --git with a conflict: exit 1, every conflicting path named, tree byte-identical",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create({ files: FILES });
  const id = await splitOf(sb, {
    fix: String.raw`sed -i 's/^5$/five/' a.txt && sed -i 's/^b$/bee/' b.txt && echo ok > sub/c.txt`,
  });
  Deno.writeTextFileSync(`${sb.project}/a.txt`, NINE.replace("5\n", "FIVE\n"));
  Deno.writeTextFileSync(`${sb.project}/b.txt`, "B\n");
  const before = picture(sb.project, { withGit: true });

  const dry = await expectExit(sb, ["merge", id, "fix", "--dry-run"], 1);
  assert.match(dry.stdout + dry.stderr, /conflict\s+a\.txt/);
  assert.match(dry.stdout + dry.stderr, /conflict\s+b\.txt/);
  assertUnchanged(sb.project, before, "a dry run", { withGit: true });

  const r = await expectExit(sb, ["merge", id, "fix"], 1);
  assert.match(r.stderr, /a\.txt/);
  assert.match(r.stderr, /b\.txt/);
  assert.doesNotMatch(Deno.readTextFileSync(`${sb.project}/a.txt`), /<<<<<<<|>>>>>>>/);
  assertUnchanged(sb.project, before, "a conflicted merge changes nothing", { withGit: true });
  const listed = await expectExit(sb, ["resolutions", "--json"], 0);
  assert.doesNotMatch(listed.stdout, /"applied"/, "nothing was applied");
});

Deno.test({
  name: "undo refuses when a path it would restore changed since; nothing changes",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create({ files: FILES });
  const id = await splitOf(sb, { fix: String.raw`printf 'two\n' >> b.txt` });
  await expectExit(sb, ["merge", id, "fix"], 0);
  const listed = JSON.parse((await expectExit(sb, ["resolutions", "--json"], 0)).stdout);
  const rid = (Array.isArray(listed) ? listed : listed.resolutions)[0].id as string;
  Deno.writeTextFileSync(`${sb.project}/b.txt`, "edited after the merge\n");
  const before = picture(sb.project);
  const r = await expectExit(sb, ["undo", rid], 1);
  assert.match(r.stderr, /b\.txt/);
  assertUnchanged(sb.project, before, "a refused undo");
});

Deno.test({
  name: "merge refuses bad input with exit 2 and changes nothing",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create({ files: FILES });
  const id = await splitOf(sb, { fix: "echo x >> b.txt" });
  const before = picture(sb.project);
  await expectExit(sb, ["merge", id], 2);
  await expectExit(sb, ["merge", id, "fix", "--git", "--filesystem"], 2);
  const unknown = await sb.marsh(["merge", id, "nosuch"]);
  assert.ok(unknown.code === 1 || unknown.code === 2, `unknown label: exit ${unknown.code}`);
  assert.match(unknown.stderr, /nosuch/);
  const noSplit = await sb.marsh(["merge", "zzzzzzzz", "fix"]);
  assert.ok(noSplit.code === 1 || noSplit.code === 2, `unknown split: exit ${noSplit.code}`);
  assertUnchanged(sb.project, before, "refused merges");
});

Deno.test({
  name: "a source file rewritten behind its stats (same size and mtime) is refused at the apply",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create({ files: FILES });
  const ref = `${sb.scratch}/b.ref`;
  const kept = await sb.bash(`cp -p b.txt '${ref}'`);
  assert.equal(kept.code, 0);
  const id = await splitOf(sb, { fix: "echo branch > b.txt" });
  // The user's rewrite keeps b.txt's size and mtime: the plan takes it as the snapshot's bytes.
  const hidden = await sb.bash(`printf 'B\\n' > b.txt && touch -r '${ref}' b.txt`);
  assert.equal(hidden.code, 0);
  const before = picture(sb.project, { withGit: true });
  // The plan trusts the stats (Git's stat check has the same blind spot) ...
  const dry = await expectExit(sb, ["merge", id, "fix", "--dry-run"], 0);
  assert.match(dry.stdout, /^take\s+b\.txt/m);
  // ... and the apply does not: it hashes every path it would replace.
  const r = await expectExit(sb, ["merge", id, "fix"], 1);
  assert.match(r.stderr, /b\.txt/);
  assertUnchanged(sb.project, before, "the applier's re-check hashes what it replaces", {
    withGit: true,
  });
  assert.equal(Deno.readTextFileSync(`${sb.project}/b.txt`), "B\n");
});
