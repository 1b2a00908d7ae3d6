/** `split.create`'s `envDigests` (docs/rules.md, "Environment forwarding"): 64 hex digits each, or absent. */

import assert from "node:assert/strict";
import { DaemonProtocolError, parseClientFrame } from "./daemon.ts";

const create = (extra: Record<string, unknown>) => ({
  v: 1,
  t: "split.create",
  cwd: "/p",
  branches: [{ kind: "argv", label: "a", argv: ["k"] }],
  env: { IMG: "a" },
  spool: false,
  ...extra,
});

Deno.test({ name: "split.create: envDigests parse, or stay absent", permissions: "none" }, () => {
  const d = "ab".repeat(32);
  assert.deepEqual(
    (parseClientFrame(create({ envDigests: { IMG: d } })) as { envDigests?: unknown }).envDigests,
    { IMG: d },
  );
  assert.equal("envDigests" in parseClientFrame(create({})), false);
  for (const bad of [[], "x", { IMG: "AB".repeat(32) }, { IMG: "ab" }, { IMG: 1 }]) {
    assert.throws(() => parseClientFrame(create({ envDigests: bad })), DaemonProtocolError);
  }
});
