import assert from "node:assert/strict";
import { Dir } from "./fd/dir.ts";
import { FsError } from "./fd/ffi.ts";
import { lockedMessage, parseHolder, ProjectLockedError, ProjectLocks } from "./project_lock.ts";

// A real flock(1) in another process holds the lock the way a second daemon's service would.
const perms: Deno.PermissionOptions = {
  ffi: true,
  read: true,
  write: true,
  run: ["flock", "bash"],
};

function project(): { root: string; [Symbol.dispose](): void } {
  const root = Deno.realPathSync(Deno.makeTempDirSync({ prefix: "marsh-lock-" }));
  Deno.mkdirSync(`${root}/.marsh`);
  return { root, [Symbol.dispose]: () => Deno.removeSync(root, { recursive: true }) };
}

function hold(locks: ProjectLocks, root: string): void {
  using marsh = Dir.openAbsolute(`${root}/.marsh`);
  locks.hold(marsh, root);
}

/** The {@linkcode ProjectLockedError} that `fn` throws. */
function refusal(fn: () => void): ProjectLockedError {
  try {
    fn();
  } catch (error) {
    if (error instanceof ProjectLockedError) return error;
    throw error;
  }
  throw new assert.AssertionError({ message: "not refused" });
}

/** One process (a `sleep`) holding the lock through an inherited descriptor, once it does. */
async function otherHolder(file: string): Promise<Deno.ChildProcess> {
  const child = new Deno.Command("bash", {
    args: ["-c", 'exec 9<"$1" && flock -x 9 && exec sleep 300', "bash", file],
  }).spawn();
  for (let i = 0; i < 200; i++) {
    const probe = await new Deno.Command("flock", { args: ["-n", file, "true"] }).output();
    if (!probe.success) return child;
    await new Promise((r) => setTimeout(r, 20));
  }
  child.kill("SIGKILL");
  throw new Error("flock(1) never took the lock");
}

Deno.test(
  { name: "ProjectLocks: takes the lock once and names its holder", permissions: perms },
  () => {
    using p = project();
    const locks = new ProjectLocks({ pid: 4242, home: "/home/u/.local/state/marsh" });
    hold(locks, p.root);
    hold(locks, p.root);
    locks.holdIfPresent(p.root);
    assert.equal(locks.size, 1);
    const text = Deno.readTextFileSync(`${p.root}/.marsh/lock`);
    assert.deepEqual(JSON.parse(text), { pid: 4242, home: "/home/u/.local/state/marsh" });
  },
);

Deno.test({
  name: "ProjectLocks: another holder refuses at once, names it, and changes nothing",
  permissions: perms,
}, async () => {
  using p = project();
  const file = `${p.root}/.marsh/lock`;
  const holder = { pid: 777, home: "/root/.local/state/marsh" };
  Deno.writeTextFileSync(file, JSON.stringify(holder));
  const other = await otherHolder(file);
  try {
    const locks = new ProjectLocks({ pid: 1, home: "/tmp/me" });
    const before = Deno.readDirSync(`${p.root}/.marsh`).map((e) => e.name).toArray();
    const error = refusal(() => hold(locks, p.root));
    assert.deepEqual(error.holder, holder);
    assert.equal(error.message, lockedMessage(p.root, holder));
    assert.match(error.message, /pid 777, MARSH_HOME="\/root\/.local\/state\/marsh"/);
    assert.match(error.message, /MARSH_HOME="\/root\/.local\/state\/marsh" marsh daemon stop/);
    assert.throws(() => locks.holdIfPresent(p.root), ProjectLockedError);
    assert.equal(locks.size, 0);
    assert.equal(Deno.readTextFileSync(file), JSON.stringify(holder));
    assert.deepEqual(Deno.readDirSync(`${p.root}/.marsh`).map((e) => e.name).toArray(), before);
  } finally {
    other.kill("SIGKILL");
    await other.status;
  }
  // Once the other is gone, this one takes it and says so.
  const locks = new ProjectLocks({ pid: 2, home: "/tmp/me" });
  hold(locks, p.root);
  assert.deepEqual(JSON.parse(Deno.readTextFileSync(file)), { pid: 2, home: "/tmp/me" });
});

Deno.test({
  name: "ProjectLocks: an unknown holder (empty or junk file) still refuses",
  permissions: perms,
}, async () => {
  using p = project();
  const file = `${p.root}/.marsh/lock`;
  Deno.writeTextFileSync(file, "");
  const other = await otherHolder(file);
  try {
    const error = refusal(() => hold(new ProjectLocks(null), p.root));
    assert.equal(error.holder, null);
    assert.match(error.message, /in use by another marsh daemon \(it holds .*\/\.marsh\/lock\)/);
  } finally {
    other.kill("SIGKILL");
    await other.status;
  }
});

Deno.test({
  name: "ProjectLocks: a planted symlink is never followed; no .marsh, nothing made",
  permissions: perms,
}, () => {
  using p = project();
  const target = `${p.root}/target`;
  Deno.writeTextFileSync(target, "keep\n");
  Deno.symlinkSync(target, `${p.root}/.marsh/lock`);
  const locks = new ProjectLocks({ pid: 1, home: "/tmp/me" });
  assert.throws(() => hold(locks, p.root), (e) => e instanceof FsError && e.code === "ELOOP");
  assert.equal(Deno.readTextFileSync(target), "keep\n");
  Deno.removeSync(`${p.root}/.marsh`, { recursive: true });
  locks.holdIfPresent(p.root);
  assert.equal(locks.size, 0);
  assert.throws(() => Deno.lstatSync(`${p.root}/.marsh`), Deno.errors.NotFound);
  // A root that is gone is the caller's to report (workspace replaced), not a lock error.
  locks.holdIfPresent(`${p.root}/gone`);
  locks.holdIfPresent(`${target}/below-a-file`);
  assert.equal(locks.size, 0);
});

Deno.test("parseHolder: only a pid and an absolute, printable home", () => {
  const enc = new TextEncoder();
  assert.deepEqual(parseHolder(enc.encode('{"pid":5,"home":"/h"}\n')), { pid: 5, home: "/h" });
  for (
    const junk of [
      "",
      "{",
      "null",
      '{"pid":"5","home":"/h"}',
      '{"pid":0,"home":"/h"}',
      '{"pid":5,"home":"h"}',
      '{"pid":5,"home":"/h\\u001b[2J"}',
    ]
  ) assert.equal(parseHolder(enc.encode(junk)), null, junk);
});

Deno.test(
  {
    name: "ProjectLocks: removeHeld deletes the held lock file and drops the lock",
    permissions: perms,
  },
  async () => {
    using p = project();
    const locks = new ProjectLocks({ pid: 4242, home: "/h" });
    {
      using marsh = Dir.openAbsolute(`${p.root}/.marsh`);
      assert.throws(() => locks.removeHeld(marsh, p.root), /is not held by this service/);
      locks.hold(marsh, p.root);
      locks.removeHeld(marsh, p.root);
    }
    assert.equal(locks.size, 0);
    assert.deepEqual([...Deno.readDirSync(`${p.root}/.marsh`)], []);
    // Nobody holds the project now: another holder takes a new lock file at once.
    Deno.writeTextFileSync(`${p.root}/.marsh/lock`, "");
    const other = await otherHolder(`${p.root}/.marsh/lock`);
    try {
      const locked = refusal(() => hold(locks, p.root));
      assert.equal(locked.root, p.root);
    } finally {
      other.kill("SIGKILL");
      await other.status;
    }
  },
);
