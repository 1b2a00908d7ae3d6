/**
 * The built-in demo: the main job end to end. It makes a small Git project in
 * a temporary directory, starts a private daemon there (its own `MARSH_HOME`,
 * so yours is untouched), and runs
 *
 * ```sh
 * cd src && marsh split -b edit=... -b logo=... -b lint=... | marsh join -- ../../apply-edit.sh
 * ```
 *
 * from the project's `src/`, where one branch edits a file there and the
 * README at the top, one adds a binary file and one fails (`exit 3`), and
 * the consumer applies only the edit with `git apply --3way`, from the
 * project's top (`$SPLIT_ROOT`: in `src/` git would skip the README and exit
 * 0, docs/guide.md "Applying a branch's patch"). Then it prints what happened, checks it (the project's
 * Git still whole once the split is gone: `git fsck`, `git stash`,
 * `git commit`), stops the daemon and removes the temporary directory. Exit status 0 when everything
 * happened as expected, 1 otherwise.
 *
 * Run: `./bin/deno task demo`. Needs `--allow-read`, `--allow-write`,
 * `--allow-run` (bash, git, ./marsh) and `--allow-env`.
 *
 * @module
 */

const repo = new URL("../", import.meta.url).pathname;
const dec = new TextDecoder();

/** No step should take this long; a hung one is killed and reported. */
const STEP_TIMEOUT_MS = 60_000;

/** The longest Unix socket path Linux takes is 107 bytes; branch sockets are `<home>/b/NN.sock`. */
const MAX_HOME_PATH = 107 - "/b/00.sock".length;

