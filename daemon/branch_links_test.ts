/**
 * A shell branch's links (docs/rules.md "Running a registered command as a
 * job"): one stub per registered name first on `PATH`, none for `marsh`,
 * each running `marsh run NAME "$@"` with the daemon's Deno; run for real
 * with a stand-in launcher that prints what it got.
 */

import assert from "node:assert/strict";
import { BranchRuns, branchStub, withBranchLinks } from "./branch_links.ts";

const permissions: Deno.PermissionOptions = { read: true, write: true, run: true };

Deno.test(
  { name: "branch links: stubs first on PATH, run through the launcher", permissions },
  async () => {
    const dir = await Deno.makeTempDir({ prefix: "marsh-links-" });
    try {
      const env = withBranchLinks(dir, ["tools", "marsh", "Bad Name", "tools"], "/opt/deno", {
        PATH: "/usr/bin:/bin",
        KEEP: "1",
      });
      assert.deepEqual(env, { PATH: `${dir}/bin:/usr/bin:/bin`, KEEP: "1" });
      assert.deepEqual([...Deno.readDirSync(`${dir}/bin`)].map((e) => e.name), ["tools"]);
      assert.equal(Deno.statSync(`${dir}/bin/tools`).mode! & 0o777, 0o755);
      // A stand-in launcher: the stub must pass `run NAME` and the arguments exactly, and the Deno.
      const launcher = `${dir}/it's marsh`;
      Deno.writeTextFileSync(launcher, '#!/bin/sh\necho "$MARSH_DENO"; printf "[%s]" "$@"\n', {
        mode: 0o755,
      });
      Deno.writeTextFileSync(`${dir}/stub`, branchStub("tools", "/opt/deno", launcher), {
        mode: 0o755,
      });
      const out = await new Deno.Command(`${dir}/stub`, {
        args: ["a b", "", "$x"],
        stdout: "piped",
      })
        .output();
      assert.equal(new TextDecoder().decode(out.stdout), "/opt/deno\n[run][tools][a b][][$x]");
      assert.throws(() => branchStub("marsh", "/opt/deno"), TypeError);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
);

Deno.test("branch runs: a branch's capture waits for each run it started, and only those", async () => {
  const runs = new BranchRuns();
  const a = Promise.withResolvers<void>();
  runs.track("s", "x", a.promise);
  let waited = false;
  const settled = runs.settled("s", "x").then(() => waited = true);
  await runs.settled("s", "other");
  await new Promise((r) => setTimeout(r, 10));
  assert.equal(waited, false);
  a.resolve();
  await settled;
  assert.equal(waited, true);
});
