import assert from "node:assert/strict";
import { isReservedEnvName, MAX_ENV_NAME } from "../model/env_name.ts";
import { CAP_SOCKET } from "./job_capability.ts";
import {
  isCleanAbsolute,
  isWithin,
  type KitCap,
  type KitLaunch,
  KitLaunchProtocolError,
  MAX_LINK_NAMES,
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
    user: null,
    cap: null,
  };
}

function validCap(): KitCap {
  return {
    dir: "/state/marsh/attempts/x/cap",
    socket: "/state/marsh/sockets/x.sock",
    deno: "/opt/deno/bin/deno",
    client: "/state/marsh/job/marsh.js",
    job: {
      version: 1,
      job: "job-1",
      name: "claude",
      spawn: ["claude", "codex"],
      registered: ["claude", "codex", "fixture"],
      socket: CAP_SOCKET,
      limits: { pool: 4, depth: 3, same_kit: 2, fan_out: 8, total: 64 },
    },
    envKey: "0123456789abcdef".repeat(4),
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
  refused({ cap: undefined }, /cap must be null or an object/);
  refused({ cap: "/run/marsh" }, /cap must be null or an object/);
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

Deno.test({ name: "parseKitLaunch: a job capability round-trips", permissions: "none" }, () => {
  const l = { ...valid(), cap: validCap() };
  assert.deepEqual(parseKitLaunch(JSON.parse(JSON.stringify(l))), l);
  // Unknown keys of job are not carried into job.json.
  const extra = { ...l, cap: { ...l.cap, job: { ...l.cap.job, extra: 1 } } };
  assert.deepEqual(parseKitLaunch(extra), l);
  const empty = {
    ...l,
    user: null,
    cap: {
      ...l.cap,
      job: {
        ...l.cap.job,
        spawn: [],
        registered: Array.from({ length: MAX_LINK_NAMES }, (_, i) => `k${i}`),
        limits: { pool: 0, depth: 0, same_kit: 0, fan_out: 0, total: 0 },
      },
    },
  };
  assert.deepEqual(parseKitLaunch(empty), empty);
});

Deno.test(
  { name: "parseKitLaunch: refuses a malformed job capability", permissions: "none" },
  () => {
    const cap = validCap();
    const job = cap.job;
    const bad = (patch: Record<string, unknown>, pattern: RegExp) =>
      refused({ cap: { ...cap, ...patch } }, pattern);
    const badJob = (patch: Record<string, unknown>, pattern: RegExp) =>
      bad({ job: { ...job, ...patch } }, pattern);
    for (const key of ["dir", "socket", "deno", "client"]) {
      bad({ [key]: "relative" }, new RegExp(`cap\\.${key} must be an absolute path`));
      bad({ [key]: "/a/../b" }, new RegExp(`cap\\.${key} must be an absolute path without`));
      bad({ [key]: undefined }, new RegExp(`cap\\.${key} must be an absolute path`));
      bad({ [key]: "/" }, new RegExp(`cap\\.${key} may not be /`));
    }
    // What the container can write must not reach the capability.
    bad({ dir: "/p/.marsh/split/s1/a/cap" }, /cap.dir may not overlap \/p\/.marsh\/split\/s1\/a$/);
    bad({ dir: "/p/.marsh/split/s1" }, /cap.dir may not overlap/);
    bad({ socket: "/p/.marsh/split/s1/.admin/a/s" }, /cap.socket may not overlap/);
    bad({ client: "/state/marsh/kits/claude/home/m.js" }, /cap.client may not overlap/);
    bad({ deno: "/p/.marsh/split/s1/a" }, /cap.deno may not overlap/);
    bad({ job: null }, /cap.job must be an object/);
    bad({ job: [] }, /cap.job must be an object/);
    badJob({ version: 2 }, /cap.job.version must be 1/);
    badJob({ version: "1" }, /cap.job.version must be 1/);
    badJob({ path: "/run/marsh/bin:/bin" }, /cap.job.path is the worker's to set/);
    badJob({ job: "" }, /cap.job.job must be a non-empty string/);
    badJob({ job: "job-2" }, /cap.job.job must be the launch's job job-1/);
    badJob({ name: "Claude" }, /cap.job.name must match/);
    badJob({ name: "codex" }, /cap.job.name must be the kit name "claude"/);
    badJob({ spawn: "claude" }, /cap.job.spawn must be an array/);
    badJob({ spawn: ["claude", 1] }, /cap.job.spawn must hold strings/);
    badJob({ spawn: ["bash;"] }, /cap.job.spawn name "bash;" must match/);
    badJob({ spawn: ["codex", "codex"] }, /cap.job.spawn names a command twice/);
    badJob({ registered: ["../x"] }, /cap.job.registered name/);
    badJob(
      { registered: Array.from({ length: MAX_LINK_NAMES + 1 }, (_, i) => `k${i}`) },
      /cap.job.registered has more than 4096 entries/,
    );
    badJob({ socket: "/run/marsh/other.sock" }, /cap.job.socket must be \/run\/marsh\/cap.sock/);
    badJob({ socket: undefined }, /cap.job.socket must be/);
    badJob({ limits: null }, /cap.job.limits must be an object/);
    for (const key of ["pool", "depth", "same_kit", "fan_out", "total"]) {
      for (const v of [-1, 1.5, "3", undefined, 2 ** 53]) {
        badJob(
          { limits: { ...job.limits, [key]: v } },
          new RegExp(`cap\\.job\\.limits\\.${key} must be a non-negative integer`),
        );
      }
    }
    // The starting environment's digests are the worker's: it alone reads the image's ENV.
    badJob({ env: {} }, /cap.job.env is the worker's to set/);
    badJob({ forwarded: [] }, /cap.job.forwarded is the worker's to set/);
    for (const key of [undefined, "", "A".repeat(64), "a".repeat(63), "a".repeat(65), 1]) {
      bad({ envKey: key }, /cap.envKey must be 64 lowercase hex digits/);
    }
  },
);

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

Deno.test(
  { name: "parseKitLaunch: user is null or a numeric uid:gid", permissions: "none" },
  () => {
    for (const user of ["0:0", "1000:1000", "4294967294:4294967294"]) {
      const l = { ...valid(), user };
      assert.deepEqual(parseKitLaunch(JSON.parse(JSON.stringify(l))), l);
    }
    for (
      const user of ["root", "1000", "1000:", ":0", "-1:0", "4294967295:0", "0:0:0", 0, undefined]
    ) {
      refused({ user }, /user must be null or a numeric uid:gid/);
    }
  },
);

Deno.test({
  name: "kit env names: the registry's variable-name rule, at most 128 characters",
  permissions: "none",
}, () => {
  // The registry refuses an --env name over 128 characters, so a launch
  // naming one is not the daemon's: the worker refuses it too.
  const long = `A${"b".repeat(MAX_ENV_NAME)}`;
  const ok = "A".repeat(MAX_ENV_NAME);
  const base = valid();
  assert.deepEqual(parseKitLaunch({ ...base, kit: { ...base.kit, env: [ok] } }).kit.env, [ok]);
  assert.throws(
    () => parseKitLaunch({ ...base, kit: { ...base.kit, env: [long] } }),
    (e) =>
      e instanceof KitLaunchProtocolError &&
      e.message.includes(`kit.env name "${long}" is not a variable name`),
  );
  // job.json's forwarded names are the worker's (worker/kit_env.ts): a launch never sets them.
  const cap = validCap();
  assert.throws(
    () => parseKitLaunch({ ...base, cap: { ...cap, job: { ...cap.job, forwarded: [ok] } } }),
    (e) =>
      e instanceof KitLaunchProtocolError &&
      e.message.includes("cap.job.forwarded is the worker's to set"),
  );
});

Deno.test("kit launch: live stdio through FIFOs and read-only binds inside the fork", () => {
  const l = { ...valid(), stdio: "fifos", readOnly: ["/p/.marsh/split/s1/a/.git"] };
  assert.deepEqual(parseKitLaunch(l), l);
  // Absent: files, and nothing bound read-only (the launches made before these fields).
  assert.equal("stdio" in parseKitLaunch(valid()), false);
  for (
    const [over, why] of [
      [{ stdio: "pty" }, /stdio must be "files" or "fifos"/],
      [{ readOnly: ["/etc"] }, /readOnly must hold clean absolute paths inside the fork/],
      [{ readOnly: ["/p/.marsh/split/s1/a"] }, /inside the fork/],
      [{ readOnly: ["/p/.marsh/split/s1/a/../b"] }, /inside the fork/],
      [{ readOnly: Array(17).fill("/p/.marsh/split/s1/a/x") }, /at most 16 paths/],
    ] as const
  ) {
    assert.throws(
      () => parseKitLaunch({ ...valid(), ...over }),
      (e: unknown) => e instanceof KitLaunchProtocolError && why.test(e.message),
      JSON.stringify(over),
    );
  }
});
