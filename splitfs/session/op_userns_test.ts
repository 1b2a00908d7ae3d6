/**
 * A session driven through a service in a user and mount namespace of its
 * own (`unshare -Urm`, as an unprivileged daemon starts it): the overlays
 * are `userns-overlay` (`user.overlay.*` markers), exist in that namespace
 * only, and the operation runs there through `nsenter`, as the worker's
 * supervisor does. The sealed layer is then read from the host like any.
 */

import assert from "node:assert/strict";
import { mountsBelow, run } from "../_testing.ts";
import { SplitfsService } from "../../protocol/splitfs_client.ts";
import { SessionFs } from "../../protocol/splitfs_session_client.ts";
import { sessionWorld } from "./_session_testing.ts";

Deno.test("in a user namespace: an opaque dir and a whiteout captured, sealed, read back from the host", async () => {
  using w = await sessionWorld({ "a": "1\n", "src/x": "x\n", "src/y/z": "z\n", "keep": "k\n" });
  const at = { root: w.root, name: "ns" };
  await using svc = SplitfsService.start({ userNamespace: true });
  const fs = new SessionFs(svc);
  const opened = await fs.open(at, false);
  const prep = await fs.prepareOp(at, "o1", opened.layers);
  const inNs = (script: string) =>
    run("nsenter", [
      `--target=${svc.pid}`,
      "--user",
      "--mount",
      "--preserve-credentials",
      "--",
      "bash",
      "-c",
      script,
    ], { home: w.sb.home, cwd: "/" });
  // The host does not see the namespace's overlays.
  assert.deepEqual(mountsBelow(`${w.root}/.marsh/session`), []);
  await inNs(
    `cd ${prep.merged} && rm -rf src && mkdir src && echo new > src/x && rm keep && echo 2 > a`,
  );
  const expected = (await inNs(`cd ${prep.merged} && find . -type f | sort | xargs cat`)).trim();
  const cap = await fs.captureOp(at, "o1", opened);
  assert.equal(cap.kind, "changed");
  if (cap.kind !== "changed") return;
  assert.deepEqual(cap.paths.map((p) => `${p.path} ${p.change}`), [
    "a modified",
    "keep deleted",
    "src/x modified",
    "src/y deleted",
  ]);
  const layers = await fs.sealOp(at, "o1", { ...cap, layers: opened.layers });
  await fs.dropOp(at, "o1");
  const view = await fs.mountView(at, layers);
  assert.equal(view.rootId, cap.rootId);
  // From the host: the layer is sealed and whole, and its stack shows what the op saw.
  assert.equal((await fs.checkLayer(w.root, cap.layer, cap.rootId)).state, "durable");
  const mnt = `${w.sb.top}/host-view`;
  Deno.mkdirSync(mnt);
  const lowers = [...layers].reverse().map((id) => `${w.root}/.marsh/layers/${id}/data`);
  await run("mount", ["-t", "overlay", "overlay", "-o", `ro,lowerdir=${lowers.join(":")}`, mnt], {
    home: w.sb.home,
  });
  try {
    assert.equal(await w.gitTree(mnt), cap.rootId);
    const seen = (await run("bash", ["-c", "find . -type f | sort | xargs cat"], {
      home: w.sb.home,
      cwd: mnt,
    })).trim();
    assert.equal(seen, expected);
  } finally {
    await run("umount", [mnt], { home: w.sb.home });
  }
  await fs.close(at);
});
