/**
 * Environment forwarding through a job tree (docs/rules.md, "Environment
 * forwarding") with the real CLI, daemon, worker and engine: the user's
 * exports reach a Kit branch's job and its nested split's job, from the
 * host and from a shell branch, and a three-level tree of `marsh run` and a
 * link's child case; credential-shaped names never reach a job;
 * an image's own `ENV` reaches a child only when the job changed it;
 * `job.json`'s digests are the HMAC of `NAME=VALUE` under the daemon's key,
 * which the test reads from the control dir (`env.key`) and which the
 * container never sees; a forged digest forwards only the job's own value.
 *
 * A branch reports what it saw by writing files into its fork; the test
 * reads them back from the captured patch.
 */

import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import { handleId, PERMISSIONS as permissions, show } from "./_acceptance.ts";
import { World } from "./_kit_world.ts";
import { envDigest } from "../protocol/job_env_digest.ts";
import { readEnvKey } from "../daemon/env_key.ts";
import { ENV_KEY_NAME } from "../protocol/control_dir.ts";

/** The lines a patch adds to `path` (a new file), joined with newlines. */
function added(patch: string, path: string): string {
  const at = patch.indexOf(`diff --git a/${path} b/${path}\n`);
  assert.ok(at >= 0, `${path} in the patch:\n${patch}`);
  const rest = patch.slice(at).split("\n").slice(1);
  const end = rest.findIndex((l) => l.startsWith("diff --git "));
  return (end < 0 ? rest : rest.slice(0, end))
    .filter((l) => l.startsWith("+") && !l.startsWith("+++"))
    .map((l) => l.slice(1))
    .join("\n");
}

interface JobJsonEnv {
  env: Record<string, string>;
  forwarded: string[];
}

/** The user's exports in these tests: two plain ones and credential-shaped ones. */
const EXPORTS = {
  FOO: "exported-foo",
  BAR: "exported bar",
  GITHUB_TOKEN: "ghp_not_for_jobs",
  AWS_SECRET_ACCESS_KEY: "aws-not-for-jobs",
  DATABASE_URL: "postgres://u:pw@db/x",
};

/** Runs the split `args` from the host and returns the patch of its branch `label`. */
async function patchOf(w: World, args: string[], label = "a"): Promise<string> {
  const r = await w.split(["-n", ...args]);
  assert.equal(r.code, 0, show(r));
  const m = await w.manifest(handleId(r.stdout));
  assert.equal(m.branches.find((b) => b.label === label)?.status, "exited 0", show(r));
  return Deno.readTextFileSync(`${m.out}/${label}/diff.patch`);
}

Deno.test({
  name:
    "job env: exports reach a Kit job and its nested split's job; credentials never; job.json digests are the daemon key's HMAC",
  permissions,
}, async () => {
  await using w = await World.create(undefined, EXPORTS);
  const nested = [
    'echo "$FOO|$BAR|${SET_IN_A-unset}|${GITHUB_TOKEN-unset}|${A_TOKEN-unset}" > n.txt',
    "cat /run/marsh/job.json > njob.txt",
  ].join("; ");
  const patch = await patchOf(w, [
    ":::",
    "a",
    "fixture",
    "sh",
    "-c",
    [
      'echo "$FOO|$BAR|${GITHUB_TOKEN-unset}|${AWS_SECRET_ACCESS_KEY-unset}|${DATABASE_URL-unset}" > a.txt',
      "cat /run/marsh/job.json > job.txt",
      // What the container holds: its env, pid 1's, and all of /run/marsh but the programs.
      "env > env.txt",
      "tr '\\0' '\\n' < /proc/1/environ > environ.txt",
      "cat /run/marsh/job.json /run/marsh/context.md /run/marsh/link /run/marsh/bin/* > cap.txt",
      `test -e ${w.sb.home}/${ENV_KEY_NAME} && echo seen > key.txt || echo absent > key.txt`,
      // A child gets what the job received and what it set; a credential it sets is still filtered.
      "export SET_IN_A=set-in-a A_TOKEN=t",
      `marsh split -n ::: n fixture sh -c '${nested}' | marsh join > join.out 2>&1`,
      'echo "rc=$?" >> join.out',
    ].join("; "),
  ]);
  assert.equal(added(patch, "a.txt"), "exported-foo|exported bar|unset|unset|unset");
  const join = added(patch, "join.out");
  assert.match(join, /rc=0$/, join);
  assert.equal(added(join, "n.txt"), "exported-foo|exported bar|set-in-a|unset|unset");

  // job.json: every starting variable digested under the daemon's key, "" for what Docker
  // and marsh set; forwarded: the names received.
  const key = readEnvKey(w.sb.home);
  assert.equal(Deno.statSync(`${w.sb.home}/${ENV_KEY_NAME}`).mode! & 0o777, 0o600);
  const job: JobJsonEnv = JSON.parse(added(patch, "job.txt"));
  assert.ok(job.forwarded.includes("FOO") && job.forwarded.includes("BAR"), job.forwarded.join());
  for (const secret of ["GITHUB_TOKEN", "AWS_SECRET_ACCESS_KEY", "DATABASE_URL", "MARSH_HOME"]) {
    assert.ok(!job.forwarded.includes(secret), secret);
    assert.equal(job.env[secret], undefined, secret);
  }
  assert.equal(job.env.FOO, envDigest(key, "FOO", "exported-foo"));
  assert.equal(job.env.BAR, envDigest(key, "BAR", "exported bar"));
  for (const name of ["HOME", "PATH", "HOSTNAME", "MARSH_JOB", "MARSH_ENTRY"]) {
    assert.equal(job.env[name], "", name);
  }
  for (const [name, digest] of Object.entries(job.env)) {
    assert.match(digest, /^([0-9a-f]{64})?$/, name);
  }
  // The child's: what the job received plus what it set.
  const child: JobJsonEnv = JSON.parse(added(join, "njob.txt"));
  assert.deepEqual(
    child.forwarded.filter((n) => ["BAR", "FOO", "SET_IN_A", "A_TOKEN"].includes(n)),
    ["BAR", "FOO", "SET_IN_A"],
  );
  assert.equal(child.env.SET_IN_A, envDigest(key, "SET_IN_A", "set-in-a"));

  // The key is nowhere in the container: not in its environment, not in /run/marsh.
  const hex = Buffer.from(key).toString("hex");
  for (const file of ["env.txt", "environ.txt", "cap.txt"]) {
    const seen = added(patch, file);
    assert.ok(seen.length > 0, file);
    assert.ok(!seen.includes(hex), `${file} holds the key`);
  }
  assert.equal(added(patch, "key.txt"), "absent");
});

