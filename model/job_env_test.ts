/**
 * Environment forwarding (docs/rules.md, "Environment forwarding"): the
 * user's exports reach a root job, what a job received or changed reaches
 * its child, and neither the image's own `ENV` nor credentials ever cross.
 * The digests are the real HMAC (`protocol/job_env_digest.ts`).
 */

import assert from "node:assert/strict";
import {
  acceptOffer,
  crossesToJob,
  crossingEnv,
  type EnvDigest,
  jobEnvRecord,
  linkOffer,
} from "./job_env.ts";
import { envDigest, envDigestMatches, newEnvKey } from "../protocol/job_env_digest.ts";

const KEY = newEnvKey();
const digest: EnvDigest = (n, v) => envDigest(KEY, n, v);
const matches = (n: string, v: string, d: string) => envDigestMatches(KEY, n, v, d);

const IMAGE_ENV = { LANG: "C.UTF-8", IMAGE_VAR: "img", NODE_VERSION: "20", NPM_TOKEN: "image" };

/** A container's start: the image's ENV, then what it received, then what Docker and marsh set. */
function start(received: Record<string, string>): Record<string, string> {
  return {
    ...IMAGE_ENV,
    ...received,
    HOSTNAME: "c0ffee",
    HOME: "/home/kit",
    PATH: "/run/marsh/bin:/usr/bin",
    MARSH_JOB: "j1",
    MARSH_ENTRY: "1",
  };
}

Deno.test(
  { name: "env: what crosses from the user's exports to a root job", permissions: {} },
  () => {
    const exported = {
      FOO: "1",
      LANG: "C",
      GITHUB_TOKEN: "ghp_x",
      OPENAI_API_KEY: "sk",
      DATABASE_URL: "postgres://u:secret@db/x",
      MARSH_SPAWN: "claude",
      DOCKER_HOST: "unix:///x",
      PATH: "/usr/bin",
      HOME: "/root",
      HOSTNAME: "laptop",
      "A.B": "1",
      SSH_AUTH_SOCK: "/tmp/agent",
      GIT_AUTHOR_NAME: "A",
    };
    assert.deepEqual(crossingEnv(exported), { FOO: "1", GIT_AUTHOR_NAME: "A", LANG: "C" });
    assert.ok(!crossesToJob("path", "/x"), "compared case-insensitively");
  },
);

Deno.test({
  name: "env: job.json records a digest per starting variable, \"\" for Docker's and marsh's",
  permissions: {},
}, () => {
  const rec = jobEnvRecord(start({ FOO: "1", LANG: "C" }), ["LANG", "FOO", "FOO"], digest);
  assert.deepEqual(rec.forwarded, ["FOO", "LANG"]);
  assert.deepEqual(Object.keys(rec.env), [
    "FOO",
    "HOME",
    "HOSTNAME",
    "IMAGE_VAR",
    "LANG",
    "MARSH_ENTRY",
    "MARSH_JOB",
    "NODE_VERSION",
    "NPM_TOKEN",
    "PATH",
  ]);
  for (const n of ["HOME", "HOSTNAME", "MARSH_ENTRY", "MARSH_JOB", "PATH"]) {
    assert.equal(rec.env[n], "");
  }
  assert.equal(rec.env.IMAGE_VAR, envDigest(KEY, "IMAGE_VAR", "img"));
  assert.equal(rec.env.LANG, envDigest(KEY, "LANG", "C"), "the received value, not the image's");
  assert.match(rec.env.FOO!, /^[0-9a-f]{64}$/);
});

Deno.test({
  name: "env: a child gets what the job received or changed, never the image's ENV or secrets",
  permissions: {},
}, () => {
  const rec = jobEnvRecord(start({ FOO: "1", LANG: "C" }), ["FOO", "LANG"], digest);
  // The job's environment when it runs a child: some kept, some changed, some new.
  const current = {
    ...start({ FOO: "1", LANG: "C" }),
    NODE_VERSION: "22",
    BAR: "2",
    ANTHROPIC_API_KEY: "sk-ant",
    PWD: "/work",
  };
  const offer = linkOffer(current, rec);
  assert.deepEqual(Object.keys(offer.env), [
    "ANTHROPIC_API_KEY",
    "BAR",
    "FOO",
    "IMAGE_VAR",
    "LANG",
    "NODE_VERSION",
    "NPM_TOKEN",
    "PWD",
  ], 'all but the "" ones are offered');
  assert.deepEqual(Object.keys(offer.digests), ["IMAGE_VAR", "NODE_VERSION", "NPM_TOKEN"]);
  const { env, dropped } = acceptOffer(offer, matches);
  assert.deepEqual(env, { BAR: "2", FOO: "1", LANG: "C", NODE_VERSION: "22" });
  assert.deepEqual(dropped, [
    { name: "ANTHROPIC_API_KEY", why: "filtered" },
    { name: "IMAGE_VAR", why: "unchanged" },
    { name: "NPM_TOKEN", why: "filtered" },
    { name: "PWD", why: "filtered" },
  ]);
  // The child's own job.json: what it received, and the tree goes on.
  const child = jobEnvRecord({ ...IMAGE_ENV, ...env }, Object.keys(env), digest);
  assert.deepEqual(child.forwarded, ["BAR", "FOO", "LANG", "NODE_VERSION"]);
  const again = acceptOffer(linkOffer({ ...IMAGE_ENV, ...env }, child), matches).env;
  assert.deepEqual(again, env, "a re-exported received variable passes on with the same value");
});

Deno.test({
  name: "env: a forged or missing digest forwards only the job's own variables",
  permissions: {},
}, () => {
  const rec = jobEnvRecord(start({}), [], digest);
  const current = start({});
  const honest = acceptOffer(linkOffer(current, rec), matches).env;
  assert.deepEqual(honest, {}, "an unchanged image ENV never crosses");
  const forged = {
    env: { IMAGE_VAR: "img", HOSTNAME: "x", PATH: "/evil" },
    digests: { IMAGE_VAR: "0".repeat(64) },
  };
  assert.deepEqual(acceptOffer(forged, matches).env, { IMAGE_VAR: "img" });
  assert.deepEqual(acceptOffer({ env: { IMAGE_VAR: "img" }, digests: {} }, matches).env, {
    IMAGE_VAR: "img",
  });
  // The documented limitation: set back to the image's value, a variable is not forwarded.
  const reset = linkOffer({ ...current, IMAGE_VAR: "img" }, rec);
  assert.deepEqual(acceptOffer(reset, matches).env, {});
});
