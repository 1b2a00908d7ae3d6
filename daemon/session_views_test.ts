import assert from "node:assert/strict";
import { ViewMounts } from "./session_views.ts";
import type { SessionStore } from "./session_context.ts";

/** A store whose mounts end when the test says, recording each call's stack. */
function gatedStore() {
  const calls: { layers: readonly string[]; done: PromiseWithResolvers<void> }[] = [];
  const store = {
    mountView(_at: unknown, layers: readonly string[]) {
      const done = Promise.withResolvers<void>();
      calls.push({ layers, done });
      return done.promise.then(() => ({
        view: "/p/.marsh/session/s/view",
        rootId: layers.at(-1)!,
        class: "virtual",
      }));
    },
  } as unknown as SessionStore;
  return { store, calls };
}

const at = { root: "/p", name: "s" };
const tick = () => new Promise((r) => setTimeout(r, 0));

Deno.test("ViewMounts: one remount at a time; a newer request replaces the waiting one", async () => {
  const { store, calls } = gatedStore();
  const v = new ViewMounts(store);
  const a = v.remount("s1", at, ["l1"]);
  const b = v.remount("s1", at, ["l2"]);
  const c = v.remount("s1", at, ["l3"]);
  await tick();
  assert.deepEqual(calls.map((x) => x.layers), [["l1"]], "one runs; the others wait");
  calls[0]!.done.resolve();
  assert.equal((await a).root, "l1");
  await tick();
  assert.deepEqual(calls.map((x) => x.layers), [["l1"], ["l3"]], "l2 was replaced by l3");
  calls[1]!.done.resolve();
  assert.equal((await b).root, "l3", "the replaced caller gets the newer mount");
  assert.equal((await c).root, "l3");
  assert.deepEqual(v.shown("s1"), { root: "l3", class: "virtual" });
  await v.idle("s1");
  // Another session's view is independent.
  const d = v.remount("s2", at, ["m1"]);
  await tick();
  assert.equal(calls.length, 3);
  calls[2]!.done.reject(new Error("mount failed"));
  await assert.rejects(d, /mount failed/);
  assert.equal(v.shown("s2"), null);
  assert.equal(v.shown("s1")?.root, "l3");
});
