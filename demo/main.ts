/**
 * The built-in demo: makes a small Git project in a temporary directory,
 * changes a copy of it the way a branch would (edit text, add a binary file,
 * make a script executable, delete a file, replace a file with a symlink),
 * asks `marsh diff` for the patch, and applies it with real `git apply` to
 * show that the copy is reproduced byte for byte.
 *
 * Run: `./bin/deno task demo`
 *
 * @module
 */

const repo = new URL("../", import.meta.url).pathname;
const marsh = `${repo}marsh`;
const enc = new TextEncoder();
const dec = new TextDecoder();

const gitEnv = (home: string) => ({
  HOME: home,
  GIT_CONFIG_NOSYSTEM: "1",
  GIT_CONFIG_GLOBAL: "/dev/null",
  GIT_AUTHOR_NAME: "demo",
  GIT_AUTHOR_EMAIL: "demo@example.com",
  GIT_COMMITTER_NAME: "demo",
  GIT_COMMITTER_EMAIL: "demo@example.com",
});

async function run(
  cmd: string,
  args: string[],
  opts: { cwd?: string; env?: Record<string, string> } = {},
) {
  const out = await new Deno.Command(cmd, {
    args,
    cwd: opts.cwd,
    env: opts.env,
    stdout: "piped",
    stderr: "piped",
  })
    .output();
  return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
}

function step(title: string) {
  console.log(`\n== ${title}`);
}

if (import.meta.main) {
  const tmp = await Deno.makeTempDir({ prefix: "marsh-demo-" });
  const env = gitEnv(tmp);
  try {
    const project = `${tmp}/project`;
    step(`a small Git project in ${project}`);
    await Deno.mkdir(`${project}/src`, { recursive: true });
    await Deno.writeTextFile(`${project}/README.md`, "# Demo\n\nA tiny project.\n");
    await Deno.writeTextFile(
      `${project}/src/greet.ts`,
      'export function greet(name: string) {\n  return "Hello, " + name;\n}\n',
    );
    await Deno.writeTextFile(`${project}/build.sh`, "#!/bin/sh\necho building\n");
    await Deno.writeTextFile(`${project}/notes.txt`, "old notes\n");
    await run("git", ["init", "-q", "-b", "main"], { cwd: project, env });
    await run("git", ["add", "-A"], { cwd: project, env });
    await run("git", ["commit", "-qm", "initial"], { cwd: project, env });
    console.log((await run("git", ["ls-files"], { cwd: project, env })).stdout.trim());

    const fork = `${tmp}/fork`;
    step("a fork of it, changed the way a branch would");
    await run("cp", ["-a", project, fork]);
    await Deno.writeTextFile(
      `${fork}/src/greet.ts`,
      "export function greet(name: string) {\n  return `Hello, ${name}!`;\n}\n",
    );
    await Deno.writeFile(
      `${fork}/logo.bin`,
      Uint8Array.from({ length: 600 }, (_, i) => (i * 7) & 0xff),
    );
    await Deno.chmod(`${fork}/build.sh`, 0o755);
    await Deno.remove(`${fork}/README.md`);
    await Deno.remove(`${fork}/notes.txt`);
    await Deno.symlink("src/greet.ts", `${fork}/notes.txt`);
    console.log(
      "edited src/greet.ts, added logo.bin, chmod +x build.sh, deleted README.md, notes.txt -> symlink",
    );

    step("marsh diff --files project fork");
    const files = await run(marsh, ["diff", "--files", project, fork]);
    console.log(files.stdout.trimEnd());

    step("marsh diff project fork > change.patch");
    const patch = await run(marsh, ["diff", project, fork]);
    if (patch.code !== 1) throw new Error(`marsh diff exited ${patch.code}: ${patch.stderr}`);
    await Deno.writeFile(`${tmp}/change.patch`, enc.encode(patch.stdout));
    console.log(patch.stdout.split("\n").slice(0, 14).join("\n") + "\n...");

    step("git apply change.patch in the project");
    const check = await run("git", ["apply", "--check", `${tmp}/change.patch`], {
      cwd: project,
      env,
    });
    const apply = await run("git", ["apply", `${tmp}/change.patch`], { cwd: project, env });
    if (check.code !== 0 || apply.code !== 0) {
      throw new Error(`git apply failed: ${check.stderr}${apply.stderr}`);
    }
    const again = await run(marsh, ["diff", project, fork]);
    console.log(
      again.code === 0
        ? "applied: the project now matches the fork byte for byte (marsh diff exits 0)"
        : `mismatch after apply:\n${again.stdout}`,
    );
    if (again.code !== 0) Deno.exitCode = 1;
  } finally {
    await Deno.remove(tmp, { recursive: true });
  }
}
