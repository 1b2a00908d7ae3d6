/**
 * Spawn sets (docs/rules.md, "Spawn sets"): `MARSH_SPAWN`, `--spawn` and
 * `--no-spawn` narrow; nothing widens, whatever is asked (a seeded property).
 */

import assert from "node:assert/strict";
import fc from "fast-check";
import {
  childSpawnSet,
  parseSpawnList,
  spawnAttenuates,
  spawnRefusal,
  type SpawnSetResult,
} from "./job_spawn.ts";
import { assertProperty } from "../tests/_property.ts";

function set(r: SpawnSetResult): readonly string[] {
  if (!r.ok) throw new Error(r.message);
  return r.spawn;
}

Deno.test({ name: "spawn sets: each source narrows to the intersection", permissions: {} }, () => {
  const parent = ["pi", "claude", "codex", "claude"];
  assert.deepEqual(set(childSpawnSet(parent, {})), ["claude", "codex", "pi"]);
  assert.deepEqual(set(childSpawnSet(parent, { env: "claude, codex" })), ["claude", "codex"]);
  assert.deepEqual(set(childSpawnSet(parent, { env: "claude,codex", flag: "codex,pi" })), [
    "codex",
  ]);
  assert.deepEqual(set(childSpawnSet(parent, { none: true })), []);
  assert.deepEqual(set(childSpawnSet(parent, { env: "none" })), []);
  assert.deepEqual(set(childSpawnSet(parent, { flag: "none" })), []);
  // An empty value narrows to nothing rather than being taken as unset.
  assert.deepEqual(set(childSpawnSet(parent, { env: "" })), []);
});

Deno.test({
  name: "spawn sets: asking beyond the parent's set warns and adds nothing",
  permissions: {},
}, () => {
  const r = childSpawnSet(["claude"], { env: "claude,codex", flag: "pi" });
  assert.deepEqual(r, {
    ok: true,
    spawn: [],
    warnings: [
      "MARSH_SPAWN: codex left out: a spawn set only narrows (it was: claude)",
      "--spawn: pi left out: a spawn set only narrows (it was: claude)",
    ],
  });
  assert.deepEqual(
    childSpawnSet([], { flag: "codex" }),
    {
      ok: true,
      spawn: [],
      warnings: ["--spawn: codex left out: a spawn set only narrows (it was: empty)"],
    },
  );
});

Deno.test({ name: "spawn sets: malformed narrowings are refused", permissions: {} }, () => {
  assert.deepEqual(childSpawnSet(["a"], { flag: "a", none: true }), {
    ok: false,
    message: "--spawn and --no-spawn cannot be given together",
  });
  for (const bad of ["Claude", "a,,b", "marsh", "a b", "-x"]) {
    const r = parseSpawnList("MARSH_SPAWN", bad);
    assert.equal(r.ok, false, bad);
  }
  assert.deepEqual(parseSpawnList("--spawn", "a,Bad"), {
    ok: false,
    message:
      `--spawn: "Bad" is not a registered command's name; use --spawn=NAME,NAME... or --spawn=none`,
  });
  assert.deepEqual(parseSpawnList("MARSH_SPAWN", " a , b,a "), { ok: true, names: ["a", "b"] });
  assert.equal(
    spawnRefusal("codex"),
    "spawn refused: codex not in this job's spawn set (MARSH_SPAWN)",
  );
});

Deno.test({ name: "spawn sets property: no narrowing ever widens", permissions: {} }, (t) => {
  const names = ["a", "b", "c", "d", "e"];
  const list = fc.oneof(
    fc.constant("none"),
    fc.subarray(names).map((xs) => xs.join(",")),
    fc.constant("Bad"),
  );
  assertProperty(
    t,
    fc.property(
      fc.subarray(names),
      fc.array(
        fc.record({
          env: fc.option(list, { nil: undefined }),
          flag: fc.option(list, { nil: undefined }),
          none: fc.boolean(),
        }),
        { maxLength: 6 },
      ),
      (root, chain) => {
        // A chain of jobs, each narrowing its parent's set however it likes.
        let parent: readonly string[] = root;
        for (const narrow of chain) {
          const r = childSpawnSet(parent, narrow);
          if (!r.ok) continue;
          assert.ok(spawnAttenuates(parent, r.spawn), `${r.spawn} ⊄ ${parent}`);
          assert.ok(spawnAttenuates(root, r.spawn));
          if (narrow.none) assert.deepEqual(r.spawn, []);
          parent = r.spawn;
        }
      },
    ),
    { numRuns: 500 },
  );
});
