/**
 * Issue 11 §3, `marsh gc --all` through the real `./marsh` CLI and daemon:
 * everything marsh stored for a project goes — its splits (refused,
 * removing nothing, while one runs or awaits its join), every snapshot
 * layer with the chain heads, and `.marsh` itself — and nothing else: not
 * the project's files, not another project's splits, not what marsh did
 * not make.
 */

import assert from "node:assert/strict";
import type { Manifest } from "../protocol/manifest.ts";
import { fingerprint, fingerprintDiff } from "../splitfs/_testing.ts";
import { exists, finish, handleId, PERMISSIONS, Sandbox, show, waitFor } from "./_acceptance.ts";

/** A lease far beyond the test: an awaiting split stays awaiting. */
const ENV = { MARSH_LEASE_MS: "600000" };

interface GcAll {
  root: string;
  dry_run: boolean;
  splits: { id: string; state: string; created_unix_ms: number; message: string }[];
  failed: { id: string; state: string; reason: string }[];
  layers: string[];
  bytes: number;
  gone: boolean;
  left: string[];
  problem: string | null;
}

const LAYER_ID = /^[a-z0-9]{8,24}$/;

function layersOnDisk(sb: Sandbox): string[] {
  const dir = `${sb.project}/.marsh/layers`;
  if (!exists(dir)) return [];
  return [...Deno.readDirSync(dir)].map((e) => e.name).filter((n) => LAYER_ID.test(n)).sort();
}

async function all(sb: Sandbox): Promise<Manifest[]> {
  const r = await sb.marsh(["splits", "--all", "--json"]);
  assert.equal(r.code, 0, show(r));
  return (JSON.parse(r.stdout) as { splits: Manifest[] }).splits;
}

async function gcAll(sb: Sandbox, ...args: string[]): Promise<{ code: number; body: GcAll }> {
  const r = await sb.marsh(["gc", "--all", "--json", ...args]);
  assert.equal(r.stderr, "", show(r));
  return { code: r.code, body: JSON.parse(r.stdout) };
}

/** `marsh split -n -b LABEL=SCRIPT` joined as `join ARGS -- true`; its id. */
async function splitJoined(sb: Sandbox, script: string, keep: boolean, cwd?: string) {
  const r = await sb.marsh(["split", "-n", "-b", `a=${script}`], { cwd });
  assert.equal(r.code, 0, show(r));
  const join = await sb.marsh(["join", ...(keep ? ["--keep"] : []), "--", "true"], {
    stdin: r.stdout,
    cwd,
  });
  assert.equal(join.code, 0, show(join));
  return handleId(r.stdout);
}

