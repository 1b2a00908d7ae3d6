/**
 * `marsh merge`, `promote`, `choose`, `undo` and `resolutions` through the
 * real launcher and CLI, against the stand-in daemon of `_fake_daemon.ts`
 * (it stands for the daemon's side, `daemon/resolutions.ts`, tested in
 * `daemon/resolutions_test.ts`): the frames sent, the output and the exit
 * statuses.
 */
import assert from "node:assert/strict";
import type { MergePlan } from "../model/resolution_plan.ts";
import { planToJson, renderPlanText } from "../model/resolution_plan_json.ts";
import type { ResolutionInfo, ResolvedReply } from "../protocol/daemon_resolve.ts";
import { cliTestPermissions as permissions, FakeDaemon, marsh, tempHome } from "./_fake_daemon.ts";
import { formatResolutions } from "./resolutions_command.ts";

const sig = (b: string) => ({ kind: "file" as const, mode: 0o644, blob: b.repeat(40) });
const PLAN: MergePlan = {
  scope: "git",
  trees: { base: "a".repeat(40), source: "b".repeat(40), branch: "c".repeat(40), result: null },
  entries: [
    {
      op: "conflict",
      path: "db.sqlite",
      base: sig("1"),
      source: sig("2"),
      branch: sig("3"),
      reason: "both sides changed it",
    },
    { op: "take", path: "src/a.ts", before: sig("1"), after: sig("4"), bytes: "store" },
  ],
};
const CLEAN: MergePlan = { ...PLAN, entries: PLAN.entries.slice(1) };

const INFO: ResolutionInfo = {
  id: "lq2k7x1c-9f3a0b12",
  split: "S1",
  label: "a",
  kind: "merge",
  scope: "git",
  state: "applied",
  who: "host",
  root: "/work/p",
  created_unix_ms: Date.UTC(2025, 0, 2, 3, 4, 5),
  finished_unix_ms: Date.UTC(2025, 0, 2, 3, 4, 6),
  paths_changed: 1,
  summary: { take: 1, delete: 0, converged: 0, conflict: 0 },
  trees: CLEAN.trees,
  undoes: null,
  undone_by: null,
  restore_point: "/work/p/.marsh/resolve/lq2k7x1c-9f3a0b12",
  message: null,
};

function resolved(over: Partial<ResolvedReply>): ResolvedReply {
  return {
    v: 1,
    t: "resolved",
    outcome: "applied",
    code: 0,
    message: "done",
    plan: false,
    resolution: null,
    changed: [],
    changedMore: 0,
    sourceChanges: [],
    sourceChangesMore: 0,
    discarded: [],
    ...over,
  };
}

Deno.test({ name: "merge: dry run, conflict, applied, --paths", permissions }, async () => {
  await using home = await tempHome();
  await using daemon = await FakeDaemon.listen(`${home.path}/marshd.sock`);
  const doc = JSON.stringify(planToJson(PLAN));
  const answer = (async () => {
    // --dry-run: the plan in two pieces.
    let conn = await daemon.accept();
    assert.deepEqual(await conn.next(), {
      v: 1,
      t: "resolve.merge",
      id: "S1",
      label: "a",
      scope: "git",
      dryRun: true,
      cwd: await Deno.realPath(home.path),
    });
    await conn.send({ v: 1, t: "resolve.plan", data: doc.slice(0, 100) });
    await conn.send({ v: 1, t: "resolve.plan", data: doc.slice(100) });
    await conn.send(resolved({ outcome: "planned", code: 1, plan: true, message: "dry run" }));
    // --dry-run --json.
    conn = await daemon.accept();
    await conn.expect("resolve.merge");
    await conn.send({ v: 1, t: "resolve.plan", data: doc });
    await conn.send(resolved({ outcome: "planned", code: 1, plan: true, message: "dry run" }));
    // A conflict.
    conn = await daemon.accept();
    await conn.expect("resolve.merge");
    await conn.send({ v: 1, t: "resolve.plan", data: doc });
    await conn.send(resolved({
      outcome: "conflict",
      code: 1,
      plan: true,
      message: "1 conflicting path; nothing was changed",
    }));
    // Applied, --filesystem.
    conn = await daemon.accept();
    const fs = await conn.expect("resolve.merge");
    assert.equal(fs.scope, "filesystem");
    await conn.send(
      resolved({ message: "merged branch a of split S1 into /work/p: ...", resolution: INFO }),
    );
    // --paths.
    conn = await daemon.accept();
    const paths = await conn.expect("resolve.merge");
    assert.deepEqual([paths.scope, paths.paths], ["paths", ["test.db", "reports/"]]);
    await conn.send({ v: 1, t: "error", code: 2, message: '--paths "x" is outside the project' });
  })();
  const opts = { home: home.path, stdin: "null" as const };
  let r = await marsh(["merge", "S1", "a", "--dry-run"], opts);
  assert.equal(r.code, 1, r.stderr);
  assert.equal(r.text, renderPlanText(PLAN));
  assert.equal(r.stderr, "marsh merge: dry run\n");
  r = await marsh(["merge", "S1", "a", "--dry-run", "--json"], opts);
  assert.equal(r.code, 1, r.stderr);
  assert.deepEqual(JSON.parse(r.text), planToJson(PLAN));
  r = await marsh(["merge", "S1", "a"], opts);
  assert.equal(r.code, 1);
  assert.equal(r.text, "");
  assert.equal(
    r.stderr,
    "marsh merge: 1 conflicting path; nothing was changed\n  conflict db.sqlite: both sides changed it\n",
  );
  r = await marsh(["merge", "S1", "a", "--filesystem"], opts);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.text, "merged branch a of split S1 into /work/p: ...\n");
  r = await marsh(["merge", "S1", "a", "--paths", "test.db", "reports/"], opts);
  assert.equal(r.code, 2);
  assert.equal(r.stderr, 'marsh merge: --paths "x" is outside the project\n');
  await answer;
  // Usage errors never reach the daemon.
  r = await marsh(["merge", "S1", "a", "--git", "--paths", "x"], opts);
  assert.equal(r.code, 2);
  assert.equal(r.stderr, "marsh merge: --git and --paths exclude each other; give one scope\n");
});

