import assert from "node:assert/strict";
import { DaemonProtocolError, parseClientFrame, parseDaemonFrame } from "./daemon.ts";

const merge = {
  v: 1,
  t: "resolve.merge",
  id: "s1",
  label: "a",
  scope: "paths",
  paths: ["x", "y/z"],
  dryRun: true,
  cwd: "/w/p",
};

Deno.test(
  { name: "resolution requests parse; malformed ones are refused", permissions: {} },
  () => {
    assert.deepEqual(parseClientFrame(merge), merge);
    assert.deepEqual(parseClientFrame({ v: 1, t: "resolutions.list" }), {
      v: 1,
      t: "resolutions.list",
    });
    assert.deepEqual(parseClientFrame({ v: 1, t: "resolve.undo", resolution: "r1" }), {
      v: 1,
      t: "resolve.undo",
      resolution: "r1",
    });
    const choose = {
      v: 1,
      t: "resolve.choose",
      id: "s1",
      label: "a",
      how: "promote",
      retireSourceChanges: true,
      cwd: "/w/p",
      reason: null,
    };
    assert.deepEqual(parseClientFrame(choose), choose);
    const bad: [Record<string, unknown>, RegExp][] = [
      [{ ...merge, scope: "everything" }, /scope/],
      [{ ...merge, scope: "git" }, /paths go with the paths scope only/],
      [{ ...merge, paths: [] }, /paths must be 1 to/],
      [{ ...merge, paths: [1] }, /paths must be 1 to/],
      [{ ...merge, cwd: "rel" }, /cwd must be an absolute path/],
      [{ ...merge, dryRun: "yes" }, /dryRun/],
      [{ ...choose, how: "squash" }, /how/],
      [{ ...choose, reason: 3 }, /reason/],
      [{ v: 1, t: "resolve.undo", resolution: "" }, /resolution/],
      [{ v: 1, t: "resolve.promote", id: "s1", label: "a", dryRun: false }, /retireSourceChanges/],
    ];
    for (const [frame, why] of bad) {
      assert.throws(() => parseClientFrame(frame), (e: unknown) => {
        assert.ok(e instanceof DaemonProtocolError, String(e));
        assert.match(e.message, why);
        return true;
      });
    }
  },
);

Deno.test(
  { name: "resolution replies are checked for what the CLI reads", permissions: {} },
  () => {
    const resolved = {
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
    };
    assert.deepEqual(parseDaemonFrame(resolved), resolved);
    assert.deepEqual(parseDaemonFrame({ v: 1, t: "resolve.plan", data: "{" }), {
      v: 1,
      t: "resolve.plan",
      data: "{",
    });
    assert.throws(() => parseDaemonFrame({ ...resolved, changed: null }), /malformed resolved/);
    assert.throws(() => parseDaemonFrame({ v: 1, t: "resolutions", resolutions: [] }), /malformed/);
  },
);
