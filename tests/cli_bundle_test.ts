/**
 * The launcher's bundle of the CLI, through the real `./marsh` of a copy of
 * this checkout (so the tests may edit its sources): it is built on the
 * first run and used while fresh, rebuilt when a source changes, and the
 * sources run when no bundle dir can be had or bundling fails.
 */
import assert from "node:assert/strict";
import { cliBundleFlags } from "../protocol/entrypoints.ts";
import { launcherCalls } from "./_launcher.ts";

const root = new URL("../", import.meta.url).pathname;
const deno = Deno.env.get("MARSH_DENO") ?? Deno.execPath();
const dec = new TextDecoder();
const permissions: Deno.PermissionOptions = { read: true, write: true, run: true, env: true };

/** A copy of the checkout's tracked files and a control dir, removed at the end. */
async function checkoutCopy(): Promise<AsyncDisposable & { dir: string; home: string }> {
  const base = await Deno.makeTempDir({ prefix: "marsh-cli-bundle-" });
  const dir = `${base}/repo`;
  const files = dec.decode(
    (await new Deno.Command("git", { args: ["ls-files", "-z"], cwd: root, stdout: "piped" })
      .output()).stdout,
  ).split("\0").filter((f) => f !== "");
  for (const f of files) {
    // A file deleted in the work tree but still tracked is not part of it.
    const st = await Deno.lstat(`${root}${f}`).catch(() => null);
    if (st === null) continue;
    await Deno.mkdir(`${dir}/${f}`.replace(/\/[^/]+$/, ""), { recursive: true });
    await Deno.copyFile(`${root}${f}`, `${dir}/${f}`);
    await Deno.chmod(`${dir}/${f}`, st.mode! & 0o777);
  }
  await Deno.mkdir(`${base}/home`, { mode: 0o700 });
  return {
    dir,
    home: `${base}/home`,
    async [Symbol.asyncDispose]() {
      await Deno.remove(base, { recursive: true });
    },
  };
}

