/**
 * A job's display marks through the daemon's admission entry and the
 * journal (docs/rules.md "Lineage"): `fanout` and `consumes` recorded only
 * where they apply, read back by `listed()` and drawn by `marsh jobs`; a
 * `SPLIT_ID` accepted only for a split its caller was handed by join; the
 * client sends only well-formed values.
 */

import assert from "node:assert/strict";
import { Journal } from "../journal/journal.ts";
import { jobRecord } from "../journal/_job_tree_testing.ts";
import { freshPath, sampleSplit, scratchDir } from "../journal/_testing.ts";
import { buildForest } from "../model/job_forest.ts";
import { formatJobsText, jobsDocument } from "../model/job_listing.ts";
import type { KitRecord } from "../model/kit_rules.ts";
import { DEFAULT_WALL_S } from "../model/limits.ts";
import { runMarks } from "../client/run_command.ts";
import { JobAdmitter, type JobLaunch, readAdmissionConfig } from "./job_admit.ts";
import { joinedBy, offeredMarks } from "./job_marks.ts";

const dir = scratchDir("job-marks");
const permissions: Deno.PermissionOptions = { read: [dir], write: [dir] };

const TOOLS: KitRecord = {
  name: "tools",
  image: "marsh-kit/tools:0123abcd4567",
  imageId: `sha256:${"ab".repeat(32)}`,
  entrypoint: null,
  network: "none",
  env: [],
  wallS: DEFAULT_WALL_S,
  home: "/state/marsh/kits/tools/home",
  createdMs: 1_000,
};

const FAN = "abcdefghij12";

function launch(id: string, over: Partial<JobLaunch>, createdMs: number): JobLaunch {
  return {
    record: { ...jobRecord(id, "tools"), args: ["tools", "echo", id], createdMs },
    kit: TOOLS,
    parent: { kind: "session", id: "host" },
    branch: null,
    via: "run",
    narrow: {},
    tty: false,
    ...over,
  };
}

Deno.test({ name: "job marks: recorded where they apply, listed and drawn", permissions }, () => {
  using j = Journal.open(freshPath(dir));
  j.addKit(TOOLS);
  j.createSplit(sampleSplit("5p1i7000aaaa", { state: "joined", createdMs: 500 }));
  const a = new JobAdmitter(j, readAdmissionConfig(() => undefined), () => 10_000);
  const marks = { fanout: `${FAN}/a`, consumes: "5p1i7000aaaa" };
  // Two fanout branches' root jobs, one also a consumer; a child of one (no marks
  // however offered); a split argv branch's job (fanout only); a plain root.
  assert.deepEqual(a.admit(launch("fa00000000", { marks }, 1_000)).marks, marks);
  a.admit(launch("fc00000000", { marks: { fanout: `${FAN}/c` } }, 1_500));
  assert.deepEqual(
    a.admit(launch("ch00000000", { parent: { kind: "job", id: "fa00000000" }, marks }, 2_000))
      .marks,
    {},
  );
  a.admit(launch("fb00000000", { marks: { fanout: `${FAN}/b` } }, 3_000));
  assert.deepEqual(
    a.admit(launch("br00000000", {
      record: { ...jobRecord("br00000000", "tools"), split: "5p1i7000aaaa", label: "x" },
      parent: { kind: "split", split: "5p1i7000aaaa", label: "x" },
      branch: { split: "5p1i7000aaaa", label: "x" },
      via: "branch",
      marks,
    }, 4_000)).marks,
    { fanout: `${FAN}/a` },
  );
  a.admit(launch("pl00000000", { marks: { consumes: "5p1i7000aaaa" } }, 5_000));

  const listed = j.jobTree.listed();
  const lineage = (id: string) => listed.find((l) => l.id === id)!.lineage;
  assert.equal(lineage("fa00000000").fanout, `${FAN}/a`);
  assert.equal(lineage("fa00000000").consumes, "5p1i7000aaaa");
  assert.equal(lineage("fb00000000").fanout, `${FAN}/b`);
  assert.deepEqual([lineage("ch00000000").fanout, lineage("ch00000000").consumes], [
    undefined,
    undefined,
  ]);
  assert.deepEqual([lineage("br00000000").fanout, lineage("br00000000").consumes], [
    `${FAN}/a`,
    undefined,
  ]);
  assert.deepEqual(j.jobTree.lineage("pl00000000")!.consumes, "5p1i7000aaaa");
  assert.deepEqual(j.jobTree.lineage("pl00000000")!.fanout, null);

  const forest = buildForest(listed, []);
  assert.equal(
    formatJobsText(forest, { kind: "all" }, 70_000, { tree: true }),
    [
      "ID        STARTED  STATE    EXIT  RUN    COMMAND",
      "pl000000  1m ago   queued   -     -      tools echo pl00000000  (consumes split 5p1i7000aaaa)",
      // A split the listing was not given: drawn from its branch job's lineage.
      "5p1i7000  1m ago   unknown  -     -      split (x)",
      "br000000  1m ago   queued   -     -      └─ x: tools exec x",
      // One fanout node at its first job's place, running while its jobs are queued.
      "abcdefgh  1m ago   running  -     1m09s  fanout (a, c, b)",
      "fa000000  1m ago   queued   -     -      ├─ a: tools echo fa00000000  (consumes split 5p1i7000aaaa)",
      "ch000000  1m ago   queued   -     -      │  └─ tools echo ch00000000",
      "fc000000  1m ago   queued   -     -      ├─ c: tools echo fc00000000",
      "fb000000  1m ago   queued   -     -      └─ b: tools echo fb00000000",
      "",
    ].join("\n"),
  );
  const doc = jobsDocument(forest) as { jobs: { job_id: string; lineage: unknown }[] };
  assert.deepEqual(doc.jobs.find((x) => x.job_id === "fa00000000")!.lineage, {
    parent: "session:host",
    root: "fa00000000",
    depth: 1,
    spawn: ["tools"],
    deadline_unix_ms: 10_000 + DEFAULT_WALL_S * 1000,
    consumes: "5p1i7000aaaa",
    fanout: `${FAN}/a`,
  });
});