Deno.test({
  name: "job env: a shell branch's exports reach the job of its nested argv branch",
  permissions,
}, async () => {
  await using w = await World.create(undefined, EXPORTS);
  const patch = await patchOf(
    w,
    [
      "-b",
      `s=export IN_SHELL=shell-set; "$M" split -n ::: k fixture sh -c 'echo "$FOO|$IN_SHELL|\${GITHUB_TOKEN-unset}" > k.txt' | "$M" join > join.out 2>&1; echo "rc=$?" >> join.out`,
    ],
    "s",
  );
  const join = added(patch, "join.out");
  assert.match(join, /rc=0$/, join);
  assert.equal(added(join, "k.txt"), "exported-foo|shell-set|unset");
});

/** `docker ARGS` on the test engine; its stdout. */
async function docker(socket: string, args: string[]): Promise<string> {
  const out = await new Deno.Command("docker", {
    args: ["-H", `unix://${socket}`, ...args],
    stdout: "piped",
    stderr: "piped",
  }).output();
  const dec = new TextDecoder();
  assert.ok(out.success, `docker ${args.join(" ")}: ${dec.decode(out.stderr)}`);
  return dec.decode(out.stdout).trim();
}

/** The fixture image plus two `ENV` lines, as a third-party image sets them; its id. */
async function envImage(w: World): Promise<string> {
  const made = await docker(w.socket, ["create", w.ref, "true"]);
  try {
    return await docker(w.socket, [
      "commit",
      "--change",
      "ENV IMG_KEEP=image-keep",
      "--change",
      "ENV IMG_CHANGE=image-change",
      made,
    ]);
  } finally {
    await docker(w.socket, ["rm", made]);
  }
}

