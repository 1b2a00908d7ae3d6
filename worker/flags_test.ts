/**
 * The worker runs with the narrowest flags that work (docs/architecture.md "Permissions"): a probe
 * under its exact flags shows what is refused, and the worker itself works
 * under them (every test in `main_test.ts` starts it that way).
 */
import assert from "node:assert/strict";
import { denoPath, sandbox } from "./_testing.ts";
import { workerFlags } from "../protocol/entrypoints.ts";

const root = new URL("../", import.meta.url).pathname;
const perms: Deno.PermissionOptions = { run: true, read: true, write: true, env: true };

Deno.test(
  {
    name: "flags: the worker may write its control dir and start perl, nothing else",
    permissions: perms,
  },
  async () => {
    using sb = sandbox();
    const out = await new Deno.Command(denoPath(), {
      args: [
        "run",
        ...workerFlags(sb.control),
        `--config=${root}deno.json`,
        `${root}worker/testdata/permission_probe.ts`,
        sb.control,
      ],
      stdout: "piped",
      stderr: "piped",
    }).output();
    const stderr = new TextDecoder().decode(out.stderr);
    assert.equal(out.code, 0, stderr);
    const got = JSON.parse(new TextDecoder().decode(out.stdout));
    assert.deepEqual(got, {
      writeControl: "granted",
      readControl: "refused",
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
      envHome: "refused",
    });
  },
);

Deno.test({ name: "flags: exactly these, and no blanket grant", permissions: "none" }, () => {
  const flags = workerFlags("/state/marsh");
  assert.deepEqual(flags, [
    "--no-prompt",
    "--quiet",
    "--allow-run=perl",
    "--allow-write=/state/marsh",
    "--allow-env=MARSH_WORKER_FORCE_SUBREAPER,NODE_V8_COVERAGE",
  ]);
  assert.ok(!flags.some((f) => /^(-A|--allow-all|--allow-(ffi|net|read|sys)\b)/.test(f)));
  assert.throws(() => workerFlags("relative"), TypeError);
  assert.throws(() => workerFlags("/a,/b"), TypeError);
});
