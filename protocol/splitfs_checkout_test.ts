import assert from "node:assert/strict";
import type { MergePlan } from "../model/resolution_plan.ts";
import { parseSplitfsReply, parseSplitfsRequest, ProtocolError, splitfsToWire } from "./splitfs.ts";
import type { CheckoutApplyRequest, CheckoutPlannedReply } from "./splitfs_checkout.ts";
import { parseClientFrame } from "./daemon.ts";
import { DaemonProtocolError } from "./daemon.ts";

const ROOT = "a".repeat(40);
const STACK = { layers: ["abcd1234"], rootId: ROOT };
const PLAN: MergePlan = {
  scope: "checkout",
  trees: { base: ROOT, source: null, branch: "b".repeat(40), result: "b".repeat(40) },
  entries: [
    {
      op: "take",
      path: "a.txt",
      before: { kind: "absent" },
      after: { kind: "file", mode: 0o644, blob: "c".repeat(40) },
      bytes: "branch",
    },
    { op: "delete", path: "b.txt", before: { kind: "symlink", target: "a.txt" } },
  ],
};

/** Through the wire and back, as the daemon and the service exchange it. */
function wire<T>(f: T): unknown {
  return JSON.parse(JSON.stringify(splitfsToWire(f as never)));
}

Deno.test("checkout-plan and checkout-apply go through the wire; malformed ones are refused", () => {
  const req = {
    v: 1,
    t: "checkout-plan",
    root: "/p",
    target: STACK,
    base: { layers: [], rootId: "4b825dc642cb6eb9a060e54bf8d69288fbee4904" },
    withIgnored: false,
    env: { HOME: "/home/u" },
  };
  assert.deepEqual(parseSplitfsRequest(wire(req)), req);
  const apply: CheckoutApplyRequest = {
    v: 1,
    t: "checkout-apply",
    root: "/p",
    target: STACK,
    resolution: "r1",
    plan: PLAN,
  };
  assert.deepEqual(parseSplitfsRequest(wire(apply)), apply);
  for (
    const bad of [
      { ...req, root: "p" },
      { ...req, target: { layers: ["../x"], rootId: ROOT } },
      { ...req, base: { layers: [], rootId: "xyz" } },
      { ...req, withIgnored: "no" },
      { ...req, env: "HOME=/x" },
      { ...(wire(apply) as object), plan: { schema: "nope" } },
      {
        ...(wire(apply) as object),
        plan: (wire({ ...apply, plan: { ...PLAN, scope: "promote" } }) as { plan: unknown }).plan,
      },
    ]
  ) assert.throws(() => parseSplitfsRequest(bad), ProtocolError, JSON.stringify(bad));
});

Deno.test("checkout-planned goes through the wire; malformed ones are refused", () => {
  const reply: CheckoutPlannedReply = {
    v: 1,
    t: "checkout-planned",
    plan: PLAN,
    projectChanges: ["x.txt"],
    projectChangesMore: 0,
  };
  assert.deepEqual(parseSplitfsReply(wire(reply)), reply);
  const w = wire(reply) as Record<string, unknown>;
  for (const bad of [{ ...w, projectChanges: [1] }, { ...w, projectChangesMore: -1 }]) {
    assert.throws(() => parseSplitfsReply(bad), ProtocolError, JSON.stringify(bad));
  }
});

Deno.test("the daemon's checkout frame parses; malformed ones are refused", () => {
  const f = {
    v: 1,
    t: "checkout",
    cwd: "/p",
    session: null,
    checkpoint: "3f9a",
    dryRun: true,
    retireProjectChanges: false,
    env: { HOME: "/home/u" },
  };
  assert.deepEqual(parseClientFrame(f), f);
  for (
    const bad of [
      { ...f, cwd: "" },
      { ...f, session: 3 },
      { ...f, dryRun: "yes" },
      { ...f, retireProjectChanges: undefined },
      { ...f, env: null },
      { ...f, env: { HOME: 1 } },
    ]
  ) assert.throws(() => parseClientFrame(bad), DaemonProtocolError, JSON.stringify(bad));
});
