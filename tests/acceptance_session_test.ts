/**
 * Acceptance (issue 14 §1-§2): checkpoint sessions through the real CLI,
 * daemon, worker and splitfs service (docs/guide.md "Checkpoint sessions").
 * A session started on a Git project with a dirty tree; operations that
 * edit, delete, fail with exit 3 (still checkpointed), change nothing, read
 * stdin and run from a subdirectory; the log; a rollback, an operation after
 * it and the abandoned future in `log --all`; a fork; a session removed; bad
 * input refused with nothing changed; and the project's own tree, `.git`
 * included, byte-identical after all of it.
 */

import assert from "node:assert/strict";
import { exists, PERMISSIONS, type Result, Sandbox, show, waitFor } from "./_acceptance.ts";
import { assertUnchanged, picture, pictureDiff } from "./_resolve.ts";
import type { LogEntryInfo, SessionInfo } from "../protocol/daemon_session.ts";

const CHECKPOINT_LINE = /marsh: checkpoint ([0-9a-f]{64}) \((.*)\)\n$/;

/** The checkpoint id `marsh op` printed on stderr, and what it said changed. */
function checkpointOf(r: Result): { id: string; what: string } {
  const m = CHECKPOINT_LINE.exec(r.stderr);
  assert.ok(m, `no checkpoint line: ${show(r)}`);
  return { id: m[1]!, what: m[2]! };
}

async function sessions(sb: Sandbox): Promise<SessionInfo[]> {
  const r = await sb.marsh(["sessions", "--json"]);
  assert.equal(r.code, 0, show(r));
  return (JSON.parse(r.stdout) as { sessions: SessionInfo[] }).sessions;
}

async function log(sb: Sandbox, ...args: string[]): Promise<LogEntryInfo[]> {
  const r = await sb.marsh(["log", "--json", ...args]);
  assert.equal(r.code, 0, show(r));
  return (JSON.parse(r.stdout) as { entries: LogEntryInfo[] }).entries;
}

/** Runs `marsh ARGS`, asserting its status and its stderr's first line when given. */
async function refused(
  sb: Sandbox,
  args: string[],
  code: number,
  stderr: RegExp,
): Promise<void> {
  const r = await sb.marsh(args);
  assert.equal(r.code, code, `marsh ${args.join(" ")}: ${show(r)}`);
  assert.match(r.stderr, stderr, `marsh ${args.join(" ")}`);
  assert.equal(r.stdout, "", `marsh ${args.join(" ")} prints nothing on stdout`);
}

