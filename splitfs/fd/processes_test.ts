import assert from "node:assert/strict";
import { killProcess, parseStat, processStart } from "./processes.ts";

// Real processes: `sleep`s this test starts and reaps.
const perms: Deno.PermissionOptions = { ffi: true, run: ["sleep"] };

function sleeper(): Deno.ChildProcess {
  return new Deno.Command("sleep", { args: ["300"], stdout: "null", stderr: "null" }).spawn();
}

Deno.test("parseStat: fields after the command name's last parenthesis", () => {
  const tail = "S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 424242 20 21";
  assert.deepEqual(parseStat(`77 (a) b (c)) ${tail}`), { state: "S", start: 424242 });
  assert.throws(() => parseStat("77 (x) S 1 2"), TypeError);
  assert.throws(() => parseStat("garbage"), TypeError);
});

Deno.test({
  name: "processStart: a live process's start time; none for a reaped one",
  permissions: perms,
}, async () => {
  const child = sleeper();
  const start = processStart(child.pid);
  assert.ok(start !== null && start > 0, `start ${start}`);
  assert.equal(processStart(child.pid), start);
  assert.ok(processStart(Deno.pid)! <= start);
  child.kill("SIGKILL");
  await child.status;
  assert.equal(processStart(child.pid), null);
  assert.throws(() => processStart(0), TypeError);
});

Deno.test({
  name: "killProcess: kills only the process that started then",
  permissions: perms,
}, async () => {
  const child = sleeper();
  try {
    const start = processStart(child.pid)!;
    // Another start time is another process that reused the pid: untouched.
    assert.equal(killProcess({ pid: child.pid, start: start + 1 }), false);
    await new Promise((r) => setTimeout(r, 100));
    assert.equal(processStart(child.pid), start);
    assert.equal(killProcess({ pid: child.pid, start }), true);
    assert.equal((await child.status).signal, "SIGKILL");
    assert.equal(killProcess({ pid: child.pid, start }), false);
  } finally {
    // Still there only when an assertion failed before the kill.
    if (processStart(child.pid) !== null) child.kill("SIGKILL");
    await child.status;
  }
});
