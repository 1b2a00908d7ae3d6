/** The housekeeping frames: what the daemon and the service accept of them. */

import assert from "node:assert/strict";
import { DaemonProtocolError, parseClientFrame, parseDaemonFrame } from "./daemon.ts";
import { MAX_AGE_MS } from "./housekeeping.ts";
import { ProtocolError } from "./protocol_error.ts";
import { parseSplitfsReply, parseSplitfsRequest } from "./splitfs.ts";

Deno.test({ name: "splits.prune and gc.all frames", permissions: {} }, () => {
  const prune = { v: 1, t: "splits.prune", cwd: "/p", olderThanMs: 60_000, dryRun: true };
  assert.deepEqual(parseClientFrame(prune), prune);
  assert.deepEqual(parseClientFrame({ ...prune, cwd: null, olderThanMs: null }), {
    ...prune,
    cwd: null,
    olderThanMs: null,
  });
  for (
    const bad of [
      { ...prune, olderThanMs: -1 },
      { ...prune, olderThanMs: 1.5 },
      { ...prune, olderThanMs: MAX_AGE_MS + 1 },
      { ...prune, olderThanMs: "1h" },
      { ...prune, cwd: "p" },
      { ...prune, dryRun: "yes" },
    ]
  ) {
    assert.throws(() => parseClientFrame(bad), DaemonProtocolError, JSON.stringify(bad));
  }
  assert.deepEqual(parseClientFrame({ v: 1, t: "gc.all", cwd: "/p", dryRun: false }), {
    v: 1,
    t: "gc.all",
    cwd: "/p",
    dryRun: false,
  });
  assert.throws(() => parseClientFrame({ v: 1, t: "gc.all", cwd: "/p" }), DaemonProtocolError);
  // A listing names its cwd, or not.
  assert.deepEqual(parseClientFrame({ v: 1, t: "splits.list", cwd: "/p" }), {
    v: 1,
    t: "splits.list",
    cwd: "/p",
  });
  assert.deepEqual(parseClientFrame({ v: 1, t: "splits.list" }), { v: 1, t: "splits.list" });
});

Deno.test({ name: "splits.pruned and gc.all replies carry their lists", permissions: {} }, () => {
  const pruned = { v: 1, t: "splits.pruned", root: null, dry_run: false, removed: [], failed: [] };
  assert.deepEqual(parseDaemonFrame(pruned), pruned);
  assert.throws(() => parseDaemonFrame({ ...pruned, failed: [{ id: 1 }] }), DaemonProtocolError);
  const all = {
    v: 1,
    t: "gc.all",
    root: "/p",
    dry_run: true,
    splits: [{ id: "a", state: "kept", created_unix_ms: 1, message: "m" }],
    failed: [],
    layers: ["x"],
    bytes: 3,
    gone: true,
    left: [],
    problem: null,
  };
  assert.deepEqual(parseDaemonFrame(all), all);
  assert.throws(() => parseDaemonFrame({ ...all, gone: "yes" }), DaemonProtocolError);
});

Deno.test({ name: "purge request and purged reply", permissions: {} }, () => {
  const req = { v: 1, t: "purge", root: "/p", known: ["abc12345"], dryRun: true };
  assert.deepEqual(parseSplitfsRequest(req), req);
  for (
    const bad of [
      { ...req, root: "p" },
      { ...req, known: ["../x"] },
      { ...req, known: "abc" },
      { ...req, dryRun: 1 },
    ]
  ) {
    assert.throws(() => parseSplitfsRequest(bad), ProtocolError, JSON.stringify(bad));
  }
  const reply = {
    v: 1,
    t: "purged",
    layers: ["l"],
    bytes: 1,
    gone: false,
    left: ["x"],
    problem: "p",
  };
  assert.deepEqual(parseSplitfsReply(reply), reply);
  assert.throws(() => parseSplitfsReply({ ...reply, problem: 3 }), ProtocolError);
});