async function marsh(
  copy: { dir: string; home: string; env?: Record<string, string> },
  args: string[],
): Promise<{ code: number; stdout: string; stderr: string }> {
  const out = await new Deno.Command(`${copy.dir}/marsh`, {
    args,
    cwd: copy.home,
    env: { MARSH_HOME: copy.home, MARSH_DENO: deno, MARSH_CLI_BUNDLE: "1", ...copy.env },
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).output();
  return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
}

/** The bundle dir the state file names, or "-"; null when there is no state file. */
async function stateBundle(cacheDir: string): Promise<string | null> {
  try {
    return (await Deno.readTextFile(`${cacheDir}/current`)).split("\n")[1]!;
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return null;
    throw error;
  }
}

async function edit(path: string, from: string, to: string): Promise<void> {
  const text = await Deno.readTextFile(path);
  assert.ok(text.includes(from), `${path} holds ${from}`);
  await Deno.writeTextFile(path, text.replace(from, to));
}

Deno.test({
  name: "./marsh bundles on first run, runs the bundle while fresh, rebundles after an edit",
  permissions,
}, async () => {
  await using copy = await checkoutCopy();
  const cache = `${copy.dir}/.deno/cli`;
  const first = await marsh(copy, ["--version"]);
  assert.deepEqual(first, {
    code: 0,
    stdout: `marsh 0.1.0 (deno ${Deno.version.deno})\n`,
    stderr: "",
  });
  const built = await stateBundle(cache);
  assert.match(built ?? "", /^cli-[0-9a-f]{16}$/);
  assert.equal((await Deno.stat(cache)).mode! & 0o777, 0o700);

  // What runs is the bundle: an edit of the bundle itself shows, and is not rebuilt over.
  await edit(`${cache}/${built}/main.js`, '"0.1.0"', '"0.1.0-from-the-bundle"');
  const again = await marsh(copy, ["--version"]);
  assert.equal(again.stdout, `marsh 0.1.0-from-the-bundle (deno ${Deno.version.deno})\n`);
  assert.equal(await stateBundle(cache), built);

  // A source edit makes it stale: a new bundle, made from the edited source.
  await edit(`${copy.dir}/client/cli_program.ts`, '"0.1.0"', '"7.7.7"');
  const edited = await marsh(copy, ["--version"]);
  assert.deepEqual(edited, {
    code: 0,
    stdout: `marsh 7.7.7 (deno ${Deno.version.deno})\n`,
    stderr: "",
  });
  const rebuilt = await stateBundle(cache);
  assert.notEqual(rebuilt, built);
  assert.ok((await Deno.readTextFile(`${cache}/${rebuilt}/main.js`)).includes('"7.7.7"'));
  // A real command through the bundle, with the CLI's own permissions.
  const status = await marsh(copy, ["status"]);
  assert.deepEqual(status, {
    code: 0,
    stdout: `daemon: not running\ncontrol dir: ${copy.home}\n`,
    stderr: "",
  });
});

Deno.test({
  name: "./marsh bundles into the control dir, or runs the sources, when no cache dir is its own",
  permissions,
}, async () => {
  await using copy = await checkoutCopy();
  // The checkout's cache dir cannot be made: the control dir holds the bundle.
  await Deno.mkdir(`${copy.dir}/.deno`);
  await Deno.writeTextFile(`${copy.dir}/.deno/cli`, "not a directory");
  const inHome = await marsh(copy, ["--version"]);
  assert.deepEqual(inHome, {
    code: 0,
    stdout: `marsh 0.1.0 (deno ${Deno.version.deno})\n`,
    stderr: "",
  });
  const homeCaches = [...Deno.readDirSync(`${copy.home}/cli`)].map((e) => e.name);
  assert.equal(homeCaches.length, 1);
  assert.match((await stateBundle(`${copy.home}/cli/${homeCaches[0]}`)) ?? "", /^cli-/);

  // Neither can be had: the sources run, and say nothing about it.
  await Deno.remove(`${copy.home}/cli`, { recursive: true });
  await Deno.writeTextFile(`${copy.home}/cli`, "not a directory");
  await edit(`${copy.dir}/client/cli_program.ts`, '"0.1.0"', '"0.1.0-sources"');
  const sources = await marsh(copy, ["--version"]);
  assert.deepEqual(sources, {
    code: 0,
    stdout: `marsh 0.1.0-sources (deno ${Deno.version.deno})\n`,
    stderr: "",
  });
  assert.equal(await Deno.readTextFile(`${copy.dir}/.deno/cli`), "not a directory");
  assert.equal(await Deno.readTextFile(`${copy.home}/cli`), "not a directory");
});

Deno.test({
  name: "./marsh runs the sources when deno bundle fails, says so once, retries after an edit",
  permissions,
}, async () => {
  await using copy = await checkoutCopy();
  const cache = `${copy.dir}/.deno/cli`;
  // deno run never loads a dynamic import it does not reach; deno bundle must resolve it.
  await edit(
    `${copy.dir}/main.ts`,
    "if (import.meta.main) {",
    'if (Deno.args[0] === "never") await import("./no_such_module.ts");\n\nif (import.meta.main) {',
  );
  const failed = await marsh(copy, ["--version"]);
  assert.equal(failed.code, 0);
  assert.equal(failed.stdout, `marsh 0.1.0 (deno ${Deno.version.deno})\n`);
  assert.equal(
    failed.stderr,
    `marsh: running from the sources; why the CLI was not bundled: ${cache}/build.log\n`,
  );
  assert.equal(await stateBundle(cache), "-");
  assert.match(await Deno.readTextFile(`${cache}/build.log`), /no_such_module\.ts/);

  // Recorded: the same sources are not bundled again.
  const stateBefore = await Deno.stat(`${cache}/current`);
  const quiet = await marsh(copy, ["--version"]);
  assert.deepEqual(quiet, {
    code: 0,
    stdout: `marsh 0.1.0 (deno ${Deno.version.deno})\n`,
    stderr: "",
  });
  assert.equal(
    (await Deno.stat(`${cache}/current`)).mtime?.getTime(),
    stateBefore.mtime?.getTime(),
  );

  // Fixed: bundled again.
  await edit(
    `${copy.dir}/main.ts`,
    'await import("./no_such_module.ts")',
    "await Promise.resolve()",
  );
  assert.equal((await marsh(copy, ["--version"])).stderr, "");
  assert.match((await stateBundle(cache)) ?? "", /^cli-/);
});

Deno.test({
  name: "the launcher passes the bundler exactly its flags",
  permissions,
}, async () => {
  // A copy: the bundler's failure is recorded in the copy's bundle dir.
  await using copy = await checkoutCopy();
  const got = await launcherCalls(`${copy.dir}/marsh`, ["--version"], {
    MARSH_HOME: copy.home,
    MARSH_CLI_BUNDLE: "1",
  });
  const dir = `${copy.dir}/.deno/cli`;
  const flags = cliBundleFlags(copy.dir, dir, got.deno);
  assert.deepEqual(got.calls[0], [
    "run",
    ...flags,
    `--config=${copy.dir}/deno.json`,
    `${copy.dir}/client/cli_bundle_main.ts`,
    `--deno=${got.deno}`,
    `--dir=${dir}`,
  ], got.stderr);
});

/** The `node:` modules `file` (a bundle's JS) loads before it runs: its static imports, followed. */
async function staticNodeImports(file: string, seen = new Set<string>()): Promise<string[]> {
  if (seen.has(file)) return [];
  seen.add(file);
  const text = await Deno.readTextFile(file);
  const found: string[] = [];
  // `import … from "x"` and `import "x"` at the start of a line; `import("x")` is on demand.
  for (const m of text.matchAll(/^(?:import|export)\b[^;(]*?(?:from\s*)?"([^"]+)";/gm)) {
    const spec = m[1]!;
    if (spec.startsWith("node:")) found.push(`${file}: ${spec}`);
    else if (spec.startsWith("./")) {
      found.push(...await staticNodeImports(new URL(spec, `file://${file}`).pathname, seen));
    }
  }
  return found;
}

Deno.test({
  name: "the bundle loads no Node module at start, and prints what the sources print",
  permissions,
}, async () => {
  await using copy = await checkoutCopy();
  const cache = `${copy.dir}/.deno/cli`;
  assert.equal((await marsh(copy, ["--version"])).code, 0);
  const built = await stateBundle(cache);
  assert.match(built ?? "", /^cli-/);
  // Deno's Node layer costs about 20 ms to start (docs/guide.md, "How fast marsh starts").
  assert.deepEqual(await staticNodeImports(`${cache}/${built}/main.js`), []);

  const sources = { ...copy, env: { MARSH_CLI_BUNDLE: "0" } };
  const cases = [
    ["--version"],
    ["--help"],
    ["split", "--help"],
    ["splits", "--help"],
    ["kits", "--help"],
    ["help", "engine"],
    ["no-such-command"],
    ["splits", "--no-such-option"],
    ["split", "stray"],
    // None of these starts a daemon: nothing is left running.
    ["status"],
    ["daemon", "status"],
    ["logs"],
  ];
  for (const args of cases) {
    assert.deepEqual(await marsh(copy, args), await marsh(sources, args), args.join(" "));
  }
  // On a terminal commander wraps help to its width.
  const onTerminal = async (bundle: string, args: string) =>
    dec.decode(
      (await new Deno.Command("script", {
        args: ["-qec", `stty cols 52; ${copy.dir}/marsh ${args}`, "/dev/null"],
        cwd: copy.home,
        env: { MARSH_HOME: copy.home, MARSH_DENO: deno, MARSH_CLI_BUNDLE: bundle },
        stdin: "null",
        stdout: "piped",
      }).output()).stdout,
    );
  for (const args of ["--help", "split --help"]) {
    const bundled = await onTerminal("1", args);
    // Wrapped: not what a pipe gets (80 columns).
    const piped = (await marsh(copy, args.split(" "))).stdout;
    assert.ok(piped.includes("\n"));
    assert.notEqual(bundled.replaceAll("\r", ""), piped);
    assert.equal(bundled, await onTerminal("0", args));
  }
  assert.deepEqual(await marsh(copy, ["daemon", "status"]), {
    code: 1,
    stdout: "marshd: not running\n",
    stderr: "",
  });
});
