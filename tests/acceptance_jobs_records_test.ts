/**
 * `marsh jobs` through the real CLI and daemon over job records admitted
 * through `Journal.jobTree.admit` before the daemon starts (docs/rules.md
 * "Lineage"): a tree four deep, which a test cannot cheaply run as real
 * containers, a refused fifth level, an uncertain job, and old trees the
 * host's listing leaves out. Also what a shell branch (a session) sees.
 *
 * The goldens need no normalising: every record's times are fixed relative
 * to the test's start (a listing within a minute of it reads the same), and
 * the ids are the records'.
 */

import assert from "node:assert/strict";
import { ensureControlDir, JOURNAL_NAME } from "../protocol/control_dir.ts";
import { Journal } from "../journal/journal.ts";
import { jobRecord, launch, WIDE } from "../journal/_job_tree_testing.ts";
import { handleId, PERMISSIONS, Sandbox, show } from "./_acceptance.ts";

/** The sandbox's, and the journal's: it opens its SQLite library and checks the dir's owner. */
const permissions: Deno.PermissionOptions = {
  ...PERMISSIONS as Record<string, unknown>,
  ffi: true,
  sys: ["uid", "gid"],
};

const MIN = 60_000;
const DAY = 86_400_000;

/** Writes the records: `deep` four levels, a refused fifth, an uncertain root, six old roots. */
function record(home: string, nowMs: number): void {
  ensureControlDir(home);
  using j = Journal.open(`${home}/${JOURNAL_NAME}`);
  const t = j.jobTree;
  const names = ["claude", "codex", "fixture", "claude"];
  const ids = ["deep0001", "deep0002", "deep0003", "deep0004"];
  ids.forEach((id, depth) => {
    const created = nowMs - (10 - depth) * MIN;
    const rec = {
      ...jobRecord(id, names[depth]),
      args: [names[depth]!, "-p", `level ${depth + 1}`],
      createdMs: created,
    };
    const d = t.admit(launch(id, depth === 0 ? null : ids[depth - 1]!, names[depth]), WIDE, rec);
    assert.ok(d.ok, JSON.stringify(d));
  });
  // A sibling under the root, launched after the chain's second level.
  assert.ok(
    t.admit(launch("side0001", "deep0001", "codex"), WIDE, {
      ...jobRecord("side0001", "codex"),
      createdMs: nowMs - 8.5 * MIN,
    }).ok,
  );
  const refused = t.admit(launch("deep0005", "deep0004", "codex"), WIDE, jobRecord("deep0005"));
  assert.equal(refused.ok, false);
  for (const [i, id] of [...ids, "side0001"].entries()) {
    j.updateJob(id, {
      state: "finished",
      cleanup: "removed",
      code: i === 3 ? 1 : 0,
      startedMs: nowMs - (10 - i) * MIN + 2_000,
      finishedMs: nowMs - (10 - i) * MIN + 14_500,
    });
  }
  assert.ok(
    t.admit(launch("lost0001", null, "fixture"), WIDE, {
      ...jobRecord("lost0001", "fixture"),
      args: ["fixture", "sh", "-c", "sleep 600"],
      createdMs: nowMs - 30 * MIN,
    }).ok,
  );
  j.updateJob("lost0001", {
    state: "uncertain",
    cleanup: "uncertain",
    startedMs: nowMs - 30 * MIN + 1_000,
    finishedMs: nowMs - 20 * MIN,
  });
  for (let i = 0; i < 6; i++) {
    const id = `old0000${i}`;
    assert.ok(
      t.admit(launch(id, null, "codex"), WIDE, {
        ...jobRecord(id, "codex"),
        args: ["codex", "--version"],
        createdMs: nowMs - (2 + i) * DAY,
      }).ok,
    );
    j.updateJob(id, {
      state: "finished",
      cleanup: "removed",
      code: 0,
      startedMs: nowMs - (2 + i) * DAY + 1_000,
      finishedMs: nowMs - (2 + i) * DAY + 3_000,
    });
  }
  // Two ids sharing their first 8 characters: a prefix of 8 names neither.
  for (const id of ["twin0000a", "twin0000b"]) {
    assert.ok(
      t.admit(launch(id, null, "pi"), WIDE, {
        ...jobRecord(id, "pi"),
        createdMs: nowMs - 9 * DAY,
      }).ok,
    );
    j.updateJob(id, {
      state: "cancelled",
      cleanup: "none",
      code: 130,
      finishedMs: nowMs - 9 * DAY,
    });
  }
}

