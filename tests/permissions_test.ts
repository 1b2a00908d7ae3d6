/**
 * Each entrypoint runs with the narrowest flags that work (docs/architecture.md,
 * "Permissions"): a probe under each entrypoint's exact flags shows what is
 * refused, for every entry of the registry (protocol/entrypoints.ts), and the
 * launchers pass exactly the registry's flags.
 */
import assert from "node:assert/strict";
import {
  cliFlags,
  daemonFlags,
  type EntryArgs,
  entryArgv,
  type EntryName,
  ENTRYPOINTS,
  REPO_CONFIG,
  splitfsFlags,
} from "../protocol/entrypoints.ts";
import { launcherCalls } from "./_launcher.ts";

const root = new URL("../", import.meta.url).pathname;
const deno = Deno.env.get("MARSH_DENO") ?? Deno.execPath();

async function probe(flags: string[], config = true): Promise<Record<string, string>> {
  const out = await new Deno.Command(deno, {
    args: [
      "run",
      ...flags,
      ...(config ? [`--config=${root}deno.json`] : []),
      `${root}tests/probes/capabilities.ts`,
      `${root}README.md`,
    ],
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
  return JSON.parse(new TextDecoder().decode(out.stdout));
}

const perms: Deno.PermissionOptions = { run: true, read: true, write: true, env: true };

Deno.test({
  name: "the CLI can read no project file and load no library",
  permissions: perms,
}, async () => {
  const home = Deno.makeTempDirSync({ prefix: "marsh-home-" });
  try {
    const got = await probe(cliFlags(home));
    assert.equal(got.readProject, "refused");
    assert.equal(got.writeTmp, "refused");
    assert.equal(got.ffiLibc, "refused");
    assert.equal(got.ffiOther, "refused");
    assert.equal(got.net, "refused");
    assert.equal(got.envHome, "granted");
    // `join -- CMD` runs any command the user names, so running is granted.
    assert.equal(got.runGit, "granted");
  } finally {
    Deno.removeSync(home, { recursive: true });
  }
});

Deno.test({ name: "the launcher passes exactly the CLI's flags", permissions: perms }, async () => {
  const home = Deno.makeTempDirSync({ prefix: "marsh-home-" });
  try {
    const env = { MARSH_HOME: home, MARSH_CLI_BUNDLE: "0" };
    const plain = await launcherCalls(`${root}marsh`, ["--version"], env);
    assert.deepEqual(plain.calls, [entryArgv("cli", { home }, ["--version"])], plain.stderr);
    const sock = `${home}/b/03.sock`;
    const inBranch = await launcherCalls(`${root}marsh`, ["status"], { ...env, MARSH_SOCK: sock });
    assert.deepEqual(
      inBranch.calls,
      [entryArgv("cli", { home, branchSocket: sock }, ["status"])],
      inBranch.stderr,
    );
  } finally {
    Deno.removeSync(home, { recursive: true });
  }
});

Deno.test(
  { name: "bin/marshd passes exactly the daemon's flags", permissions: perms },
  async () => {
    const home = Deno.makeTempDirSync({ prefix: "marsh-home-" });
    try {
      const got = await launcherCalls(`${root}bin/marshd`, [], {
        MARSH_HOME: home,
        SSL_CERT_FILE: "/etc/ssl/certs/ca-certificates.crt",
        MARSH_TEST_SECRET: "not for the daemon",
      });
      assert.deepEqual(got.calls, [entryArgv("daemon", { home, deno: got.deno })], got.stderr);
      // Given the variables it names, and nothing else of the shell's.
      assert.equal(got.env.MARSH_HOME, home);
      assert.equal(got.env.SSL_CERT_FILE, "/etc/ssl/certs/ca-certificates.crt");
      assert.equal(got.env.MARSH_TEST_SECRET, undefined);
    } finally {
      Deno.removeSync(home, { recursive: true });
    }
  },
);

Deno.test({
  name: "the split-filesystem service may load libc and nothing else",
  permissions: perms,
}, async () => {
  const got = await probe(splitfsFlags());
  assert.equal(got.ffiLibc, "granted");
  assert.equal(got.ffiOther, "refused");
  assert.equal(got.readProject, "refused");
  assert.equal(got.writeTmp, "refused");
  assert.equal(got.runGit, "refused");
  assert.equal(got.net, "refused");
});

Deno.test({
  name: "the daemon may use its control dir and start Deno, and load no library",
  permissions: perms,
}, async () => {
  const home = Deno.makeTempDirSync({ prefix: "marsh-home-" });
  try {
    const got = await probe(daemonFlags(home, deno, 16));
    assert.equal(got.ffiLibc, "refused");
    assert.equal(got.ffiOther, "refused");
    assert.equal(got.readProject, "refused");
    assert.equal(got.writeTmp, "refused");
    assert.equal(got.runGit, "refused");
    assert.equal(got.net, "refused");
    // It reads the variables it names and no other.
    assert.equal(got.envHome, "granted");
    assert.equal(got.envOther, "refused");
  } finally {
    Deno.removeSync(home, { recursive: true });
  }
});

/** Arguments for every entry's flags, in a control dir `home` of the test's own. */
function sampleArgs(home: string): { readonly [K in EntryName]: EntryArgs[K] } {
  const socket = `${home}/engine.sock`;
  return {
    cli: { home },
    "cli-bundle": { root: root.replace(/\/$/, ""), dir: home, deno },
    daemon: { home, deno },
    splitfs: {},
    planner: { objects: `${home}/objects`, tmp: `${home}/tmp` },
    worker: { home },
    "kit-worker": { home, engine: socket },
    engine: { home, execRoot: `${home}/exec`, sockets: [socket] },
    "kit-build": { socket },
    "kit-check": { socket, controlDir: home },
    "job-client": { socket: `${home}/cap.sock` },
  };
}

Deno.test({
  name: "every entrypoint's probe finds granted what the registry says, and nothing more",
  permissions: perms,
}, async () => {
  const home = Deno.makeTempDirSync({ prefix: "marsh-home-" });
  try {
    const samples = sampleArgs(home);
    for (const name of Object.keys(ENTRYPOINTS) as EntryName[]) {
      const entry = ENTRYPOINTS[name] as typeof ENTRYPOINTS[EntryName];
      const flags = (entry.flags as (a: unknown) => string[])(samples[name]);
      const got = await probe(flags, entry.config === "repo");
      const want = Object.fromEntries(
        Object.entries(entry.grants).map(([k, v]) => [k, v ? "granted" : "refused"]),
      );
      assert.deepEqual(got, want, `${name}: ${flags.join(" ")}`);
    }
  } finally {
    Deno.removeSync(home, { recursive: true });
  }
});

Deno.test({
  name: "the registry: every module exists, no flag grants everything, and each spawn is checked",
  permissions: { read: true },
}, () => {
  const home = "/state/marsh";
  for (const name of Object.keys(ENTRYPOINTS) as EntryName[]) {
    const entry = ENTRYPOINTS[name] as typeof ENTRYPOINTS[EntryName];
    assert.ok(Deno.statSync(`${root}${entry.module}`).isFile, `${name}: ${entry.module}`);
    const flags = (entry.flags as (a: unknown) => string[])(sampleArgs(home)[name]);
    assert.ok(!flags.some((f) => /^(-A|--allow-all|--allow-ffi)$/.test(f)), `${name}: ${flags}`);
    assert.ok(flags.includes("--no-prompt") && flags.includes("--quiet"), name);
    const argv = entryArgv(name, sampleArgs(home)[name] as never, ["x"]);
    assert.deepEqual(argv, [
      "run",
      ...flags,
      ...(entry.config === "repo" ? [`--config=${REPO_CONFIG}`] : []),
      `${root}${entry.module}`,
      "x",
    ]);
  }
});

Deno.test({
  name: "the registry: a spawner may read every variable it hands its child",
  permissions: "none",
}, () => {
  const home = "/state/marsh";
  const envGrant = (name: EntryName): string[] | "all" => {
    const entry = ENTRYPOINTS[name] as typeof ENTRYPOINTS[EntryName];
    const flags = (entry.flags as (a: unknown) => string[])(sampleArgs(home)[name]);
    if (flags.includes("--allow-env")) return "all";
    return flags.filter((f) => f.startsWith("--allow-env=")).flatMap((f) => f.slice(12).split(","));
  };
  for (const name of Object.keys(ENTRYPOINTS) as EntryName[]) {
    const entry = ENTRYPOINTS[name];
    for (const by of entry.startedBy) {
      if (!(by in ENTRYPOINTS)) continue;
      const may = envGrant(by as EntryName);
      if (may === "all") continue;
      const needs = entry.passes === "all" ? ["(all of it)"] : entry.passes;
      const missing = needs.filter((v) => !may.includes(v));
      assert.deepEqual(missing, [], `${by} starts ${name} and may not read ${missing}`);
    }
  }
  // The daemon may read what it is given, and is given what it may read.
  assert.deepEqual(envGrant("daemon"), ENTRYPOINTS.daemon.passes);
});
