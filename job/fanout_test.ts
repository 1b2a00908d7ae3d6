/**
 * `marsh fanout`, `marsh collect` and `marsh context` in the in-job client, as a Kit container runs
 * it: bundled for real, run by this Deno with exactly `JOB_CLIENT_FLAGS`, from an empty
 * environment (`env -i`) with `MARSH_CAP_DIR` pointing at a temp dir holding `job.json` and
 * `context.md`. No daemon is involved: a fanout is local.
 */
import assert from "node:assert/strict";
import { CAP_SOCKET, JOB_CLIENT_FLAGS } from "../protocol/job_capability.ts";
import { parseFanoutLine } from "../model/fanout.ts";
import { bundleJobClient } from "./bundle.ts";

const permissions: Deno.PermissionOptions = { run: true, read: true, write: true, env: true };
const dec = new TextDecoder();

let bundled: Promise<string> | undefined;

/** One bundle for every test in this file (removed at exit with its dir). */
function bundle(): Promise<string> {
  bundled ??= (async () => {
    const dir = await Deno.makeTempDir({ prefix: "marsh-job-bundle-" });
    globalThis.addEventListener("unload", () => Deno.removeSync(dir, { recursive: true }));
    const out = `${dir}/marsh.js`;
    await bundleJobClient(Deno.execPath(), out);
    return out;
  })();
  return bundled;
}

/** A temp cap dir with `job.json` and `context.md`, and a work dir beside it for the branches. */
async function capDir(context = "# marsh job 01JOB (fixture)\nthe job's own text\n") {
  const path = await Deno.makeTempDir({ prefix: "marsh-cap-" });
  const socket = `${path}/cap.sock`;
  await Deno.writeTextFile(
    `${path}/job.json`,
    JSON.stringify({
      version: 1,
      job: "01JOB",
      name: "fixture",
      spawn: ["fixture"],
      registered: ["fixture"],
      socket,
      path: "/run/marsh/bin:/usr/bin:/bin",
      limits: { pool: 8, depth: 4, same_kit: 2, fan_out: 4, total: 64 },
      env: {},
      forwarded: [],
    }),
  );
  if (context !== "") await Deno.writeTextFile(`${path}/context.md`, context);
  await Deno.mkdir(`${path}/work`);
  return {
    path,
    socket,
    work: `${path}/work`,
    async [Symbol.asyncDispose]() {
      await Deno.remove(path, { recursive: true });
    },
  };
}

/** Runs the bundle as the link does, in `cap.work`: `deno run JOB_CLIENT_FLAGS marsh.js ARGS`. */
async function job(
  args: readonly string[],
  cap: { path: string; socket: string; work: string },
  stdin?: string,
): Promise<{ code: number; stdout: string; stderr: string }> {
  const flags = JOB_CLIENT_FLAGS.map((f) => f.replace(CAP_SOCKET, cap.socket));
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", ...flags, await bundle(), "--link=marsh", ...args],
    cwd: cap.work,
    clearEnv: true,
    env: { MARSH_CAP_DIR: cap.path, DENO_NO_UPDATE_CHECK: "1" },
    stdin: stdin === undefined ? "null" : "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  if (stdin !== undefined) {
    const w = child.stdin.getWriter();
    await w.write(new TextEncoder().encode(stdin));
    await w.close();
  }
  const out = await child.output();
  return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
}

Deno.test({
  name: "in a job fanout runs argv branches on the job's files; collect renders them",
  permissions,
}, async () => {
  await using cap = await capDir();
  const r = await job(
    [
      "fanout",
      ":::",
      "a",
      "sh",
      "-c",
      'echo "$FANOUT_BRANCH"; cat; echo made > a.made',
      ":::",
      "b",
      "sh",
      "-c",
      "echo no >&2; exit 5",
    ],
    cap,
    "spooled\n",
  );
  assert.equal(r.code, 5, r.stderr);
  const line = parseFanoutLine(r.stdout);
  assert.equal(dec.decode(line.branches[0]!.stdout), `${line.id}/a\nspooled\n`);
  assert.equal(await Deno.readTextFile(`${cap.work}/a.made`), "made\n");
  const c = await job(["collect"], cap, r.stdout);
  assert.equal(c.code, 5, c.stderr);
  assert.equal(
    c.stdout,
    `== a: exited 0\n${line.id}/a\nspooled\n\n== b: exited 5\n== b stderr ==\nno\n\n`,
  );
});

Deno.test({
  name: "in a job fanout refuses -b with the session-shell message; nothing runs",
  permissions,
}, async () => {
  await using cap = await capDir();
  const r = await job(["fanout", "-n", "-b", "x=touch ran", ":::", "a", "touch", "ran"], cap);
  assert.equal(r.code, 2);
  assert.equal(r.stdout, "");
  assert.equal(
    r.stderr,
    "marsh fanout: x: shell branches (-b, split { }) run only from the session shell; from a job or a split branch use argv branches: ::: LABEL CMD [ARG...]\n",
  );
  assert.deepEqual([...Deno.readDirSync(cap.work)], [], "nothing ran");
});

Deno.test({
  name: "in a job marsh context prints the job's own context.md, and says so when it is missing",
  permissions,
}, async () => {
  await using cap = await capDir();
  const r = await job(["context"], cap);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stdout, "# marsh job 01JOB (fixture)\nthe job's own text\n");
  assert.deepEqual([...Deno.readDirSync(cap.work)], [], "it writes nothing");

  await using bare = await capDir("");
  const missing = await job(["context"], bare);
  assert.equal(missing.code, 2);
  assert.match(
    missing.stderr,
    new RegExp(`^marsh context: cannot read ${bare.path}/context\\.md: .*run the job again\n$`),
  );
});

Deno.test({ name: "the job's help lists fanout, collect and context", permissions }, async () => {
  await using cap = await capDir();
  const r = await job(["--help"], cap);
  assert.equal(r.code, 0, r.stderr);
  for (const cmd of ["fanout", "collect", "context"]) {
    assert.match(r.stdout, new RegExp(`\n  ${cmd} `));
  }
});
