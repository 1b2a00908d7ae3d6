/**
 * Acceptance for `marsh gc`: the real `./marsh` CLI and daemon in temp dirs,
 * with overlay forks over layered snapshots (the daemon's default here).
 *
 * A layer is kept while a split dir on disk names it (kept splits included)
 * or a chain head stacks it: each snapshot with changes stacks one layer on
 * the head, so layers become collectable only when a chain rebases (at 32
 * layers deep) or when a split that alone named a rebased-away layer goes.
 */

import assert from "node:assert/strict";
import { exists, handleId, PERMISSIONS, Sandbox, show } from "./_acceptance.ts";

/** `marsh gc --json`'s reply. */
interface Collected {
  readonly root: string;
  readonly dry_run: boolean;
  readonly removed: string[];
  readonly bytes: number;
  readonly kept: number;
}

const LAYER_ID = /^[a-z0-9]{8,24}$/;

/** The layer ids in the project's store, sorted. */
function layersOnDisk(sb: Sandbox): string[] {
  const dir = `${sb.project}/.marsh/layers`;
  if (!exists(dir)) return [];
  return [...Deno.readDirSync(dir)].map((e) => e.name).filter((n) => LAYER_ID.test(n)).sort();
}

async function gcJson(sb: Sandbox, dryRun: boolean, cwd?: string): Promise<Collected> {
  const r = await sb.marsh(["gc", ...(dryRun ? ["--dry-run"] : []), "--json"], { cwd });
  assert.equal(r.code, 0, show(r));
  assert.equal(r.stderr, "");
  const reply = JSON.parse(r.stdout) as Collected;
  assert.deepEqual(Object.keys(reply), ["root", "dry_run", "removed", "bytes", "kept"]);
  assert.equal(reply.root, sb.project);
  assert.equal(reply.dry_run, dryRun);
  return reply;
}

/** `marsh split -n ARGS`, leaving the split awaiting its join; returns its id. */
async function split(sb: Sandbox, ...args: string[]): Promise<string> {
  const r = await sb.marsh(["split", "-n", ...args]);
  assert.equal(r.code, 0, show(r));
  return handleId(r.stdout);
}

/** `marsh join -- sh -c 'git apply $SPLIT_DIR/<label>/diff.patch'`: the split goes when it applies. */
async function joinApplying(sb: Sandbox, id: string, label: string): Promise<void> {
  const r = await sb.marsh(
    ["join", "--", "sh", "-c", `cat >/dev/null; git apply "$SPLIT_DIR/${label}/diff.patch"`],
    { stdin: `{"marsh_split":1,"id":"${id}"}\n` },
  );
  assert.equal(r.code, 0, show(r));
  assert.equal((await sb.split(id))?.state, "joined");
}

Deno.test({
  name:
    "marsh gc with two layers: nothing goes while a split or the chain head stacks them; --dry-run and --json report it, and a later split still applies",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create({ files: { "a.txt": "1\n2\n3\n" } });
  const first = await split(sb, "-b", "a=echo first > first.txt");
  Deno.writeTextFileSync(`${sb.project}/a.txt`, "1\n2\n3\n4\n");
  const second = await split(sb, "-b", "b=echo second > second.txt");
  const layers = layersOnDisk(sb);
  assert.equal(layers.length, 2, `one layer per snapshot with changes: ${layers}`);

  const dry = await gcJson(sb, true);
  assert.deepEqual(dry.removed, []);
  assert.equal(dry.bytes, 0);
  assert.equal(dry.kept, 2);
  const text = await sb.marsh(["gc", "--dry-run"]);
  assert.equal(text.code, 0, show(text));
  assert.equal(text.stdout, "would remove 0 snapshot layers (0 B); 2 in use\n");

  // The first split's layer is the bottom of the chain head's stack: still needed.
  const rm = await sb.marsh(["splits", "rm", first]);
  assert.equal(rm.code, 0, show(rm));
  const after = await sb.marsh(["gc"]);
  assert.equal(after.code, 0, show(after));
  assert.equal(after.stdout, "removed 0 snapshot layers, freed 0 B; 2 in use\n");
  assert.deepEqual(layersOnDisk(sb), layers);

  await joinApplying(sb, second, "b");
  Deno.writeTextFileSync(`${sb.project}/a.txt`, "1\n2\n3\n4\n5\n");
  const third = await split(sb, "-b", "c=sed -i s/^5$/five/ a.txt");
  assert.equal((await gcJson(sb, false)).removed.length, 0);
  await joinApplying(sb, third, "c");
  assert.equal(Deno.readTextFileSync(`${sb.project}/a.txt`), "1\n2\n3\n4\nfive\n");
  assert.equal(Deno.readTextFileSync(`${sb.project}/second.txt`), "second\n");
});

