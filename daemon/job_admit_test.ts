/**
 * The daemon's admission entry (docs/rules.md, "Admission"): a real
 * journal, the Kit's image id as its identity, refusals thrown typed with
 * their exit and nothing recorded, the settings read once from the
 * environment.
 */

import assert from "node:assert/strict";
import { Journal } from "../journal/journal.ts";
import { jobRecord } from "../journal/_job_tree_testing.ts";
import { freshPath, scratchDir } from "../journal/_testing.ts";
import type { KitRecord } from "../model/kit_rules.ts";
import { DEFAULT_WALL_S } from "../model/limits.ts";
import {
  AdmissionConfigError,
  AdmissionRefused,
  JobAdmitter,
  readAdmissionConfig,
} from "./job_admit.ts";

const dir = scratchDir("job-admit");
const permissions: Deno.PermissionOptions = { read: [dir], write: [dir] };

function kit(name: string, image = name): KitRecord {
  return {
    name,
    image: `marsh-kit/${name}:0123abcd4567`,
    imageId: `sha256:${image.charCodeAt(0).toString(16).padStart(2, "0").repeat(32)}`,
    entrypoint: null,
    network: "none",
    env: [],
    wallS: DEFAULT_WALL_S,
    home: `/state/marsh/kits/${name}/home`,
    createdMs: 1_000,
  };
}

Deno.test(
  { name: "job admit: lineage, spawn narrowing and the Kit's identity", permissions },
  () => {
    using j = Journal.open(freshPath(dir));
    for (const k of [kit("claude"), kit("codex"), kit("cx", "codex")]) j.addKit(k);
    const a = new JobAdmitter(j, readAdmissionConfig(() => undefined), () => 10_000);
    assert.deepEqual(a.registered(), ["claude", "codex", "cx"]);
    const root = a.admit({
      record: jobRecord("r", "claude"),
      kit: kit("claude"),
      parent: { kind: "session", id: "sess" },
      branch: null,
      via: "run",
      narrow: { env: "claude,codex" },
      tty: true,
    });
    assert.deepEqual(root.lineage, {
      parent: "session:sess",
      root: "r",
      depth: 1,
      spawn: ["claude", "codex"],
      deadlineMs: 10_000 + DEFAULT_WALL_S * 1000,
      parentDeadline: false,
    });
    assert.equal(j.jobTree.lineage("r")!.kitRef, kit("claude").imageId);
    const child = a.admit({
      record: jobRecord("c"),
      kit: kit("codex"),
      parent: { kind: "job", id: "r" },
      branch: null,
      via: "run",
      narrow: { flag: "codex,cx" },
      tty: false,
    });
    assert.deepEqual(child.lineage.spawn, ["codex"]);
    assert.deepEqual(child.warnings, [
      "--spawn: cx left out: a spawn set only narrows (it was: claude, codex)",
    ]);
  },
);

Deno.test({
  name: "job admit: a refusal is typed, carries its exit and records no job",
  permissions,
}, () => {
  using j = Journal.open(freshPath(dir));
  for (const k of [kit("claude"), kit("codex")]) j.addKit(k);
  const a = new JobAdmitter(j, readAdmissionConfig(() => undefined));
  a.admit({
    record: jobRecord("r", "claude"),
    kit: kit("claude"),
    parent: { kind: "session", id: "sess" },
    branch: null,
    via: "run",
    narrow: { env: "claude" },
    tty: false,
  });
  for (const [via, code] of [["link", 126], ["run", 125]] as const) {
    const id = `x-${via}`;
    const refused = (() => {
      try {
        a.admit({
          record: jobRecord(id),
          kit: kit("codex"),
          parent: { kind: "job", id: "r" },
          branch: null,
          via,
          narrow: {},
          tty: false,
        });
      } catch (error) {
        return error;
      }
      return null;
    })();
    assert.ok(refused instanceof AdmissionRefused, String(refused));
    assert.deepEqual([refused.limit, refused.code, refused.message], [
      "spawn",
      code,
      "spawn refused: codex not in this job's spawn set (MARSH_SPAWN)",
    ]);
    assert.equal(j.jobTree.lineage(id), null);
  }
  assert.throws(
    () =>
      a.admit({
        record: jobRecord("t"),
        kit: kit("claude"),
        parent: { kind: "job", id: "r" },
        branch: null,
        via: "run",
        narrow: {},
        tty: true,
      }),
    (e: unknown) => e instanceof AdmissionRefused && e.limit === "tty" && e.code === 125,
  );
  assert.deepEqual(j.jobTree.counts(), { admitted: 1, refused: 3 });
});

Deno.test("job admit: the settings come from the environment once, a bad one stops the start", () => {
  const env = (vars: Record<string, string>) => (n: string) => vars[n];
  assert.deepEqual(
    readAdmissionConfig(env({ MARSH_TREE_KIT_VMS: "2", MARSH_JOB_WALL_SECONDS: "30" })),
    { pool: 8, treeKitVms: 2, wallS: 30 },
  );
  assert.throws(
    () => readAdmissionConfig(env({ MARSH_TREE_KIT_VMS: "65" })),
    (e: unknown) =>
      e instanceof AdmissionConfigError && e.message.startsWith("MARSH_TREE_KIT_VMS=65: expected"),
  );
});