Deno.test({
  name:
    "marsh gc --all: refused while a split runs or awaits; then removes every split, layer and head, and .marsh; the project, another project and a later split are fine",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create({ env: ENV, files: { "a.txt": "1\n", "d/b.txt": "b\n" } });
  const other = `${sb.base}/other`;
  Deno.mkdirSync(other);
  const init = await sb.bash(
    "git init -q -b main && echo o > o.txt && git add -A && git commit -q -m o",
    { cwd: other },
  );
  assert.equal(init.code, 0, show(init));
  const theirs = await splitJoined(sb, "echo t > t.txt", true, other);
  // Two snapshots with changes: two layers, the chain head on the second.
  const kept = await splitJoined(sb, "echo k > k.txt", true);
  Deno.writeTextFileSync(`${sb.project}/a.txt`, "1\n2\n");
  const joined = await splitJoined(sb, "echo j > j.txt", false);
  assert.equal(layersOnDisk(sb).length, 2);
  assert.ok(exists(`${sb.project}/.marsh/layers/tracked.head`));
  const awaiting = await sb.marsh(["split", "-n", "-b", "w=true"]);
  assert.equal(awaiting.code, 0, show(awaiting));
  const awaitingId = handleId(awaiting.stdout);
  const gate = `${sb.scratch}/gate`;
  const creator = sb.spawnMarsh([
    "split",
    "-n",
    "-b",
    `g=until [ -e '${gate}' ]; do sleep 0.05; done`,
  ]);
  const running = await waitFor("the gated split to run", async () => {
    const s = (await all(sb)).find((m) => m.state === "run" && m.branches[0]?.state === "running");
    return s?.id;
  });
  const project = fingerprint(sb.project, { skip: (rel) => rel === ".marsh" });
  const store = fingerprint(`${sb.project}/.marsh`, { skip: (rel) => rel.startsWith("split/") });
  const before = (await all(sb)).map((m) => m.id).sort();
  try {
    const refused = await sb.marsh(["gc", "--all"]);
    assert.equal(refused.code, 2, show(refused));
    assert.equal(
      refused.stderr,
      `marsh gc: --all refused: split ${running} is running (cancel it with: marsh splits cancel ${running}); split ${awaitingId} is awaiting its join (join it, or wait until it is kept); nothing was removed\n`,
    );
    assert.equal(refused.stdout, "");
    assert.deepEqual((await all(sb)).map((m) => m.id).sort(), before);
    assert.deepEqual(
      fingerprintDiff(
        store,
        fingerprint(`${sb.project}/.marsh`, { skip: (rel) => rel.startsWith("split/") }),
      ),
      [],
    );
  } finally {
    Deno.writeTextFileSync(gate, "");
  }
  assert.equal((await finish(creator, "the gated split")).code, 0);
  // The gated split now awaits its join too; both are joined and kept.
  for (const out of [awaiting.stdout, `{"marsh_split":1,"id":"${running}"}\n`]) {
    const keep = await sb.marsh(["join", "--keep", "--", "true"], { stdin: out });
    assert.equal(keep.code, 0, show(keep));
  }
  const mine = [kept, joined, awaitingId, running].sort();

  const dry = await gcAll(sb, "--dry-run");
  assert.equal(dry.code, 0);
  assert.equal(dry.body.root, sb.project);
  assert.equal(dry.body.dry_run, true);
  assert.deepEqual(dry.body.splits.map((s) => s.id).sort(), mine);
  assert.deepEqual(dry.body.layers, layersOnDisk(sb));
  assert.ok(dry.body.bytes > 0);
  assert.equal(dry.body.gone, true);
  assert.deepEqual((await all(sb)).map((m) => m.id).sort(), before, "a dry run removes nothing");
  assert.equal(layersOnDisk(sb).length, 2);

  const text = await sb.marsh(["gc", "--all"]);
  assert.equal(text.code, 0, show(text));
  const lines = text.stdout.trim().split("\n");
  assert.deepEqual(lines.slice(0, -1).sort(), mine.map((id) => `split ${id} removed`).sort());
  assert.match(
    lines.at(-1)!,
    new RegExp(
      `^removed 4 splits and 2 snapshot layers \\([0-9.]+ [KMG]?i?B\\); ${sb.project}/\\.marsh is gone$`,
    ),
  );
  assert.ok(!exists(`${sb.project}/.marsh`), ".marsh is gone");
  assert.deepEqual((await all(sb)).map((m) => m.id), [theirs], "another project's split stays");
  assert.deepEqual(
    fingerprintDiff(project, fingerprint(sb.project, { skip: (rel) => rel === ".marsh" })),
    [],
  );
  // Only the test's own edit: nothing of marsh's is left for Git to see.
  assert.equal(await sb.git("status", "--porcelain", "--ignored"), " M a.txt\n");

  // A later split snapshots again from nothing, and its patch applies.
  const again = await sb.marsh(["split", "-n", "-b", "n=echo n >> a.txt"]);
  assert.equal(again.code, 0, show(again));
  const apply = await sb.marsh(
    ["join", "--", "sh", "-c", 'cat >/dev/null; git apply "$SPLIT_DIR/n/diff.patch"'],
    { stdin: again.stdout },
  );
  assert.equal(apply.code, 0, show(apply));
  assert.equal(Deno.readTextFileSync(`${sb.project}/a.txt`), "1\n2\nn\n");
  assert.equal(layersOnDisk(sb).length, 1);
  // With nothing to remove but the store, and then with nothing at all.
  const second = await gcAll(sb);
  assert.equal(second.code, 0);
  assert.deepEqual(second.body.splits.map((s) => s.message), [
    `split ${handleId(again.stdout)} removed`,
  ]);
  assert.equal(second.body.layers.length, 1);
  assert.ok(!exists(`${sb.project}/.marsh`));
  const third = await gcAll(sb);
  assert.equal(third.code, 0);
  assert.deepEqual(third.body, {
    root: sb.project,
    dry_run: false,
    splits: [],
    failed: [],
    layers: [],
    bytes: 0,
    gone: true,
    left: [],
    problem: null,
  });
});