Deno.test({
  name:
    "sessions: start, op (edit, delete, exit 3, no change, stdin, subdir), log, rollback, fork, rm",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create({
    files: { "a.txt": "hello\n", "b.txt": "bee\n", "sub/c.txt": "sea\n" },
  });
  // A dirty tree: an uncommitted edit and an untracked file are in the snapshot.
  Deno.writeTextFileSync(`${sb.project}/a.txt`, "hello, uncommitted\n");
  Deno.writeTextFileSync(`${sb.project}/u.txt`, "untracked\n");
  const before = picture(sb.project, { withGit: true });
  const files = picture(sb.project);

  const started = await sb.marsh(["session", "start", "fix"]);
  assert.equal(started.code, 0, show(started));
  const [fix, ...others] = await sessions(sb);
  assert.equal(others.length, 0);
  assert.equal(fix!.name, "fix");
  assert.equal(fix!.view, `${sb.project}/.marsh/session/fix/view`);
  assert.equal(fix!.view_root, fix!.root, "the view shows the head's root");
  assert.equal(fix!.view_class, "virtual");
  assert.equal(fix!.view_visible, "host", "a root daemon's view is mounted where the user looks");
  assert.equal(fix!.rollback_protection, "unavailable");
  assert.match(
    started.stdout,
    new RegExp(`^session fix started at checkpoint ${fix!.head.slice(0, 12)}`),
  );
  const view = fix!.view;
  assert.deepEqual(pictureDiff(files, picture(view)), [], "the view shows the dirty tree");
  const startId = fix!.head;

  // An edit, output on both streams, exit 3: still a checkpoint.
  const edit = await sb.marsh([
    "op",
    "--",
    "bash",
    "-c",
    "echo edited > a.txt; echo out; echo err >&2; exit 3",
  ]);
  assert.equal(edit.code, 3, show(edit));
  assert.equal(edit.stdout, "out\n");
  assert.ok(edit.stderr.startsWith("err\n"), show(edit));
  const c1 = checkpointOf(edit);
  assert.equal(c1.what, "1 path changed");
  assert.equal(Deno.readTextFileSync(`${view}/a.txt`), "edited\n", "the view follows the head");

  // A delete: argv as given, no shell.
  const rm = await sb.marsh(["op", "--", "rm", "b.txt"]);
  assert.equal(rm.code, 0, show(rm));
  const c2 = checkpointOf(rm);
  assert.ok(!exists(`${view}/b.txt`));

  // stdin reaches the command; an argument with spaces and quotes arrives as one word.
  const fed = await sb.marsh(["op", "--", "bash", "-c", 'cat > "$1"', "-", "d e'f.txt"], {
    stdin: "from stdin\n",
  });
  assert.equal(fed.code, 0, show(fed));
  const c3 = checkpointOf(fed);
  assert.equal(Deno.readTextFileSync(`${view}/d e'f.txt`), "from stdin\n");

  // No change: a checkpoint with the same root.
  const none = await sb.marsh(["op", "--", "true"]);
  assert.equal(none.code, 0, show(none));
  const c4 = checkpointOf(none);
  assert.equal(c4.what, "no change");

  // From a subdirectory of the project: the command runs at its place in the overlay.
  const sub = await sb.marsh(["op", "--", "bash", "-c", "pwd; echo here > here.txt"], {
    cwd: `${sb.project}/sub`,
  });
  assert.equal(sub.code, 0, show(sub));
  assert.equal(sub.stdout, `${sb.project}/sub\n`, "the op sees its overlay at the project's path");
  const c5 = checkpointOf(sub);
  assert.equal(Deno.readTextFileSync(`${view}/sub/here.txt`), "here\n");

  // Each op's private dir goes with it: after the reply, so the CLI may return first
  // (docs/checkpoints.md, "An operation", step 7).
  const ops = `${sb.project}/.marsh/session/fix/op`;
  const left = () => exists(ops) ? [...Deno.readDirSync(ops)].map((e) => e.name) : [];
  await waitFor("the op dirs to go", () => left().length === 0).catch(() => undefined);
  assert.deepEqual(left(), []);

  // The log, head first.
  let entries = await log(sb);
  assert.deepEqual(entries.map((e) => e.checkpoint), [c5.id, c4.id, c3.id, c2.id, c1.id, startId]);
  const [e5, e4, e3, e2, e1, e0] = entries;
  assert.equal(e5!.head, true);
  assert.deepEqual(e1!.operation?.argv, [
    "bash",
    "-c",
    "echo edited > a.txt; echo out; echo err >&2; exit 3",
  ]);
  assert.equal(e1!.operation?.execution, "exited");
  assert.equal(e1!.operation?.exit, 3);
  assert.equal(e1!.operation?.disposition, "sealed");
  // A root daemon: the op saw its overlay at the project's own path (DG-S07).
  assert.equal(e1!.operation?.view, "project");
  assert.match(e1!.operation?.view_reason ?? "", /^root: /);
  assert.deepEqual(e1!.paths, [{ path: "a.txt", change: "modified" }]);
  assert.deepEqual(e2!.paths, [{ path: "b.txt", change: "deleted" }]);
  assert.deepEqual(e3!.paths, [{ path: "d e'f.txt", change: "added" }]);
  assert.equal(e4!.operation?.disposition, "no-change");
  assert.equal(e4!.changed, 0);
  assert.equal(e4!.root, e3!.root, "no change keeps the root");
  assert.equal(e5!.operation?.cwd, "sub");
  assert.deepEqual(e5!.paths, [{ path: "sub/here.txt", change: "added" }]);
  assert.equal(e0!.kind, "start");
  const text = await sb.marsh(["log"]);
  assert.equal(text.code, 0, show(text));
  assert.match(
    text.stdout,
    /\n {2}\$ bash -c 'echo edited > a\.txt; echo out; echo err >&2; exit 3'\n {2}exit 3, sealed; 1 changed\n {4}modified a\.txt\n/,
  );

  // Rollback to c1 by an abbreviated id: the view shows b.txt again, nothing else changed.
  const back = await sb.marsh(["rollback", c1.id.slice(0, 10)]);
  assert.equal(back.code, 0, show(back));
  assert.equal(Deno.readTextFileSync(`${view}/b.txt`), "bee\n");
  assert.equal(Deno.readTextFileSync(`${view}/a.txt`), "edited\n");
  assert.ok(!exists(`${view}/sub/here.txt`));
  entries = await log(sb);
  assert.deepEqual(entries.map((e) => e.checkpoint), [c1.id, startId]);
  // An operation after the rollback continues from c1; the abandoned future stays in --all.
  const after = await sb.marsh(["op", "--", "bash", "-c", "echo again >> b.txt"]);
  assert.equal(after.code, 0, show(after));
  const c6 = checkpointOf(after);
  assert.equal(Deno.readTextFileSync(`${view}/b.txt`), "bee\nagain\n");
  entries = await log(sb, "--all");
  assert.deepEqual(entries.filter((e) => e.on_head).map((e) => e.checkpoint), [
    c6.id,
    c1.id,
    startId,
  ]);
  assert.deepEqual(
    new Set(entries.filter((e) => !e.on_head).map((e) => e.checkpoint)),
    new Set([c2.id, c3.id, c4.id, c5.id]),
  );

  // marsh gc keeps what a rollback can reach: the abandoned future mounts after it.
  const gc = await sb.marsh(["gc"]);
  assert.equal(gc.code, 0, show(gc));
  const forward = await sb.marsh(["rollback", "--json", c5.id]);
  assert.equal(forward.code, 0, show(forward));
  const moved = JSON.parse(forward.stdout);
  assert.equal(moved.from, c6.id);
  assert.equal(moved.to, c5.id);
  assert.equal(typeof moved.head_ms, "number", "the head's move, timed");
  assert.equal(typeof moved.view_ms, "number", "the view's remount, timed apart");
  assert.equal(Deno.readTextFileSync(`${view}/sub/here.txt`), "here\n");
  assert.ok(!exists(`${view}/b.txt`));
  const again = await sb.marsh(["rollback", c6.id.slice(0, 8)]);
  assert.equal(again.code, 0, show(again));
  assert.equal(Deno.readTextFileSync(`${view}/b.txt`), "bee\nagain\n");

  const forked = await sb.marsh(["fork", "--from", startId.slice(0, 8), "try2"]);
  assert.equal(forked.code, 0, show(forked));
  const listed = await sessions(sb);
  assert.deepEqual(listed.map((s) => s.name), ["fix", "try2"]);
  assert.equal(listed[1]!.head, startId);
  assert.deepEqual(pictureDiff(files, picture(listed[1]!.view)), []);
  // Two sessions: the op needs a name (--session, MARSH_SESSION, or the view it runs in).
  await refused(
    sb,
    ["op", "--", "true"],
    2,
    /^marsh op: 2 sessions are open in .* \(fix, try2\): name one with --session NAME or MARSH_SESSION=NAME\n$/,
  );
  const inTry2 = await sb.marsh(["op", "--", "bash", "-c", "echo t2 > a.txt"], {
    env: { MARSH_SESSION: "try2" },
  });
  assert.equal(inTry2.code, 0, show(inTry2));
  const fromView = await sb.marsh(["op", "--", "bash", "-c", "pwd; echo v > v.txt"], {
    cwd: `${listed[1]!.view}/sub`,
  });
  assert.equal(fromView.code, 0, show(fromView));
  assert.equal(fromView.stdout, `${sb.project}/sub\n`);
  assert.equal(Deno.readTextFileSync(`${listed[1]!.view}/a.txt`), "t2\n");
  assert.equal(Deno.readTextFileSync(`${listed[1]!.view}/sub/v.txt`), "v\n");
  assert.equal(Deno.readTextFileSync(`${view}/a.txt`), "edited\n", "fix did not move");
  assert.equal((await log(sb, "--session", "fix"))[0]!.checkpoint, c6.id);

  // Bad input: a clear error, status 2 (or 1 for a name in use), nothing changed.
  const fixHead = c6.id;
  await refused(
    sb,
    ["log", "--session", "nope"],
    2,
    /^marsh log: no open session "nope" in .* \(open: fix, try2; see marsh sessions\)\n$/,
  );
  await refused(
    sb,
    ["rollback", "--session", "fix", "deadbeefdeadbeef"],
    2,
    /^marsh rollback: unknown checkpoint deadbeefdeadbeef in session fix \(see marsh log --all\)\n$/,
  );
  await refused(
    sb,
    ["rollback", "--session", "fix", "abc"],
    2,
    /^marsh rollback: invalid checkpoint "abc": give its id, or at least 8 of its leading hex digits \(see marsh log\)\n$/,
  );
  await refused(
    sb,
    ["session", "start", "a b"],
    2,
    /^marsh session start: invalid session name "a b"/,
  );
  await refused(
    sb,
    ["session", "start", "fix"],
    1,
    /^marsh session start: a session named "fix" is already open/,
  );
  await refused(
    sb,
    ["op", "--session", "fix", "true"],
    2,
    /^marsh op: put `--` before the command/,
  );
  await refused(
    sb,
    ["op", "--on-cancel=keep", "--", "true"],
    2,
    /^marsh op: --on-cancel is seal or discard/,
  );
  await refused(
    sb,
    ["op", "--session", "nope", "--", "touch", "x"],
    2,
    /^marsh op: no open session "nope"/,
  );
  // A checkpoint of another session's line is not in fix's history.
  const t2Head = (await sessions(sb))[1]!.head;
  await refused(
    sb,
    ["rollback", "--session", "fix", t2Head],
    2,
    /^marsh rollback: unknown checkpoint/,
  );
  assert.equal((await sessions(sb))[0]!.head, fixHead, "refusals moved no head");
  assert.equal(Deno.readTextFileSync(`${view}/a.txt`), "edited\n");

  // Remove try2: its view and directory go; its checkpoints stay reachable by fork.
  const removed = await sb.marsh(["session", "rm", "try2"]);
  assert.equal(removed.code, 0, show(removed));
  assert.ok(!exists(`${sb.project}/.marsh/session/try2`));
  assert.deepEqual((await sessions(sb)).map((s) => s.name), ["fix"]);
  const refork = await sb.marsh(["fork", "--from", t2Head.slice(0, 12), "try3"]);
  assert.equal(refork.code, 0, show(refork));
  assert.equal(Deno.readTextFileSync(`${sb.project}/.marsh/session/try3/view/a.txt`), "t2\n");

  // The project's own files, .git included, are untouched by all of it.
  assertUnchanged(sb.project, before, "the project after the sessions", { withGit: true });
});