Deno.test({
  name: "marsh jobs over admitted records: four levels drawn, host scope, show, status",
  permissions,
}, async () => {
  await using sb = await Sandbox.create();
  const now = Date.now();
  record(sb.home, now);

  const all = await sb.marsh(["jobs", "--tree", "--all"]);
  assert.equal(all.code, 0, show(all));
  assert.equal(
    all.stdout,
    [
      "ID        STARTED  STATE      EXIT  RUN    COMMAND",
      "deep0001  10m ago  finished   0     12.5s  claude -p 'level 1'",
      "deep0002  9m ago   finished   0     12.5s  ├─ codex -p 'level 2'",
      "deep0003  8m ago   finished   0     12.5s  │  └─ fixture -p 'level 3'",
      "deep0004  7m ago   finished   1     12.5s  │     └─ claude -p 'level 4'",
      "side0001  8m ago   finished   0     12.5s  └─ codex exec x",
      "lost0001  30m ago  uncertain  -     9m59s  fixture sh -c 'sleep 600'  cleanup uncertain (run marsh workers reset fixture)",
      "old00000  2d ago   finished   0     2.0s   codex --version",
      "old00001  3d ago   finished   0     2.0s   codex --version",
      "old00002  4d ago   finished   0     2.0s   codex --version",
      "old00003  5d ago   finished   0     2.0s   codex --version",
      "old00004  6d ago   finished   0     2.0s   codex --version",
      "old00005  7d ago   finished   0     2.0s   codex --version",
      "twin0000  9d ago   cancelled  130   -      pi exec x",
      "twin0000  9d ago   cancelled  130   -      pi exec x",
      "",
    ].join("\n"),
  );
  // The host terminal: the last hour's trees and the five newest; the rest are counted.
  const host = await sb.marsh(["jobs"]);
  assert.equal(host.code, 0, show(host));
  assert.equal(
    host.stdout,
    [
      "ID        STARTED  STATE      EXIT  RUN    PARENT    COMMAND",
      "deep0001  10m ago  finished   0     12.5s  -         claude -p 'level 1'",
      "deep0002  9m ago   finished   0     12.5s  deep0001  codex -p 'level 2'",
      "deep0003  8m ago   finished   0     12.5s  deep0002  fixture -p 'level 3'",
      "deep0004  7m ago   finished   1     12.5s  deep0003  claude -p 'level 4'",
      "side0001  8m ago   finished   0     12.5s  deep0001  codex exec x",
      "lost0001  30m ago  uncertain  -     9m59s  -         fixture sh -c 'sleep 600'  cleanup uncertain (run marsh workers reset fixture)",
      "old00000  2d ago   finished   0     2.0s   -         codex --version",
      "old00001  3d ago   finished   0     2.0s   -         codex --version",
      "old00002  4d ago   finished   0     2.0s   -         codex --version",
      "(5 older job trees not shown; marsh jobs --all lists every job)",
      "",
    ].join("\n"),
  );
  const json = JSON.parse((await sb.marsh(["jobs", "--json"])).stdout) as {
    jobs: { job_id: string; lineage: { parent: string; root: string; depth: number } }[];
  };
  assert.equal(json.jobs.length, 14, "--json is not scoped");
  assert.deepEqual(json.jobs.find((j) => j.job_id === "deep0004")!.lineage, {
    parent: "job:deep0003",
    root: "deep0001",
    depth: 4,
    spawn: ["claude", "codex", "fixture"],
    deadline_unix_ms: 1_000 + 3_600_000,
    parent_deadline: true,
  });

  const shown = await sb.marsh(["jobs", "show", "deep0002"]);
  assert.equal(shown.code, 0, show(shown));
  assert.match(shown.stdout, /^parent: {4}job:deep0001\nroot: {6}deep0001\ndepth: {5}2\n/m);
  assert.match(shown.stdout, /^children: {2}deep0003\n$/m);
  const twin = await sb.marsh(["jobs", "show", "twin0000"]);
  assert.equal(twin.code, 2, show(twin));
  assert.equal(
    twin.stderr,
    "marsh jobs show: job prefix twin0000 is ambiguous: it names twin0000a, twin0000b; give more characters\n",
  );
  assert.equal((await sb.marsh(["jobs", "show", "twin0000b"])).code, 0);

  const status = await sb.marsh(["status"]);
  assert.match(status.stdout, /^processes: 0 running, 1 refused, 1 held$/m);

  // A shell branch is a session: it started no tree; --all lists every one.
  const r = await sb.marsh([
    "split",
    "-n",
    "-b",
    's="$M" jobs > mine.txt 2>&1; "$M" jobs --tree --all > all.txt 2>&1',
  ]);
  assert.equal(r.code, 0, show(r));
  const id = handleId(r.stdout);
  const m = await sb.split(id);
  assert.ok(m);
  const patch = Deno.readTextFileSync(`${m.out}/s/diff.patch`);
  assert.match(patch, /\n\+no jobs in this session\n/);
  assert.match(patch, /\n\+deep0004 .* {5}└─ claude -p 'level 4'\n/);
  assert.match(
    patch,
    /\n\+[a-z0-9]{8}\/s +\d+s ago +running +- +[0-9.]+s +└─ s: "\$M" jobs > mine.txt/,
  );
});
