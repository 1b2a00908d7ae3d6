import assert from "node:assert/strict";
import { Journal } from "../journal/journal.ts";
import { freshPath, scratchDir } from "../journal/_testing.ts";
import { drained, EMPTY, PROJECT, startSession } from "../journal/_checkpoint_testing.ts";
import {
  chooseSession,
  defaultSessionName,
  newRecordId,
  newSessionName,
  projectCheckpoints,
  resolveCheckpoint,
} from "./session_context.ts";
import { RequestError } from "./request_error.ts";
import { isRecordId } from "../model/checkpoint.ts";

const dir = scratchDir("session-context");
const permissions: Deno.PermissionOptions = { read: [dir], write: [dir] };

function refusal(fn: () => unknown, code: number, message: RegExp): void {
  assert.throws(fn, (e: unknown) => {
    assert.ok(e instanceof RequestError, String(e));
    assert.equal(e.code, code);
    assert.match(e.message, message);
    return true;
  });
}

Deno.test("resolveCheckpoint: the full id, a unique 8+ digit prefix, else a clear refusal", () => {
  const a = "ab12cd34" + "0".repeat(56);
  const b = "ab12cd34" + "1".repeat(56);
  const c = "ff00ff00" + "2".repeat(56);
  const ids = [a, b, c];
  assert.equal(resolveCheckpoint(ids, a, "here"), a);
  assert.equal(resolveCheckpoint(ids, "FF00FF00", "here"), c, "case does not matter");
  assert.equal(resolveCheckpoint(ids, "ab12cd341", "here"), b);
  refusal(
    () => resolveCheckpoint(ids, "ab12cd34", "session fix"),
    2,
    /^checkpoint prefix ab12cd34 is ambiguous in session fix: it names ab12cd3400000000, ab12cd3411111111; give more digits$/,
  );
  refusal(() => resolveCheckpoint(ids, "ab12cd3", "here"), 2, /at least 8 of its leading hex/);
  refusal(() => resolveCheckpoint(ids, "zz12cd34", "here"), 2, /^invalid checkpoint "zz12cd34"/);
  refusal(() => resolveCheckpoint(ids, "a".repeat(65), "here"), 2, /^invalid checkpoint/);
  refusal(
    () => resolveCheckpoint(ids, "12345678", "here"),
    2,
    /^unknown checkpoint 12345678 in here/,
  );
});

Deno.test({ name: "chooseSession: by name, else the one open session", permissions }, () => {
  using j = Journal.open(freshPath(dir));
  const c = j.checkpoints;
  refusal(() => chooseSession(c, PROJECT, null), 2, /^no open session in \/work\/p: start one/);
  const fix = startSession(c, "s1", "fix");
  assert.equal(chooseSession(c, PROJECT, null).id, fix.id);
  assert.equal(chooseSession(c, PROJECT, "fix").id, fix.id);
  startSession(c, "s2", "try");
  refusal(
    () => chooseSession(c, PROJECT, null),
    2,
    /^2 sessions are open in \/work\/p \(fix, try\): name one with --session NAME/,
  );
  refusal(() => chooseSession(c, PROJECT, "nope"), 2, /^no open session "nope" .*open: fix, try/);
  refusal(() => chooseSession(c, PROJECT, "a b"), 2, /^invalid session name "a b"/);
  refusal(() => chooseSession(c, "/elsewhere", "fix"), 2, /^no open session "fix" in \/elsewhere/);
});

Deno.test({ name: "session names: s1, s2, ...; a name in use is refused", permissions }, () => {
  using j = Journal.open(freshPath(dir));
  const c = j.checkpoints;
  assert.equal(defaultSessionName(c, PROJECT), "s1");
  startSession(c, "x1", "s1");
  startSession(c, "x3", "s3");
  assert.equal(defaultSessionName(c, PROJECT), "s2");
  refusal(() => newSessionName(c, PROJECT, "s1"), 1, /^a session named "s1" is already open/);
  refusal(() => newSessionName(c, PROJECT, ".hidden"), 2, /^invalid session name/);
  assert.equal(newSessionName(c, PROJECT, "s2"), "s2");
  c.removeSession("x1", 2_000);
  assert.equal(defaultSessionName(c, PROJECT), "s1", "a removed session's name is free");
});

Deno.test({ name: "projectCheckpoints: every session's, removed ones too", permissions }, () => {
  using j = Journal.open(freshPath(dir));
  const c = j.checkpoints;
  const s = startSession(c, "s1", "fix");
  drained(c, "s1", "o1");
  const bound = c.bindCheckpoint("o1", { createdMs: 3_000, noChange: { changes: EMPTY } });
  assert.equal(bound.kind, "bound");
  c.removeSession("s1", 4_000);
  const ids = projectCheckpoints(c, PROJECT);
  assert.equal(ids.size, 2);
  assert.ok(ids.has(s.head));
  assert.equal(projectCheckpoints(c, "/elsewhere").size, 0);
});

Deno.test("newRecordId: valid and distinct", () => {
  const a = newRecordId("o"), b = newRecordId("o");
  assert.ok(isRecordId(a) && isRecordId(b), `${a} ${b}`);
  assert.notEqual(a, b);
});