Deno.test({
  name:
    "marsh gc --all keeps what marsh did not make: a foreign file keeps .marsh, an unknown split dir refuses the store",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create();
  await splitJoined(sb, "echo k > k.txt", true);
  Deno.writeTextFileSync(`${sb.project}/.marsh/notes.txt`, "mine\n");
  // A directory in split/ that no journaled split owns (a replaced split's leftovers, say).
  const stray = `${sb.project}/.marsh/split/zz0stray`;
  Deno.mkdirSync(`${stray}/a`, { recursive: true });
  Deno.writeTextFileSync(`${stray}/a/work.txt`, "work\n");
  const layers = layersOnDisk(sb);
  assert.equal(layers.length, 1);

  const refused = await sb.marsh(["gc", "--all"]);
  assert.equal(refused.code, 2, show(refused));
  assert.match(
    refused.stdout,
    /^split [a-z0-9]+ removed\nremoved 1 split and 0 snapshot layers \(0 B\)\n$/,
  );
  assert.equal(
    refused.stderr,
    `marsh gc: ${stray} is not a split this daemon knows (a split whose directory was replaced leaves one): nothing else was removed; look at it, remove it yourself (unmount what is mounted there first), then run marsh gc --all again\n`,
  );
  assert.deepEqual(layersOnDisk(sb), layers, "the store stays");
  assert.equal(Deno.readTextFileSync(`${stray}/a/work.txt`), "work\n");

  Deno.removeSync(stray, { recursive: true });
  const r = await sb.marsh(["gc", "--all"]);
  assert.equal(r.code, 0, show(r));
  assert.equal(
    r.stdout,
    `removed 0 splits and 1 snapshot layer (${
      r.stdout.match(/\(([^)]+)\)/)![1]
    })\nleft ${sb.project}/.marsh: it holds notes.txt, which marsh did not make\n`,
  );
  assert.deepEqual([...Deno.readDirSync(`${sb.project}/.marsh`)].map((e) => e.name), ["notes.txt"]);
  assert.equal(Deno.readTextFileSync(`${sb.project}/.marsh/notes.txt`), "mine\n");
  // Once it is gone, a split makes .marsh again.
  Deno.removeSync(`${sb.project}/.marsh`, { recursive: true });
  await splitJoined(sb, "echo z > z.txt", false);
  assert.ok(exists(`${sb.project}/.marsh/layers`));
});

Deno.test({
  name:
    "marsh gc --all with a checkpoint session open: refused on stderr alone, nothing removed; after session rm it removes all",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create();
  const started = await sb.marsh(["session", "start", "keep"]);
  assert.equal(started.code, 0, show(started));
  const layers = layersOnDisk(sb);
  assert.ok(layers.length > 0, "the session's snapshot is a layer");

  const refused = await sb.marsh(["gc", "--all"]);
  assert.equal(refused.code, 2, show(refused));
  assert.equal(refused.stdout, "", 'no "removed 0 …" line when nothing was removed');
  assert.match(
    refused.stderr,
    /^marsh gc: checkpoint sessions? keep (is|are) still in .*: nothing was removed; remove (it|them) \(marsh session rm NAME\), then run marsh gc --all again\n$/,
  );
  assert.deepEqual(layersOnDisk(sb), layers, "the store stays");

  const rm = await sb.marsh(["session", "rm", "keep"]);
  assert.equal(rm.code, 0, show(rm));
  const r = await sb.marsh(["gc", "--all"]);
  assert.equal(r.code, 0, show(r));
  assert.match(
    r.stdout,
    /^removed 0 splits and \d+ snapshot layers? \([^)]+\); .*\.marsh is gone\n$/,
  );
  assert.ok(!exists(`${sb.project}/.marsh`));
});
