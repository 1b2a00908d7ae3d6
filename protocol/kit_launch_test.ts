import assert from "node:assert/strict";
import {
  isCleanAbsolute,
  isReservedEnvName,
  isWithin,
  type KitLaunch,
  KitLaunchProtocolError,
  parseKitLaunch,
} from "./kit_launch.ts";

function valid(): KitLaunch {
  return {
    job: "job-1",
    attempt: "s1-a-0001",
    split: "s1",
    label: "a",
    kit: {
      name: "claude",
      image: "marsh-kit/claude:0123456789ab",
      entrypoint: ["claude"],
      network: "none",
      env: ["ANTHROPIC_API_KEY", "LANG"],
      wallS: 3600,
      home: "/state/marsh/kits/claude/home",
    },
    argv: ["claude", "-p", "review"],
    env: { LANG: "C.UTF-8" },
    fork: "/p/.marsh/split/s1/a",
    cwd: "/p/.marsh/split/s1/a/src",
    admin: "/p/.marsh/split/s1/.admin/a",
    objectDirs: ["/p/.marsh/split/s1/store.git/objects", "/p/.git/objects"],
    stdin: "/state/marsh/spool/s1",
    stdout: "/state/marsh/attempts/x/stdout",
    stderr: "/state/marsh/attempts/x/stderr",
    outputLimit: 16 * 1024 * 1024,
    capDir: null,
  };
}

function refused(patch: Record<string, unknown>, pattern: RegExp): void {
  const x = { ...valid(), ...patch };
  assert.throws(() => parseKitLaunch(x), (e: unknown) => {
    assert.ok(e instanceof KitLaunchProtocolError, String(e));
    assert.match(e.message, pattern);
    return true;
  });
}

Deno.test({ name: "parseKitLaunch: a valid launch round-trips", permissions: "none" }, () => {
  const l = valid();
  assert.deepEqual(parseKitLaunch(JSON.parse(JSON.stringify(l))), l);
  // A frame envelope around it is ignored.
  assert.deepEqual(parseKitLaunch({ v: 1, t: "kit-launch", ...l }), l);
  const plain = { ...l, kit: { ...l.kit, entrypoint: null }, admin: null, stdin: null };
  assert.deepEqual(parseKitLaunch(plain), plain);
});

Deno.test({ name: "parseKitLaunch: refuses what is not a launch", permissions: "none" }, () => {
  assert.throws(() => parseKitLaunch(null), KitLaunchProtocolError);
  assert.throws(() => parseKitLaunch([]), KitLaunchProtocolError);
  refused({ attempt: "../x" }, /attempt must match/);
  refused({ job: "" }, /job must be a non-empty string/);
  refused({ label: "a\0" }, /NUL/);
  refused({ argv: ["codex", "x"] }, /argv\[0\] must be the kit name "claude"/);
  refused({ argv: [] }, /argv\[0\]/);
  refused({ argv: ["claude", 3] }, /argv must hold strings/);
  refused({ fork: "relative" }, /fork must be an absolute path/);
  refused({ fork: "/p/../etc" }, /fork must be an absolute path without/);
  refused({ fork: "/" }, /fork may not be \//);
  refused({ cwd: "/p/.marsh/split/s1/b" }, /cwd must be the fork or lie inside it/);
  refused({ cwd: "/p/.marsh/split/s1/ab" }, /cwd must be the fork/);
  refused({ admin: "/p//x" }, /admin must be an absolute path/);
  refused({ objectDirs: ["/p/./o"] }, /objectDirs must hold absolute paths/);
  refused({ objectDirs: Array(17).fill("/o") }, /at most 16/);
  refused({ stdin: "spool" }, /stdin must be an absolute path/);
  refused({ outputLimit: -1 }, /outputLimit must be an integer/);
  refused({ outputLimit: 1.5 }, /outputLimit must be an integer/);
  refused({ env: { "A=B": "x" } }, /not a variable name/);
  refused({ env: { A: 1 } }, /string without NUL/);
  refused({ capDir: "run/marsh" }, /capDir must be an absolute path/);
  const kit = valid().kit;
  refused({ kit: { ...kit, name: "Claude" } }, /kit.name must match/);
  refused({ kit: { ...kit, network: "a b" } }, /kit.network must match/);
  refused({ kit: { ...kit, env: ["1X"] } }, /kit.env name "1X" is not a variable name/);
  refused({ kit: { ...kit, wallS: 0 } }, /kit.wallS must be an integer from 1/);
  refused({ kit: { ...kit, wallS: 86_401 } }, /kit.wallS/);
  refused({ kit: { ...kit, home: "~/h" } }, /kit.home must be an absolute path/);
  refused({ kit: { ...kit, entrypoint: "claude" } }, /kit.entrypoint must be an array/);
  refused({ kit: { ...kit, image: "" } }, /kit.image must be a non-empty string/);
});

Deno.test({ name: "kit launch path and env rules", permissions: "none" }, () => {
  assert.ok(isCleanAbsolute("/"));
  assert.ok(isCleanAbsolute("/a/b c/d"));
  for (const p of ["", "a", "/a/", "/a//b", "/a/./b", "/a/..", "/a\0"]) {
    assert.ok(!isCleanAbsolute(p), p);
  }
  assert.ok(isWithin("/a/b", "/a"));
  assert.ok(isWithin("/a", "/a"));
  assert.ok(isWithin("/a", "/"));
  assert.ok(!isWithin("/ab", "/a"));
  for (const n of ["HOME", "PATH", "path", "MARSH_JOB", "marsh_x", "DOCKER_HOST"]) {
    assert.ok(isReservedEnvName(n), n);
  }
  for (const n of ["HOMEDIR", "LANG", "ANTHROPIC_API_KEY", "XPATH"]) {
    assert.ok(!isReservedEnvName(n), n);
  }
});