Deno.test(
  { name: "job marks: SPLIT_ID counts only for a split joined by its caller", permissions },
  () => {
    using j = Journal.open(freshPath(dir));
    const host = { kind: "host" } as const;
    const shell = { kind: "branch", split: "outer0000000", label: "s", session: "sess1" } as const;
    for (
      const [id, state] of [["await0000000", "await"], ["kept00000000", "kept"], [
        "run000000000",
        "run",
      ]] as const
    ) {
      j.createSplit(sampleSplit(id, { state }));
    }
    j.createSplit(sampleSplit("mine00000000", {
      state: "joined",
      creator: { kind: "session", id: "sess1" },
      session: "sess1",
    }));
    assert.equal(joinedBy(j, host, "await0000000"), true);
    assert.equal(joinedBy(j, host, "kept00000000"), true);
    // Not yet handed over, unknown, or another creator's: display marks are not forged onto it.
    assert.equal(joinedBy(j, host, "run000000000"), false);
    assert.equal(joinedBy(j, host, "nosuch000000"), false);
    assert.equal(joinedBy(j, host, "mine00000000"), false);
    assert.equal(joinedBy(j, shell, "mine00000000"), true);
    assert.equal(joinedBy(j, shell, "await0000000"), false);
    assert.deepEqual(offeredMarks(j, host, { fanout: `${FAN}/a`, consumes: "run000000000" }), {
      fanout: `${FAN}/a`,
    });
    assert.deepEqual(offeredMarks(j, host, { consumes: "kept00000000" }), {
      consumes: "kept00000000",
    });
    assert.deepEqual(offeredMarks(j, host, {}), {});
  },
);

Deno.test("job marks: marsh run sends only well-formed FANOUT_BRANCH and SPLIT_ID", () => {
  assert.deepEqual(runMarks({ FANOUT_BRANCH: `${FAN}/a`, SPLIT_ID: "5p1i7000aaaa" }), {
    fanout: `${FAN}/a`,
    consumes: "5p1i7000aaaa",
  });
  assert.deepEqual(runMarks({ FANOUT_BRANCH: "nonsense", SPLIT_ID: "../up" }), {});
  assert.deepEqual(runMarks({}), {});
});