Deno.test({
  name: "sessions: the default name, --from at start, a command that cannot start",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create();
  const before = picture(sb.project, { withGit: true });
  const first = await sb.marsh(["session", "start", "--json"]);
  assert.equal(first.code, 0, show(first));
  const s1 = JSON.parse(first.stdout) as { session: SessionInfo; from: string; files: number };
  assert.equal(s1.session.name, "s1");
  assert.equal(s1.from, "snapshot");
  assert.equal(s1.files, 1);
  const second = await sb.marsh([
    "session",
    "start",
    "--from",
    s1.session.head.slice(0, 8),
    "--json",
  ]);
  assert.equal(second.code, 0, show(second));
  const s2 = JSON.parse(second.stdout) as { session: SessionInfo; from: string };
  assert.equal(s2.session.name, "s2");
  assert.equal(s2.from, "checkpoint");
  assert.equal(s2.session.head, s1.session.head);

  // A command that does not exist: 127 as a shell says it; nothing changed, so no new root.
  const missing = await sb.marsh(["op", "--session", "s1", "--", "no-such-command-xyz"]);
  assert.equal(missing.code, 127, show(missing));
  assert.match(
    missing.stderr,
    /^marsh: cannot run no-such-command-xyz: No such file or directory\n/,
  );
  assert.equal(checkpointOf(missing).what, "no change");
  const [s1now] = await sessions(sb);
  assert.equal(s1now!.root, s1.session.root, "the root did not change");
  // The session is not left busy.
  const ok = await sb.marsh(["op", "--session", "s1", "--", "touch", "n.txt"]);
  assert.equal(ok.code, 0, show(ok));
  assertUnchanged(sb.project, before, "the project", { withGit: true });
});