interface Ran {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** What the demo expected and did not see. */
const problems: string[] = [];

function expect(ok: boolean, what: string): void {
  if (!ok) problems.push(what);
}

async function run(
  cmd: string,
  args: readonly string[],
  opts: { cwd?: string; env: Record<string, string> },
): Promise<Ran> {
  const signal = AbortSignal.timeout(STEP_TIMEOUT_MS);
  const out = await new Deno.Command(cmd, {
    args: [...args],
    cwd: opts.cwd,
    env: opts.env,
    clearEnv: true,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
    signal,
  }).output();
  if (signal.aborted) {
    problems.push(`${cmd} ${args.join(" ")} to finish within ${STEP_TIMEOUT_MS / 1000} s`);
  }
  return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
}

/** Runs a command that must succeed for the demo to go on. */
async function must(
  cmd: string,
  args: readonly string[],
  opts: { cwd?: string; env: Record<string, string> },
): Promise<string> {
  const r = await run(cmd, args, opts);
  if (r.code !== 0) {
    throw new Error(`${cmd} ${args.join(" ")} exited ${r.code}: ${r.stderr.trim()}`);
  }
  return r.stdout;
}

let stepNo = 0;
function step(title: string): void {
  console.log(`\n== ${++stepNo}. ${title}`);
}

/** Prints a command line and what it printed (stderr first: the notices come before the result). */
function showRun(cmdline: string, r: Ran): void {
  console.log(`   $ ${cmdline}`);
  show(r.stderr + r.stdout, "  ");
}

/** Prints text indented under its step; `prefix` marks where it came from. */
function show(text: string, prefix = ""): void {
  const lines = text.replace(/\n$/, "").split("\n");
  if (lines.length === 1 && lines[0] === "") return;
  for (const line of lines) console.log(`   ${prefix}${line}`);
}

/** The environment every child sees: yours, minus marsh's and Git's own, plus the demo's. */
function childEnv(tmp: string, home: string): Record<string, string> {
  const env = Deno.env.toObject();
  for (const name of Object.keys(env)) {
    // A MARSH_SOCK (inside a shell branch) would send the CLI to another daemon;
    // GIT_DIR and friends (inside a Git hook) would point git at another repository.
    if (name.startsWith("MARSH_") && name !== "MARSH_DENO") delete env[name];
    if (name.startsWith("GIT_")) delete env[name];
  }
  return {
    ...env,
    MARSH_HOME: home,
    PATH: `${tmp}/bin:${env.PATH ?? "/usr/local/bin:/usr/bin:/bin"}`,
    HOME: tmp,
    // Deno's cache stays yours: a fresh HOME would make every process fetch its npm packages again.
    DENO_DIR: env.DENO_DIR ?? `${env.XDG_CACHE_HOME ?? `${env.HOME ?? tmp}/.cache`}/deno`,
    GIT_CONFIG_NOSYSTEM: "1",
    GIT_CONFIG_GLOBAL: "/dev/null",
    GIT_AUTHOR_NAME: "demo",
    GIT_AUTHOR_EMAIL: "demo@example.com",
    GIT_COMMITTER_NAME: "demo",
    GIT_COMMITTER_EMAIL: "demo@example.com",
  };
}

const README = "# Demo\n\nA tiny project.\n";

const GREET = `export function greet(name: string): string {
  return "Hello, " + name;
}
`;

const GREET_EDITED = `export function greet(name: string): string {
  return "Hi, " + name;
}
`;

/** The pipeline the demo runs in the project's src/, as a user would type it (bash, for PIPESTATUS). */
const PIPELINE = `set -o pipefail
marsh split \\
    -b edit='sed -i "s/Hello, /Hi, /" greet.ts && echo "It says hi." >> ../README.md' \\
    -b logo='printf "\\211PNG\\r\\n\\032\\n\\0\\0\\0\\rIHDR\\0\\0\\0\\20" > logo.png' \\
    -b lint='echo "lint: 2 problems in src/greet.ts" >&2; exit 3' \\
  | tee ../../handle.txt \\
  | marsh join -- ../../apply-edit.sh
echo "\${PIPESTATUS[0]} \${PIPESTATUS[2]}" > ../../statuses.txt
`;

/**
 * The consumer: `marsh join` runs it in the caller's directory (src/) with
 * the rendering on stdin and SPLIT_* set; it applies from $SPLIT_ROOT.
 */
const CONSUMER = `#!/bin/sh
set -eu
cat > ../../rendering.txt
echo "SPLIT_ID=$SPLIT_ID"
echo "SPLIT_DIR=$SPLIT_DIR"
echo "SPLIT_ROOT=$SPLIT_ROOT (run from $PWD)"
echo "out/:" $(ls "$SPLIT_DIR")
echo "out/edit/:" $(ls "$SPLIT_DIR/edit")
echo "lint said: $(cat "$SPLIT_DIR/lint/stderr")"
cd "$SPLIT_ROOT"
echo "applying $SPLIT_DIR/edit/diff.patch in $PWD"
git apply --3way --check "$SPLIT_DIR/edit/diff.patch"
git apply --3way "$SPLIT_DIR/edit/diff.patch"
`;

async function makeProject(project: string, env: Record<string, string>): Promise<void> {
  await Deno.mkdir(`${project}/src`, { recursive: true });
  await Deno.writeTextFile(`${project}/README.md`, README);
  await Deno.writeTextFile(`${project}/src/greet.ts`, GREET);
  await Deno.writeTextFile(`${project}/.gitignore`, "*.log\n");
  await must("git", ["init", "-q", "-b", "main"], { cwd: project, env });
  await must("git", ["add", "-A"], { cwd: project, env });
  await must("git", ["commit", "-qm", "initial"], { cwd: project, env });
}

/** `== <label>: <status> (...)` lines of the rendering, by label. */
function statusesOf(rendering: string): Map<string, string> {
  const found = new Map<string, string>();
  for (const m of rendering.matchAll(/^== ([^:\n]+): (.*)$/gm)) found.set(m[1]!, m[2]!);
  return found;
}

async function demo(tmp: string): Promise<void> {
  let home = `${tmp}/home`;
  if (home.length > MAX_HOME_PATH) {
    home = `${await Deno.makeTempDir({ dir: "/tmp", prefix: "marsh-demo-home-" })}/home`;
  }
  const env = childEnv(tmp, home);
  const project = `${tmp}/project`;
  const marsh = `${repo}marsh`;
  await Deno.mkdir(`${tmp}/bin`);
  await Deno.symlink(marsh, `${tmp}/bin/marsh`);

  step(`A small Git project in ${project}`);
  await makeProject(project, env);
  show(await must("git", ["ls-files"], { cwd: project, env }));

  step(`A private daemon: MARSH_HOME=${home}`);
  const started = await run(marsh, ["daemon", "start"], { cwd: project, env });
  showRun("marsh daemon start", started);
  if (started.code !== 0) throw new Error(`marsh daemon start exited ${started.code}`);

  let stopped = false;
  try {
    step("Three branches, one consumer");
    await Deno.writeTextFile(`${tmp}/pipeline.sh`, PIPELINE);
    await Deno.writeTextFile(`${tmp}/apply-edit.sh`, CONSUMER, { mode: 0o755 });
    console.log("   The pipeline, run in the project's src/:\n");
    show(PIPELINE.replace(/\necho "\$\{PIPESTATUS.*\n$/, "\n"), "   ");
    console.log("\n   The consumer, ../../apply-edit.sh:\n");
    show(CONSUMER, "   ");
    const t0 = performance.now();
    const piped = await run("bash", [`${tmp}/pipeline.sh`], { cwd: `${project}/src`, env });
    const seconds = ((performance.now() - t0) / 1000).toFixed(1);
    console.log(`\n   It ran in ${seconds} s. What the consumer printed:`);
    show(piped.stdout, "consumer | ");
    console.log("   What was said on stderr (split, join and the consumer's git):");
    show(piped.stderr, "stderr | ");

    step("What happened");
    const handle = (await readOrEmpty(`${tmp}/handle.txt`)).trim();
    const rendering = await readOrEmpty(`${tmp}/rendering.txt`);
    const [splitStatus, joinStatus] = (await readOrEmpty(`${tmp}/statuses.txt`)).trim().split(" ")
      .map(Number);
    let id = "";
    try {
      id = (JSON.parse(handle) as { id?: string }).id ?? "";
    } catch (error) {
      if (!(error instanceof SyntaxError)) throw error;
    }
    console.log(`   the handle (split's stdout): ${handle || "(none)"}`);
    expect(id !== "" && piped.stdout.includes(`SPLIT_ID=${id}`), "a handle naming the split");
    expect(
      piped.stdout.includes(`SPLIT_ROOT=${project} (run from ${project}/src)`),
      "SPLIT_ROOT: the project's top, for a consumer run in src/",
    );
    console.log("   each branch's status, from the rendering on the consumer's stdin:");
    const statuses = statusesOf(rendering);
    for (const [label, status] of statuses) console.log(`     ${label}: ${status}`);
    expect(statuses.get("edit") === "exited 0 (2 files changed)", "edit: exited 0, 2 files");
    expect(statuses.get("logo") === "exited 0 (1 file changed)", "logo: exited 0, 1 file");
    expect(statuses.get("lint") === "exited 3 (no changes)", "lint: exited 3");
    const binary = rendering.split("\n").find((l) => l.startsWith("binary file changed: "));
    console.log(`   the binary file, as the rendering summarises it:\n     ${binary ?? "(none)"}`);
    expect(binary?.startsWith("binary file changed: src/logo.png (") === true, "a binary summary");
    console.log(`   marsh split exited ${splitStatus} (the first failed branch, lint)`);
    expect(splitStatus === 3, "split exits 3");
    console.log(`   marsh join exited ${joinStatus} (the consumer's status)`);
    expect(joinStatus === 0, "join exits 0");

    console.log("\n   The applied change (git apply --3way stages it, so: git diff HEAD):");
    const diff = await must("git", ["diff", "HEAD"], { cwd: project, env });
    show(diff, "   ");
    const greet = await Deno.readTextFile(`${project}/src/greet.ts`);
    expect(greet === GREET_EDITED, "src/greet.ts edited as the edit branch did");
    const readme = await Deno.readTextFile(`${project}/README.md`);
    expect(readme === `${README}It says hi.\n`, "README.md (outside src/) edited too");
    const status = await must("git", ["status", "--short"], { cwd: project, env });
    console.log("   git status --short (src/logo.png was not applied: the consumer chose):");
    show(status, "   ");
    expect(
      status === "M  README.md\nM  src/greet.ts\n",
      "README.md and src/greet.ts changed in the project, nothing else",
    );

    console.log("\n   The consumer exited 0, so join removed the split:");
    const listed = await run(marsh, ["splits", id], { cwd: project, env });
    showRun(`marsh splits ${id}`, listed);
    expect(listed.stdout.startsWith(`${id}  joined`), "the split is joined");
    expect(!(await exists(`${project}/.marsh/split/${id}`)), "the split's directory is gone");

    step("The project's Git is whole without the split");
    // join wrote the blobs the patches need into .git/objects before the
    // consumer ran: what git apply staged outlives the split's store.
    for (
      const [cmdline, args] of [
        ["git fsck --full", ["fsck", "--full", "--no-dangling"]],
        ["git stash", ["stash", "--quiet"]],
        ["git stash pop --index", ["stash", "pop", "--quiet", "--index"]],
        ["git commit -m 'Say hi'", ["commit", "--quiet", "-m", "Say hi"]],
        ["git fsck --full", ["fsck", "--full", "--no-dangling"]],
      ] as const
    ) {
      const r = await run("git", args, { cwd: project, env });
      showRun(cmdline, r);
      expect(r.code === 0, `${cmdline} to succeed (exit ${r.code})`);
    }
    const committed = await run("git", ["show", "HEAD:src/greet.ts"], { cwd: project, env });
    expect(committed.stdout === GREET_EDITED, "the commit holds the edited src/greet.ts");

    step("Stop the demo's daemon");
    const stop = await run(marsh, ["daemon", "stop"], { cwd: project, env });
    stopped = true;
    showRun("marsh daemon stop", stop);
    expect(stop.code === 0, "the daemon stops");
  } finally {
    if (problems.length > 0) {
      const log = await readOrEmpty(`${home}/marshd.log`);
      console.log("\n   The daemon's log (last lines):");
      show(log.split("\n").slice(-15).join("\n"), "log | ");
    }
    if (!stopped) await run(marsh, ["daemon", "stop"], { cwd: project, env });
    if (!home.startsWith(`${tmp}/`)) {
      await Deno.remove(home.slice(0, -"/home".length), { recursive: true });
    }
  }
}

async function readOrEmpty(path: string): Promise<string> {
  try {
    return await Deno.readTextFile(path);
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return "";
    throw error;
  }
}

async function exists(path: string): Promise<boolean> {
  try {
    await Deno.lstat(path);
    return true;
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return false;
    throw error;
  }
}

if (import.meta.main) {
  const t0 = performance.now();
  const tmp = await Deno.makeTempDir({ prefix: "marsh-demo-" });
  try {
    await demo(tmp);
  } catch (error) {
    problems.push(error instanceof Error ? error.message : String(error));
  } finally {
    await Deno.remove(tmp, { recursive: true });
  }
  const seconds = ((performance.now() - t0) / 1000).toFixed(1);
  if (problems.length === 0) {
    console.log(`\ndemo: everything happened as expected (${seconds} s)`);
  } else {
    console.log(`\ndemo: FAILED (${seconds} s):`);
    for (const p of problems) console.log(`  - expected ${p}`);
    Deno.exit(1);
  }
}
