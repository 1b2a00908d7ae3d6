/**
 * `view-mount` of the stack the view shows already (a no-change checkpoint,
 * docs/checkpoints.md "The model") leaves the mount as it is, while it is
 * still the mount this process made; any other mount at the path is
 * replaced as before.
 */

import assert from "node:assert/strict";
import { mountsBelow } from "../_testing.ts";
import { readMounts } from "../fd/mountinfo.ts";
import { sessionWorld } from "./_session_testing.ts";
import type { SessionOpenedReply, ViewMountedReply } from "../../protocol/splitfs_session.ts";

function viewMountId(view: string): number | undefined {
  return readMounts().filter((m) => m.mountPoint === view).at(-1)?.id;
}

Deno.test("view-mount: the stack shown already keeps its mount; a mount not ours is replaced", async () => {
  using w = await sessionWorld({ "a": "1\n" });
  const at = { root: w.root, name: "s" };
  const head = await w.call<SessionOpenedReply>({ t: "session-open", ...at, withIgnored: false });
  const first = await w.call<ViewMountedReply>({ t: "view-mount", ...at, layers: head.layers });
  const id = viewMountId(first.view);
  assert.ok(id !== undefined);
  const again = await w.call<ViewMountedReply>({ t: "view-mount", ...at, layers: head.layers });
  assert.deepEqual(again, first);
  assert.equal(viewMountId(first.view), id, "the same mount");
  // Another mount on top of ours at the path: not the one this process made.
  const tmp = `${w.sb.top}/other`;
  Deno.mkdirSync(tmp);
  const bind = new Deno.Command("mount", { args: ["--bind", tmp, first.view] }).outputSync();
  assert.ok(bind.success);
  const other = viewMountId(first.view);
  assert.notEqual(other, id);
  await w.call<ViewMountedReply>({ t: "view-mount", ...at, layers: head.layers });
  assert.equal(Deno.readTextFileSync(`${first.view}/a`), "1\n", "the view shows the stack again");
  new Deno.Command("umount", { args: ["-R", first.view] }).outputSync();
  await w.call({ t: "session-close", ...at });
  assert.deepEqual(mountsBelow(w.sb.top), []);
});
