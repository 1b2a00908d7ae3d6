/**
 * The in-job offer (docs/rules.md, "Environment forwarding"): built from the
 * process's environment and `job.json`, it leaves out what Docker and marsh
 * set and carries the starting digests of the names the job did not receive.
 */

import assert from "node:assert/strict";
import { jobEnvOf, jobEnvOffer, offeringIo } from "./env_offer.ts";
import type { CliIo } from "../client/io.ts";

const D1 = "1".repeat(64);
const D2 = "2".repeat(64);
const JOB_JSON = JSON.stringify({
  version: 1,
  env: { IMG: D1, FOO: D2, HOME: "", PATH: "", HOSTNAME: "" },
  forwarded: ["FOO"],
});

Deno.test({ name: "env offer: from the environment and job.json", permissions: {} }, () => {
  const offer = jobEnvOffer(
    { IMG: "a", FOO: "1", HOME: "/h", PATH: "/p", HOSTNAME: "c", NEW: "n" },
    JOB_JSON,
  );
  assert.deepEqual(offer.env, { FOO: "1", IMG: "a", NEW: "n" });
  assert.deepEqual(offer.digests, { IMG: D1 });
});

Deno.test({ name: "env offer: a job.json without env offers everything", permissions: {} }, () => {
  assert.deepEqual(jobEnvOf({ version: 1 }), { env: {}, forwarded: [] });
  assert.deepEqual(jobEnvOf({ env: { A: 1, B: D1 }, forwarded: ["B", 2] }), {
    env: { B: D1 },
    forwarded: ["B"],
  });
});

Deno.test("env offer: the in-job client's streams offer the process's environment", () => {
  const dir = Deno.makeTempDirSync();
  try {
    Deno.writeTextFileSync(`${dir}/job.json`, JOB_JSON);
    Deno.env.set("IMG", "a");
    const base = {
      cwd: () => "/",
      env: () => ({ NO: "1" }),
      stdinIsTerminal: true,
    } as unknown as CliIo;
    const io = offeringIo(base, `${dir}/job.json`);
    assert.equal(io.env().IMG, "a");
    assert.equal(io.env().NO, undefined);
    assert.deepEqual(io.envDigests!(), { IMG: D1 });
    assert.equal(io.cwd(), "/");
    assert.equal(io.stdinIsTerminal, true);
    const missing = offeringIo(base, `${dir}/none.json`);
    assert.throws(() => missing.env(), /cannot read .*none\.json for this job's environment/);
  } finally {
    Deno.env.delete("IMG");
    Deno.removeSync(dir, { recursive: true });
  }
});