Deno.test({
  name:
    "marsh gc removes the layers a rebase left behind but never a kept split's, reports their bytes, and a later split still applies",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create({ files: { "a.txt": "a\n", "n.txt": "0\n" } });
  // The second snapshot is a kept split's (its branch failed): it names layers 1 and 2.
  const r = await sb.bash(String.raw`
set -e
echo 1 > n.txt; "$M" split -n -b a=true | "$M" join >/dev/null
echo 2 > n.txt
"$M" split -n -b k='echo kept > kept.txt; exit 3' | "$M" join >/dev/null 2>&1 || true
`);
  assert.equal(r.code, 0, show(r));
  const kept = (await sb.splits()).find((s) => s.state === "kept");
  assert.ok(kept, "the split with a failed branch is kept");
  assert.equal(kept.branches[0]?.status, "exited 3");
  const keptLayers = layersOnDisk(sb);
  assert.equal(keptLayers.length, 2);

  // 31 more snapshots with changes: layers 3..32, then a rebase onto a new full layer.
  const more = await sb.bash(
    String.raw`
set -e -o pipefail
for i in $(seq 3 33); do
  echo "$i" > n.txt
  "$M" split -n -b a=true | "$M" join >/dev/null
done
`,
    { timeoutMs: 120_000 },
  );
  assert.equal(more.code, 0, show(more));
  const all = layersOnDisk(sb);
  assert.equal(all.length, 33, `${all.length} layers`);

  const dry = await gcJson(sb, true);
  assert.equal(dry.removed.length, 30, `removed ${dry.removed}`);
  assert.equal(dry.kept, 3, "the kept split's two layers and the rebased head");
  // Layers 3..32 each hold n.txt only: "3\n" to "9\n" and "10\n" to "32\n".
  assert.equal(dry.bytes, 7 * 2 + 23 * 3);
  for (const id of keptLayers) assert.ok(!dry.removed.includes(id), `kept split's layer ${id}`);
  assert.deepEqual(layersOnDisk(sb), all, "a dry run removes nothing");
  const text = await sb.marsh(["gc", "--dry-run"]);
  assert.equal(text.code, 0, show(text));
  assert.equal(text.stdout, "would remove 30 snapshot layers (83 B); 3 in use\n");

  // From a subdirectory too: the project is found upward, as split finds it.
  Deno.mkdirSync(`${sb.project}/sub`);
  const done = await gcJson(sb, false, `${sb.project}/sub`);
  assert.deepEqual(done.removed, dry.removed);
  assert.equal(done.bytes, dry.bytes);
  assert.equal(done.kept, 3);
  const left = layersOnDisk(sb);
  assert.equal(left.length, 3);
  for (const id of keptLayers) assert.ok(left.includes(id), `kept split's layer ${id} survives`);
  assert.equal((await gcJson(sb, false)).removed.length, 0, "a second gc finds nothing");

  // The rebased head still serves new splits; the kept split still joins.
  const later = await split(sb, "-b", "c=echo later >> a.txt");
  await joinApplying(sb, later, "c");
  assert.equal(Deno.readTextFileSync(`${sb.project}/a.txt`), "a\nlater\n");
  await joinApplying(sb, kept.id, "k");
  assert.equal(Deno.readTextFileSync(`${sb.project}/kept.txt`), "kept\n");

  // With the kept split gone only the head's stack is needed: the rebased
  // layer and the one the later split stacked on it (sub/ was new).
  const last = await sb.marsh(["gc"]);
  assert.equal(last.code, 0, show(last));
  assert.equal(last.stdout, "removed 2 snapshot layers, freed 6 B; 2 in use\n");
  assert.equal(layersOnDisk(sb).length, 2);
  for (const id of keptLayers) assert.ok(!exists(`${sb.project}/.marsh/layers/${id}`), id);
});

Deno.test({
  name: "marsh gc in a directory with no marsh state fails with status 2 and says why",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create();
  for (const args of [["gc"], ["gc", "--dry-run", "--json"]]) {
    const r = await sb.marsh(args, { cwd: sb.scratch });
    assert.equal(r.code, 2, show(r));
    assert.equal(r.stdout, "");
    assert.equal(
      r.stderr,
      `marsh gc: no marsh project at ${sb.scratch}: it has no .marsh directory; run marsh gc in a project where marsh split ran\n`,
    );
    assert.ok(!exists(`${sb.scratch}/.marsh`), "gc made no state there");
  }
});