Deno.test(
  { name: "promote, undo and choose: refusals list their paths", permissions },
  async () => {
    await using home = await tempHome();
    await using daemon = await FakeDaemon.listen(`${home.path}/marshd.sock`);
    const answer = (async () => {
      let conn = await daemon.accept();
      const p = await conn.expect("resolve.promote");
      assert.deepEqual([p.retireSourceChanges, p.dryRun], [false, false]);
      await conn.send(resolved({
        outcome: "refused",
        code: 1,
        message:
          "the project changed 3 paths since split S1's snapshot; ... --retire-source-changes",
        sourceChanges: ["a.txt", "b.txt"],
        sourceChangesMore: 1,
      }));
      conn = await daemon.accept();
      assert.deepEqual(await conn.next(), { v: 1, t: "resolve.undo", resolution: "r1" });
      await conn.send(resolved({
        outcome: "refused",
        code: 1,
        message: "1 path changed since the resolution",
        changed: [{ path: "src/a.ts", expected: "file 0644 4444444444", found: "absent" }],
      }));
      conn = await daemon.accept();
      assert.deepEqual(await conn.next(), { v: 1, t: "resolve.undo", resolution: "r2" });
      await conn.send(resolved({ outcome: "failed", code: 125, message: "EIO; rolled back" }));
      conn = await daemon.accept();
      const c = await conn.expect("resolve.choose");
      assert.deepEqual([c.how, c.reason, c.retireSourceChanges], ["filesystem", "faster", false]);
      await conn.send(
        resolved({
          message: "merged ...; discarded b, c",
          discarded: ["b", "c"],
          resolution: INFO,
        }),
      );
    })();
    const opts = { home: home.path, stdin: "null" as const };
    let r = await marsh(["promote", "S1", "b"], opts);
    assert.equal(r.code, 1);
    assert.equal(
      r.stderr,
      "marsh promote: the project changed 3 paths since split S1's snapshot; ... --retire-source-changes\n" +
        "  source change a.txt\n  source change b.txt\n  and 1 more\n",
    );
    r = await marsh(["undo", "r1"], opts);
    assert.equal(r.code, 1);
    assert.equal(
      r.stderr,
      "marsh undo: 1 path changed since the resolution\n" +
        "  changed src/a.ts: expected file 0644 4444444444, found absent\n",
    );
    r = await marsh(["undo", "r2"], opts);
    assert.equal(r.code, 125);
    assert.equal(r.stderr, "marsh undo: EIO; rolled back\n");
    r = await marsh(
      ["choose", "S1", "a", "--merge", "filesystem", "--reason", "faster", "--json"],
      opts,
    );
    assert.equal(r.code, 0, r.stderr);
    const out = JSON.parse(r.text);
    assert.equal(out.schema, "marsh.resolution.result/v1");
    assert.deepEqual(out.discarded, ["b", "c"]);
    assert.equal(out.resolution.id, INFO.id);
    await answer;
    r = await marsh(["choose", "S1", "a", "--merge", "--promote"], opts);
    assert.equal(r.code, 2);
    assert.equal(r.stderr, "marsh choose: give one of --merge [git|filesystem] and --promote\n");
    r = await marsh(["choose", "S1", "a", "--merge", "paths"], opts);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /unknown merge scope "paths": use git or filesystem/);
  },
);

Deno.test({ name: "resolutions: text and JSON", permissions }, async () => {
  await using home = await tempHome();
  await using daemon = await FakeDaemon.listen(`${home.path}/marshd.sock`);
  const undone: ResolutionInfo = { ...INFO, state: "undone", undone_by: "u1", paths_changed: 1 };
  const undo: ResolutionInfo = {
    ...INFO,
    id: "u1",
    kind: "undo",
    scope: "undo",
    undoes: INFO.id,
    created_unix_ms: INFO.created_unix_ms + 60_000,
    restore_point: "/work/p/.marsh/resolve/u1",
  };
  const answer = (async () => {
    for (let i = 0; i < 2; i++) {
      const conn = await daemon.accept();
      await conn.expect("resolutions.list");
      await conn.send({ v: 1, t: "resolutions", resolutions: [undo, undone], more: 0 });
    }
  })();
  const opts = { home: home.path, stdin: "null" as const };
  const text = await marsh(["resolutions"], opts);
  assert.equal(text.code, 0, text.stderr);
  assert.equal(text.text, formatResolutions([undo, undone]));
  assert.deepEqual(text.text.split("\n").slice(0, 3).map((l) => l.split(/\s+/)), [
    ["ID", "KIND", "SCOPE", "STATE", "BRANCH", "WHO", "WHEN", "PATHS", "RESTORE", "POINT"],
    [
      "u1",
      "undo",
      "undo",
      "applied",
      "S1:a",
      "host",
      "2025-01-02T03:05:05.000Z",
      "1",
      "/work/p/.marsh/resolve/u1",
    ],
    ["", "undoes", INFO.id],
  ]);
  assert.match(text.text, /\n {2}undone by u1\n/);
  const json = await marsh(["resolutions", "--json"], opts);
  assert.equal(json.code, 0, json.stderr);
  assert.deepEqual(JSON.parse(json.text), { resolutions: [undo, undone], more: 0 });
  await answer;
  assert.equal(formatResolutions([]), "no resolutions\n");
});
