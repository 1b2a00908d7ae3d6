/**
 * The daemon's one rule for a new job's variables (docs/rules.md,
 * "Environment forwarding"), with the real HMAC: a caller's exports cross
 * filtered, a job's offer loses what may not cross and what still matches
 * its starting digest, and a Kit's own `--env` names pass from the caller.
 */

import assert from "node:assert/strict";
import { envSourceOf, forwardedEnv } from "./job_env_forward.ts";
import { jobEnvRecord, linkOffer } from "../model/job_env.ts";
import { envDigest, newEnvKey } from "../protocol/job_env_digest.ts";

const KEY = newEnvKey();

Deno.test(
  {
    name: "env forward: a caller's exports, filtered, plus the Kit's --env names",
    permissions: {},
  },
  () => {
    const exported = {
      FOO: "1",
      GITHUB_TOKEN: "ghp_x",
      AWS_SECRET_ACCESS_KEY: "s",
      OPENAI_API_KEY: "sk",
      MARSH_SPAWN: "a",
      DOCKER_HOST: "unix:///x",
      HOME: "/root",
      PATH: "/usr/bin",
    };
    const got = forwardedEnv(KEY, envSourceOf(false, exported, { FOO: "0".repeat(64) }), [
      "OPENAI_API_KEY",
      "MARSH_JOB",
      "HOME",
      "ABSENT",
    ]);
    assert.deepEqual(got.env, { FOO: "1", OPENAI_API_KEY: "sk" });
    assert.deepEqual(got.forwarded, ["FOO", "OPENAI_API_KEY"]);
    assert.deepEqual(got.dropped, [], "a caller's filtered names are not an offer's drops");
  },
);

Deno.test(
  { name: "env forward: a job's offer drops unchanged image ENV and credentials", permissions: {} },
  () => {
    const digest = (n: string, v: string) => envDigest(KEY, n, v);
    // The job's start: image ENV IMG=a and LANG=C, received FOO=1, marsh's own.
    const start = { IMG: "a", LANG: "C", FOO: "1", HOME: "/h", PATH: "/p", MARSH_JOB: "j" };
    const record = jobEnvRecord(start, ["FOO"], digest);
    // It changed LANG, set NEW and a token, left IMG and FOO alone.
    const now = { ...start, LANG: "C.UTF-8", NEW: "n", GITHUB_TOKEN: "t", MARSH_JOB_SOCK: "/s" };
    const offer = linkOffer(now, record);
    const got = forwardedEnv(KEY, envSourceOf(true, offer.env, offer.digests), []);
    assert.deepEqual(got.env, { FOO: "1", LANG: "C.UTF-8", NEW: "n" });
    assert.deepEqual(got.forwarded, ["FOO", "LANG", "NEW"]);
    assert.deepEqual(
      got.dropped.map((d) => `${d.name}:${d.why}`).sort(),
      ["GITHUB_TOKEN:filtered", "IMG:unchanged", "MARSH_JOB_SOCK:filtered"],
    );
    // Another daemon's key (a restart) matches nothing: IMG then passes as the job's own.
    const other = forwardedEnv(newEnvKey(), envSourceOf(true, offer.env, offer.digests), []);
    assert.equal(other.env.IMG, "a");
  },
);

Deno.test(
  { name: "env forward: a forged digest forwards only the job's own variable", permissions: {} },
  () => {
    const got = forwardedEnv(
      KEY,
      envSourceOf(true, { IMG: "a", X: "1" }, { IMG: "f".repeat(64), X: "nonsense" }),
      [],
    );
    assert.deepEqual(got.env, { IMG: "a", X: "1" });
  },
);

Deno.test(
  { name: "env forward: a Kit's --env name passes from a job's offer as is", permissions: {} },
  () => {
    const offer = { env: { OPENAI_API_KEY: "sk", IMG: "a" }, digests: {} };
    const got = forwardedEnv(KEY, envSourceOf(true, offer.env, offer.digests), ["OPENAI_API_KEY"]);
    assert.deepEqual(got.env, { IMG: "a", OPENAI_API_KEY: "sk" });
    assert.deepEqual(got.dropped, []);
  },
);
