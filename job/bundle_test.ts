/** Bundling the in-job client: where it goes, and how a failure reads. */
import assert from "node:assert/strict";
import { bundleJobClient, JOB_CLIENT_ENTRY, JobBundleError } from "./bundle.ts";

const permissions: Deno.PermissionOptions = { run: true, read: true, write: true, env: true };

async function tempDir(): Promise<AsyncDisposable & { path: string }> {
  const path = await Deno.makeTempDir({ prefix: "marsh-bundle-" });
  return {
    path,
    async [Symbol.asyncDispose]() {
      await Deno.remove(path, { recursive: true });
    },
  };
}

Deno.test(
  { name: "the bundle replaces its target atomically, mode 0644", permissions },
  async () => {
    await using dir = await tempDir();
    const out = `${dir.path}/marsh.js`;
    await Deno.writeTextFile(out, "old", { mode: 0o600 });
    await bundleJobClient(Deno.execPath(), out);
    const st = await Deno.stat(out);
    assert.equal(st.mode! & 0o777, 0o644);
    assert.ok(st.size > 10_000, `a bundle of ${st.size} bytes`);
    assert.deepEqual((await Array.fromAsync(Deno.readDir(dir.path))).map((e) => e.name), [
      "marsh.js",
    ]);
  },
);

Deno.test({ name: "a failed bundle says why, with deno's stderr", permissions }, async () => {
  await using dir = await tempDir();
  const fake = `${dir.path}/deno`;
  await Deno.writeTextFile(fake, "#!/bin/sh\necho 'error: Module not found' >&2\nexit 3\n", {
    mode: 0o755,
  });
  const out = `${dir.path}/marsh.js`;
  await assert.rejects(
    bundleJobClient(fake, out),
    (e: unknown) =>
      e instanceof JobBundleError &&
      e.message === `${fake} bundle ${JOB_CLIENT_ENTRY} failed (exit 3): error: Module not found`,
  );
  await assert.rejects(
    bundleJobClient(`${dir.path}/missing`, out),
    (e: unknown) =>
      e instanceof JobBundleError &&
      e.message.startsWith(`cannot run ${dir.path}/missing to bundle the in-job client: `),
  );
  assert.deepEqual((await Array.fromAsync(Deno.readDir(dir.path))).map((e) => e.name), ["deno"]);
});
