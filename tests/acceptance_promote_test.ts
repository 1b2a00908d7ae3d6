/**
 * Acceptance (issue 13 §4, docs/resolution.md): `marsh merge --filesystem`
 * and `--paths` with a binary file, a SQLite database and a symlink,
 * `marsh promote` with and without source changes, and undo of a promote,
 * through the real CLI.
 */

import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { PERMISSIONS, Sandbox } from "./_acceptance.ts";
import { assertUnchanged, expectExit, picture, pictureDiff, splitOf } from "./_resolve.ts";

const FILES = { "a.txt": "a\n", "b.txt": "b\n", "sub/c.txt": "c\n", "sub/d.txt": "d\n" };

/** A SQLite database with one row, its bytes. */
function database(dir: string, name: string, value: string): string {
  const path = `${dir}/${name}`;
  const db = new DatabaseSync(path);
  db.exec("CREATE TABLE t (v TEXT); ");
  db.prepare("INSERT INTO t VALUES (?)").run(value);
  db.close();
  return path;
}

/** The fork of `label` of split `id`, as the manifest names it. */
async function forkOf(sb: Sandbox, id: string, label: string): Promise<string> {
  const s = await sb.split(id);
  const b = s?.branches.find((x) => x.label === label);
  assert.ok(b, `branch ${label} of ${id}`);
  return b.fork;
}

Deno.test({
  name: "merge --filesystem takes a binary file, a SQLite database and a symlink byte for byte",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create({ files: FILES });
  const v1 = database(sb.scratch, "v1.sqlite", "one");
  const v2 = database(sb.scratch, "v2.sqlite", "two");
  Deno.copyFileSync(v1, `${sb.project}/db.sqlite`);
  Deno.writeFileSync(`${sb.project}/data.bin`, new Uint8Array([0, 1, 2, 3]));
  Deno.symlinkSync("a.txt", `${sb.project}/link`);
  const id = await splitOf(sb, {
    fix: `cp '${v2}' db.sqlite && printf '\\0\\377\\376' > data.bin && ln -sfn sub/c.txt link`,
  });
  const fork = await forkOf(sb, id, "fix");
  const want = picture(fork);
  await expectExit(sb, ["merge", id, "fix", "--filesystem"], 0);
  for (const p of ["db.sqlite", "data.bin", "link"]) {
    assert.equal(picture(sb.project).get(p), want.get(p), p);
  }
  const db = new DatabaseSync(`${sb.project}/db.sqlite`);
  assert.deepEqual(db.prepare("SELECT v FROM t").all().map((r) => r.v), ["two"]);
  db.close();
});

Deno.test({
  name: "merge --filesystem: a path changed on both sides is a conflict, and nothing changes",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create({ files: FILES });
  Deno.writeFileSync(`${sb.project}/data.bin`, new Uint8Array([0, 1, 2, 3]));
  const id = await splitOf(sb, { fix: `printf '\\0\\1' > data.bin && echo A > a.txt` });
  Deno.writeFileSync(`${sb.project}/data.bin`, new Uint8Array([0, 9]));
  const before = picture(sb.project, { withGit: true });
  const dry = await expectExit(sb, ["merge", id, "fix", "--filesystem", "--dry-run", "--json"], 1);
  const plan = JSON.parse(dry.stdout);
  assert.equal(plan.clean, false);
  assert.deepEqual(
    plan.paths.map((p: { path: string; action: string }) => `${p.action} ${p.path}`),
    ["take a.txt", "conflict data.bin"],
  );
  const r = await expectExit(sb, ["merge", id, "fix", "--filesystem"], 1);
  assert.match(r.stderr, /data\.bin/);
  assertUnchanged(sb.project, before, "a conflicting --filesystem merge", { withGit: true });
});

Deno.test({
  name: "merge --paths takes only the paths named, relative to the current directory",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create({ files: FILES });
  const id = await splitOf(sb, {
    fix: "echo A > a.txt && echo C > sub/c.txt && echo D > sub/d.txt",
  });
  const before = picture(sb.project);
  // Outside the project: refused, nothing changed.
  await expectExit(sb, ["merge", id, "fix", "--paths", "../../x"], 2, {
    cwd: `${sb.project}/sub`,
  });
  assertUnchanged(sb.project, before, "a refused --paths");
  await expectExit(sb, ["merge", id, "fix", "--paths", "c.txt"], 0, { cwd: `${sb.project}/sub` });
  assert.deepEqual(pictureDiff(before, picture(sb.project)).map((l) => l.split(":")[0]), [
    "sub/c.txt",
  ]);
  assert.equal(Deno.readTextFileSync(`${sb.project}/sub/c.txt`), "C\n");
});

Deno.test({
  name: "promote: the project becomes the branch's result; source changes refuse it unless retired",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create({ files: FILES });
  const id = await splitOf(sb, {
    win:
      "echo A > a.txt && rm -r sub && mkdir -p new/deep && echo n > new/deep/n.txt && chmod +x b.txt",
  });
  const fork = await forkOf(sb, id, "win");
  const result = picture(fork);
  // The user changed a path since the split.
  Deno.writeTextFileSync(`${sb.project}/b.txt`, "user's b\n");
  const before = picture(sb.project, { withGit: true });
  const refused = await expectExit(sb, ["promote", id, "win"], 1);
  assert.match(refused.stderr, /b\.txt/);
  assert.match(refused.stderr, /--retire-source-changes/);
  assertUnchanged(sb.project, before, "a refused promote", { withGit: true });

  await expectExit(sb, ["promote", id, "win", "--retire-source-changes"], 0);
  assert.deepEqual(pictureDiff(result, picture(sb.project)), [], "the tree is the branch's");

  const listed = JSON.parse((await expectExit(sb, ["resolutions", "--json"], 0)).stdout);
  const rid = (Array.isArray(listed) ? listed : listed.resolutions)[0].id as string;
  await expectExit(sb, ["undo", rid], 0);
  assertUnchanged(sb.project, before, "undo of a promote, the retired change included", {
    withGit: true,
  });
});

Deno.test({
  name: "promote with no source change needs no flag",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create({ files: FILES });
  const id = await splitOf(sb, { win: "echo A > a.txt && ln -s a.txt l" });
  const result = picture(await forkOf(sb, id, "win"));
  await expectExit(sb, ["promote", id, "win"], 0);
  assert.deepEqual(pictureDiff(result, picture(sb.project)), []);
});
