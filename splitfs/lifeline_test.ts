import assert from "node:assert/strict";
import { splitfsFlags } from "../protocol/entrypoints.ts";
import { denoPath, UNSHARE } from "../protocol/splitfs_client.ts";

// The real service, started by a bash that the test then kills with SIGKILL.
const perms: Deno.PermissionOptions = { run: true, read: true, env: true };

const repo = new URL("../", import.meta.url).pathname;
const service = [
  denoPath(),
  "run",
  ...splitfsFlags(),
  `--config=${repo}deno.json`,
  `${repo}splitfs/main.ts`,
];
const dec = new TextDecoder();

/** Whether `pid` is a live process (not a zombie), through ps(1). */
async function alive(pid: number): Promise<boolean> {
  const out = await new Deno.Command("ps", { args: ["-o", "stat=", "-p", String(pid)] }).output();
  const stat = dec.decode(out.stdout).trim();
  return stat !== "" && !stat.startsWith("Z");
}

Deno.test({
  name: "lifeline: a service whose parent is not the one named exits at once",
  permissions: perms,
}, async () => {
  const out = await new Deno.Command(service[0]!, {
    args: [...service.slice(1), "--parent=1"],
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn().output();
  assert.equal(out.code, 1);
  assert.match(dec.decode(out.stderr), /the process that started this service \(pid 1\) is gone/);
});

for (const via of ["directly", "through unshare -Urm"] as const) {
  Deno.test({
    name: `lifeline: the service dies with its parent (started ${via})`,
    permissions: perms,
  }, async () => {
    const argv = via === "directly" ? service : [
      UNSHARE,
      "--user",
      "--map-root-user",
      "--mount",
      "--propagation",
      "private",
      "--",
      ...service,
    ];
    // The parent: a bash that starts the service, says its pid and waits.
    const parent = new Deno.Command("bash", {
      args: ["-c", '"$@" --parent=$$ <&0 & echo $!; wait', "bash", ...argv],
      // The service's stdin is this pipe: it stays open (no end of input) after bash is gone.
      stdin: "piped",
      stdout: "piped",
      stderr: "inherit",
    }).spawn();
    const reader = parent.stdout.getReader();
    const { value } = await reader.read();
    const pid = Number(dec.decode(value).trim());
    assert.ok(pid > 0);
    // It is up (FFI loaded, signal armed) once it answers nothing but lives on.
    await new Promise((r) => setTimeout(r, 1500));
    assert.ok(await alive(pid), "the service runs while its parent does");
    parent.kill("SIGKILL");
    await parent.status;
    reader.releaseLock();
    await parent.stdout.cancel();
    try {
      const t0 = Date.now();
      while (await alive(pid)) {
        assert.ok(Date.now() - t0 < 1000, "the service outlived its parent by a second");
        await new Promise((r) => setTimeout(r, 20));
      }
    } finally {
      await parent.stdin.close();
    }
  });
}
