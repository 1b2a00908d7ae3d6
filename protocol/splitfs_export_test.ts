import assert from "node:assert/strict";
import { parseSplitfsReply, parseSplitfsRequest, ProtocolError } from "./splitfs.ts";
import { MAX_EXPORT_LAYERS, MAX_PATCH_PATHS } from "./splitfs_export.ts";
import { parseClientFrame, parseDaemonFrame } from "./daemon.ts";

const ROOT = "a".repeat(40);

Deno.test("export-root and checkpoint-patch requests parse, and malformed ones are refused", () => {
  const req = { v: 1, t: "export-root", root: "/p", layers: ["abcd1234"], rootId: ROOT };
  assert.deepEqual(parseSplitfsRequest(req), req);
  const patch = {
    v: 1,
    t: "checkpoint-patch",
    root: "/p",
    from: [],
    to: ["abcd1234"],
    patch: true,
  };
  assert.deepEqual(parseSplitfsRequest(patch), patch);
  for (
    const bad of [
      { ...req, root: "p" },
      { ...req, rootId: "xyz" },
      { ...req, layers: ["../x"] },
      { ...req, layers: Array(MAX_EXPORT_LAYERS + 1).fill("abcd1234") },
      { ...patch, patch: "yes" },
      { ...patch, from: "abcd1234" },
    ]
  ) assert.throws(() => parseSplitfsRequest(bad), ProtocolError, JSON.stringify(bad));
});

Deno.test("the export replies parse, and malformed ones are refused", () => {
  const done = {
    v: 1,
    t: "root-exported",
    gitDir: "/p/.git",
    objectsDir: "/p/.git/objects",
    blobs: 1,
    trees: 2,
    bytes: 3,
    present: 4,
  };
  assert.deepEqual(parseSplitfsReply(done), done);
  const no = { v: 1, t: "export-unsupported", path: "a/b", kind: "empty-directory", message: "m" };
  assert.deepEqual(parseSplitfsReply(no), no);
  assert.throws(() => parseSplitfsReply({ ...no, kind: "other" }), ProtocolError);
  const patched = {
    v: 1,
    t: "checkpoint-patched",
    changed: 1,
    paths: [{ path: "a", status: "M" }],
    bytes: 9,
  };
  assert.deepEqual(parseSplitfsReply(patched), patched);
  assert.throws(
    () => parseSplitfsReply({ ...patched, paths: [{ path: "a", status: "X" }] }),
    ProtocolError,
  );
  assert.throws(
    () =>
      parseSplitfsReply({
        ...patched,
        paths: Array(MAX_PATCH_PATHS + 1).fill({ path: "a", status: "A" }),
      }),
    ProtocolError,
  );
});

Deno.test("checkpoint.export and checkpoint.show frames parse, and malformed ones are refused", () => {
  const ex = { v: 1, t: "checkpoint.export", cwd: "/p", session: null, checkpoint: "3f9a" };
  assert.deepEqual(parseClientFrame(ex), ex);
  const sh = { v: 1, t: "checkpoint.show", cwd: "/p", checkpoint: "3f9a", patch: false };
  assert.deepEqual(parseClientFrame(sh), sh);
  for (
    const bad of [
      { ...ex, session: "" },
      { ...ex, checkpoint: 3 },
      { ...sh, patch: 1 },
      { ...sh, checkpoint: null },
    ]
  ) assert.throws(() => parseClientFrame(bad), Error, JSON.stringify(bad));
  const info = {
    id: "c",
    kind: "start",
    session: { id: "s", name: "fix" },
    root: ROOT,
    layers: [],
  };
  const shown = { v: 1, t: "checkpoint.shown", checkpoint: info, changed: 0, paths: [] };
  assert.deepEqual(parseDaemonFrame(shown), shown);
  assert.throws(() => parseDaemonFrame({ ...shown, paths: null }), Error);
  const exported = {
    v: 1,
    t: "checkpoint.exported",
    project: "/p",
    checkpoint: info,
    git_dir: "/p/.git",
    objects_dir: "/p/.git/objects",
    blobs: 0,
    trees: 0,
    bytes: 0,
    present: 1,
    unsupported: null,
  };
  assert.deepEqual(parseDaemonFrame(exported), exported);
  assert.throws(() => parseDaemonFrame({ ...exported, unsupported: "x" }), Error);
});
