import assert from "node:assert/strict";
import {
  CAP_SOCKET,
  CAP_TARGET as PROTOCOL_CAP_TARGET,
  JOB_CLIENT,
  JOB_DENO,
} from "../protocol/job_capability.ts";
import type { KitCap, KitLaunch } from "../protocol/kit_launch.ts";
import { KitLaunchError } from "./kit_errors.ts";
import { CAP_TARGET, engineMounts, guestHome, HOME_LABEL, planMounts } from "./kit_mounts.ts";

const F = "/p/.marsh/split/s1/a";
const A = "/p/.marsh/split/s1/.admin/a";
const O = ["/p/.marsh/split/s1/store.git/objects", "/p/.git/objects"];

function launch(over: Partial<KitLaunch> = {}): KitLaunch {
  return {
    job: "j",
    attempt: "at",
    split: "s1",
    label: "a",
    kit: {
      name: "k",
      image: "i",
      entrypoint: null,
      network: "none",
      env: [],
      wallS: 1,
      home: "/state/kits/k/home",
    },
    argv: ["k"],
    env: {},
    fork: F,
    cwd: F,
    admin: A,
    objectDirs: O,
    stdin: null,
    stdout: "/c/o",
    stderr: "/c/e",
    outputLimit: 1,
    user: null,
    cap: null,
    ...over,
  };
}

const CAP: KitCap = {
  dir: "/state/attempts/at/cap",
  socket: "/state/sockets/at.sock",
  deno: "/opt/deno/deno",
  client: "/state/job/marsh.js",
  job: {
    version: 1,
    job: "j",
    name: "k",
    spawn: [],
    registered: ["k"],
    socket: CAP_SOCKET,
    limits: { pool: 1, depth: 3, same_kit: 2, fan_out: 8, total: 64 },
  },
  envKey: "0123456789abcdef".repeat(4),
};

const cfg = (user: string, env: string[] = [], labels: Record<string, string> = {}) => ({
  user,
  env,
  labels,
});

Deno.test({ name: "guestHome: label, then HOME, then the user", permissions: "none" }, () => {
  assert.equal(guestHome("a", "i", cfg("")), "/root");
  assert.equal(guestHome("a", "i", cfg("root")), "/root");
  assert.equal(guestHome("a", "i", cfg("0:0")), "/root");
  assert.equal(guestHome("a", "i", cfg("kit")), "/home/kit");
  assert.equal(guestHome("a", "i", cfg("kit:kit")), "/home/kit");
  assert.equal(guestHome("a", "i", cfg("1000", ["PATH=/bin", "HOME=/work/me"])), "/work/me");
  assert.equal(
    guestHome("a", "i", cfg("", ["HOME=/x"], { [HOME_LABEL]: "/opt/agent" })),
    "/opt/agent",
  );
  assert.throws(() => guestHome("a", "i", cfg("1000")), KitLaunchError);
  assert.throws(() => guestHome("a", "i", cfg("", ["HOME=relative"])), KitLaunchError);
  assert.throws(() => guestHome("a", "i", cfg("", ["HOME=/"])), KitLaunchError);
  assert.throws(
    () => guestHome("a", "i", cfg("", [], { [HOME_LABEL]: "/a/../b" })),
    KitLaunchError,
  );
});

Deno.test({
  name: 'planMounts: the mounts of docs/containment.md "An argv branch (Kit container)", in order',
  permissions: "none",
}, () => {
  const rows = planMounts(launch({ cap: CAP }), "/root").map((
    m,
  ) => [m.source, m.target, m.readOnly ? "ro" : "rw", m.optional ? "if present" : "required"]);
  assert.deepEqual(rows, [
    [F, F, "rw", "required"],
    [A, A, "rw", "required"],
    [`${F}/.git`, `${F}/.git`, "ro", "required"],
    [`${A}/config`, `${A}/config`, "ro", "required"],
    [`${A}/HEAD`, `${A}/HEAD`, "ro", "required"],
    [`${A}/info`, `${A}/info`, "ro", "required"],
    [`${A}/packed-refs`, `${A}/packed-refs`, "ro", "if present"],
    [O[0], O[0], "ro", "required"],
    // The user's objects at the name the alternates use (protocol/fork_view.ts).
    [O[1], "/p/.marsh/git-objects", "ro", "required"],
    ["/state/kits/k/home", "/root", "rw", "required"],
    ["/state/attempts/at/cap", "/run/marsh", "ro", "required"],
    ["/state/sockets/at.sock", "/run/marsh/cap.sock", "ro", "required"],
    ["/opt/deno/deno", "/run/marsh/deno", "ro", "required"],
    ["/state/job/marsh.js", "/run/marsh/marsh.js", "ro", "required"],
  ]);
});