Deno.test({
  name:
    "job env: an image's own ENV reaches a child only when the job changed it; a forged digest forwards only the job's own value",
  permissions,
}, async () => {
  const w = await World.create(undefined, EXPORTS);
  let image: string | null = null;
  try {
    image = await envImage(w);
    const add = await w.sb.marsh([
      "kits",
      "add",
      "envkit",
      "--image",
      image,
      "--entrypoint",
      "env",
    ]);
    assert.equal(add.code, 0, show(add));
    const zeros = "0".repeat(64);
    const patch = await patchOf(w, [
      ":::",
      "a",
      "envkit",
      "sh",
      "-c",
      [
        'echo "${IMG_KEEP-unset}|${IMG_CHANGE-unset}|$FOO" > a.txt',
        "cat /run/marsh/job.json > job.txt",
        "export IMG_CHANGE=changed-in-a",
        `marsh split -n ::: n fixture sh -c 'echo "\${IMG_KEEP-unset}|\${IMG_CHANGE-unset}|$FOO" > n.txt' | marsh join > join.out 2>&1`,
        'echo "rc=$?" >> join.out',
        // A forged job.json: IMG_KEEP's digest replaced, so the daemon cannot match it.
        "mkdir /tmp/forge",
        `sed 's/"IMG_KEEP":"[0-9a-f]*"/"IMG_KEEP":"${zeros}"/' /run/marsh/job.json > /tmp/forge/job.json`,
        `GITHUB_TOKEN=forged MARSH_CAP_DIR=/tmp/forge marsh split -n ::: f fixture sh -c 'echo "\${IMG_KEEP-unset}|\${GITHUB_TOKEN-unset}" > f.txt' | marsh join > forge.out 2>&1`,
        'echo "rc=$?" >> forge.out',
      ].join("; "),
    ]);
    // The job itself starts with its image's ENV and the user's exports.
    assert.equal(added(patch, "a.txt"), "image-keep|image-change|exported-foo");
    const key = readEnvKey(w.sb.home);
    const job: JobJsonEnv = JSON.parse(added(patch, "job.txt"));
    assert.equal(job.env.IMG_KEEP, envDigest(key, "IMG_KEEP", "image-keep"));
    assert.equal(job.env.IMG_CHANGE, envDigest(key, "IMG_CHANGE", "image-change"));
    assert.ok(!job.forwarded.includes("IMG_KEEP") && job.forwarded.includes("FOO"));
    // Its child: the changed one crosses, the unchanged one does not, a received one does.
    const join = added(patch, "join.out");
    assert.match(join, /rc=0$/, join);
    assert.equal(added(join, "n.txt"), "unset|changed-in-a|exported-foo");
    // A forged digest only forwards the job's own value; a credential still never crosses.
    const forged = added(patch, "forge.out");
    assert.match(forged, /rc=0$/, forged);
    assert.equal(added(forged, "f.txt"), "image-keep|unset");
  } finally {
    await w[Symbol.asyncDispose]();
    if (image !== null) await docker(w.socket, ["rmi", "-f", image]);
  }
});

Deno.test({
  name:
    "job env: through marsh run and a link, three levels: exports and what each job set reach the tree; image ENV only changed; credentials never",
  permissions,
}, async () => {
  const w = await World.create({
    // Level 1 (envkit, image ENV IMG_KEEP and IMG_CHANGE): changes one, sets one, and a token.
    "l1.sh": [
      'echo "1:$FOO|${IMG_KEEP-unset}|${IMG_CHANGE-unset}|${GITHUB_TOKEN-unset}"',
      'echo "json:$(cat /run/marsh/job.json)"',
      "export IMG_CHANGE=changed SET1=s1 GITHUB_TOKEN=in-job",
      // The link's child case: fixture is not on the image's PATH.
      "fixture sh ./l2.sh",
      "",
    ].join("\n"),
    // Level 2 (fixture's image, no ENV of its own).
    "l2.sh": [
      'echo "2:$FOO|${IMG_KEEP-unset}|${IMG_CHANGE-unset}|${SET1-unset}|${GITHUB_TOKEN-unset}"',
      "export SET2=s2",
      "marsh run envkit sh ./l3.sh",
      "",
    ].join("\n"),
    // Level 3 (envkit again): its own image's ENV, under what it received.
    "l3.sh":
      'echo "3:$FOO|${IMG_KEEP-unset}|${IMG_CHANGE-unset}|${SET1-unset}|${SET2-unset}|${GITHUB_TOKEN-unset}"\n',
  }, EXPORTS);
  let image: string | null = null;
  try {
    image = await envImage(w);
    const add = await w.sb.marsh([
      "kits",
      "add",
      "envkit",
      "--image",
      image,
      "--entrypoint",
      "env",
    ]);
    assert.equal(add.code, 0, show(add));
    const r = await w.sb.marsh(["run", "envkit", "sh", "./l1.sh"]);
    assert.equal(r.code, 0, show(r));
    const lines = r.stdout.trimEnd().split("\n");
    const json = lines.find((l) => l.startsWith("json:"));
    assert.ok(json, r.stdout);
    assert.deepEqual(lines.filter((l) => !l.startsWith("json:")), [
      "1:exported-foo|image-keep|image-change|unset",
      "2:exported-foo|unset|changed|s1|unset",
      "3:exported-foo|image-keep|changed|s1|s2|unset",
    ]);
    // The run job's job.json: the image's ENV digested under the daemon's key, not forwarded.
    const key = readEnvKey(w.sb.home);
    const job: JobJsonEnv = JSON.parse(json.slice("json:".length));
    assert.equal(job.env.IMG_KEEP, envDigest(key, "IMG_KEEP", "image-keep"));
    assert.equal(job.env.FOO, envDigest(key, "FOO", "exported-foo"));
    assert.ok(job.forwarded.includes("FOO") && !job.forwarded.includes("IMG_KEEP"));
  } finally {
    await w[Symbol.asyncDispose]();
    if (image !== null) await docker(w.socket, ["rmi", "-f", image]);
  }
});
