/**
 * The Kit worker's flags: exactly `workerFlags` widened by the engine's
 * socket, the control dir's reads and the environment. The probe shows the
 * rest stays refused; `kit_container_test.ts` runs every container under
 * these flags, which shows they are enough.
 */
import assert from "node:assert/strict";
import { denoPath, sandbox } from "./_testing.ts";
import { kitWorkerFlags } from "../protocol/entrypoints.ts";

const root = new URL("../", import.meta.url).pathname;

Deno.test({ name: "kit flags: exactly these, and no blanket grant", permissions: "none" }, () => {
  const flags = kitWorkerFlags("/state/marsh", "/state/marsh/engine/docker.sock");
  assert.deepEqual(flags, [
    "--no-prompt",
    "--quiet",
    "--allow-run=perl",
    "--allow-read=/state/marsh,/state/marsh/engine/docker.sock",
    "--allow-write=/state/marsh,/state/marsh/engine/docker.sock",
    "--allow-net=unix:/state/marsh/engine/docker.sock",
    "--allow-env",
  ]);
  assert.ok(
    !flags.some((f) => /^(-A|--allow-all|--allow-(ffi|sys)\b|--allow-(read|write|net)$)/.test(f)),
  );
  assert.throws(() => kitWorkerFlags("/state", "docker.sock"), TypeError);
  assert.throws(() => kitWorkerFlags("/state", "/a,b.sock"), TypeError);
  assert.throws(() => kitWorkerFlags("rel", "/s.sock"), TypeError);
});

Deno.test({
  name: "kit flags: the control dir and env become readable, nothing else does",
  permissions: { run: true, read: true, write: true, env: true },
}, async () => {
  using sb = sandbox();
  const out = await new Deno.Command(denoPath(), {
    args: [
      "run",
      ...kitWorkerFlags(sb.control, `${sb.control}/engine.sock`),
      `--config=${root}deno.json`,
      `${root}worker/testdata/permission_probe.ts`,
      sb.control,
    ],
    stdout: "piped",
    stderr: "piped",
  }).output();
  const stderr = new TextDecoder().decode(out.stderr);
  assert.equal(out.code, 0, stderr);
  assert.deepEqual(JSON.parse(new TextDecoder().decode(out.stdout)), {
    writeControl: "granted",
    readControl: "granted",
    writeOutside: "refused",
    readEtc: "refused",
    readShadow: "refused",
    readProc: "refused",
    readCgroup: "refused",
    ffi: "refused",
    listen: "refused",
    connect: "refused",
    runPerl: "granted",
    runBash: "refused",
    spawnPerl: "granted",
    spawnBash: "refused",
    killOther: "refused",
    envForce: "granted",
    envHome: "granted",
  });
});
