import assert from "node:assert/strict";
import type { KitLaunch } from "../protocol/kit_launch.ts";
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
    capDir: null,
    ...over,
  };
}

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

Deno.test({ name: "planMounts: spec 000 §8's table, in order", permissions: "none" }, () => {
  const rows = planMounts(launch({ capDir: "/state/attempts/at/cap" }), "/root").map((
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
    [O[1], O[1], "ro", "required"],
    ["/state/kits/k/home", "/root", "rw", "required"],
    ["/state/attempts/at/cap", CAP_TARGET, "ro", "required"],
  ]);
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
  assert.throws(() => planMounts(launch(), O[1]!), KitLaunchError);
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