Deno.test({ name: "planMounts: the job capability's four binds", permissions: "none" }, () => {
  assert.equal(CAP_TARGET, PROTOCOL_CAP_TARGET);
  const cap = planMounts(launch({ cap: CAP }), "/root").filter((m) =>
    m.target.startsWith(CAP_TARGET)
  );
  assert.deepEqual(
    cap.map((m) => [m.role, m.source, m.target, m.readOnly, m.optional]),
    [
      ["capability dir", CAP.dir, CAP_TARGET, true, false],
      ["capability socket", CAP.socket, CAP_SOCKET, true, false],
      ["job deno", CAP.deno, JOB_DENO, true, false],
      ["job client", CAP.client, JOB_CLIENT, true, false],
    ],
  );
  assert.deepEqual(
    engineMounts(cap).map((m) => m.ReadOnly),
    [true, true, true, true],
  );
  // Without a capability nothing lands in /run/marsh.
  assert.ok(
    !planMounts(launch(), "/root").some((m) => m.target.startsWith(CAP_TARGET)),
  );
});

Deno.test({ name: "planMounts: /run/marsh is the capability's alone", permissions: "none" }, () => {
  const under = "/run/marsh/p";
  assert.throws(
    () => planMounts(launch({ cap: CAP }), "/run/marsh/home"),
    /the kit home would be mounted at \/run\/marsh\/home, inside \/run\/marsh/,
  );
  assert.throws(() => planMounts(launch({ cap: CAP }), CAP_TARGET), KitLaunchError);
  assert.throws(
    () => planMounts(launch({ cap: CAP, fork: under, cwd: under, admin: null }), "/root"),
    /the fork would be mounted at \/run\/marsh\/p, inside \/run\/marsh/,
  );
  assert.throws(
    () => planMounts(launch({ cap: CAP, objectDirs: [`${CAP_TARGET}/bin`] }), "/root"),
    /object dir would be mounted at/,
  );
  // A project above /run/marsh would be covered by it.
  assert.throws(
    () => planMounts(launch({ cap: CAP, fork: "/run", cwd: "/run", admin: null }), "/root"),
    /capability dir would be mounted at \/run\/marsh, inside \/run/,
  );
  // Without a capability /run/marsh is nothing special.
  assert.doesNotThrow(() =>
    planMounts(launch({ fork: under, cwd: under, admin: null, objectDirs: [] }), "/root")
  );
});

Deno.test(
  { name: "planMounts: a project without Git has no admin binds", permissions: "none" },
  () => {
    const rows = planMounts(launch({ admin: null, objectDirs: [] }), "/home/kit").map((m) =>
      m.target
    );
    assert.deepEqual(rows, [F, "/home/kit"]);
  },
);

Deno.test({ name: "planMounts: the home may not cover the project", permissions: "none" }, () => {
  // Above the fork is fine (a root user's project under /root, say).
  assert.doesNotThrow(() => planMounts(launch(), "/p"));
  assert.throws(() => planMounts(launch(), F), /kit home would be mounted at .* inside/);
  assert.throws(() => planMounts(launch(), `${F}/sub`), KitLaunchError);
  assert.throws(() => planMounts(launch(), "/p/.marsh/git-objects"), KitLaunchError);
  assert.throws(
    () => planMounts(launch({ objectDirs: [O[0]!, O[0]!] }), "/root"),
    /two mounts at/,
  );
});

Deno.test({ name: "engineMounts: non-recursive private binds", permissions: "none" }, () => {
  assert.deepEqual(
    engineMounts([{ source: "/s", target: "/t", readOnly: true, optional: false, role: "x" }]),
    [{
      Type: "bind",
      Source: "/s",
      Target: "/t",
      ReadOnly: true,
      BindOptions: { Propagation: "rprivate", NonRecursive: true },
    }],
  );
});
