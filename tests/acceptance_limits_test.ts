/**
 * Acceptance (docs/rules.md "Budgets and capabilities", issue 3 §4): every limit just under, at and
 * just over — branches per split, the branch pool, the spool and the captured
 * output — through the real CLI and daemon.
 */

import assert from "node:assert/strict";
import { exists, finish, handleId, PERMISSIONS, Sandbox, show, waitFor } from "./_acceptance.ts";
import type { Manifest } from "../protocol/manifest.ts";

const MiB = 1024 * 1024;

/** `-b b1=SCRIPT -b b2=SCRIPT ...` */
function branches(n: number, script: string): string[] {
  return Array.from({ length: n }, (_, i) => ["-b", `b${i + 1}=${script}`]).flat();
}

/** A branch script that waits until the test creates `gate`. */
function held(gate: string): string {
  return `while [ ! -e '${gate}' ]; do sleep 0.05; done`;
}

function statuses(s: Manifest): (string | undefined)[] {
  return s.branches.map((b) => b.status ?? b.state);
}

Deno.test({
  name: "branches per split: 17 is refused with status 2 and nothing created; 16 is accepted",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create();
  const over = await sb.marsh(["split", "-n", ...branches(17, "true")]);
  assert.equal(over.code, 2, show(over));
  assert.equal(over.stdout, "");
  assert.equal(over.stderr, "marsh split: too many branches: 17 (at most 16 per split)\n");
  assert.deepEqual(await sb.splits(), []);
  assert.ok(!exists(`${sb.project}/.marsh`));

  // Held open, 16 branches meet the pool of 8: the first 8 run, the rest fail visibly.
  const gate = `${sb.scratch}/go`;
  const creator = sb.spawnMarsh(["split", "-n", ...branches(16, held(gate))]);
  const s = await sb.runningSplit();
  assert.equal(s.branches.length, 16);
  assert.deepEqual(statuses(s), [
    ...Array(8).fill("running"),
    ...Array(8).fill("failed: capacity"),
  ]);
  Deno.writeTextFileSync(gate, "");
  const at = await finish(creator, "marsh split with 16 branches");
  assert.equal(at.code, 125, show(at));
  assert.equal(handleId(at.stdout), s.id);
  const join = await sb.marsh(["join"], { stdin: at.stdout });
  assert.equal(join.code, 0, show(join));
  assert.equal(join.stdout.match(/^== b\d+: exited 0 /gm)?.length, 8);
  assert.equal(join.stdout.match(/^== b\d+: failed: capacity /gm)?.length, 8);
});

Deno.test({
  name: "the branch pool: 8 run at once, a 9th fails with capacity (in any host split), join runs",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create();
  const gate = `${sb.scratch}/go`;
  const nine = sb.spawnMarsh(["split", "-n", ...branches(9, held(gate))]);
  const s = await sb.runningSplit();
  assert.deepEqual(statuses(s), [...Array(8).fill("running"), "failed: capacity"]);

  // Host splits share one pool: while those 8 run, another split gets no slot either.
  const other = await sb.bash(`"$M" split -n -b x='echo x > x.txt' | "$M" join`);
  assert.equal(other.code, 0, show(other));
  assert.match(other.stdout, /^== x: failed: capacity \(no changes\)$/m);

  Deno.writeTextFileSync(gate, "");
  const done = await finish(nine, "marsh split with 9 branches");
  assert.equal(done.code, 125, show(done));
  const join = await sb.marsh(["join", "--", "sh", "-c", 'cat; cat "$SPLIT_DIR/b9/status"'], {
    stdin: done.stdout,
  });
  assert.equal(join.code, 0, show(join));
  assert.equal(join.stdout.match(/^== b\d: exited 0 /gm)?.length, 8);
  assert.match(join.stdout, /^== b9: failed: capacity/m);
  assert.ok(join.stdout.endsWith("failed: capacity\n"));

  // Slots come back once the ends are confirmed.
  const after = await sb.marsh(["split", "-n", ...branches(8, "true")]);
  assert.equal(after.code, 0, show(after));
});

Deno.test({
  name: "the spool: exactly 64 MiB reaches every branch; 64 MiB + 1 cancels the split (130)",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create();
  const at = await sb.bash(`set -o pipefail
head -c ${64 * MiB} /dev/zero | "$M" split -b a='wc -c' -b b='wc -c' |
  "$M" join -- sh -c 'cat >/dev/null; cat "$SPLIT_DIR/a/stdout" "$SPLIT_DIR/b/stdout"'`);
  assert.equal(at.code, 0, show(at));
  assert.equal(at.stdout, `${64 * MiB}\n${64 * MiB}\n`);

  const over = await sb.bash(`head -c ${64 * MiB + 1} /dev/zero | "$M" split -b a='wc -c'`);
  assert.equal(over.code, 130, show(over));
  assert.match(over.stderr, /cancelled: spool limit of 64 MiB exceeded/);
  const id = handleId(over.stdout);
  const s = await sb.split(id);
  assert.equal(s?.state, "cancelled");
  assert.equal(s.reason, "spool limit of 64 MiB exceeded");
  assert.ok(s.branches.every((b) => b.status === "cancelled"), JSON.stringify(s.branches));
  assert.ok(!exists(s.dir), "nothing of it is left in the project");
  await waitFor(
    "the spool file to go",
    () => [...Deno.readDirSync(`${sb.home}/spool`)].length === 0,
  );
});

Deno.test({
  name: "captured output: 16 MiB is kept; 16 MiB + 1, by one branch or by the split, cancels (130)",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create();
  const at = await sb.bash(`"$M" split -n -b a='head -c ${16 * MiB} /dev/zero' |
    "$M" join -- sh -c 'cat >/dev/null; wc -c < "$SPLIT_DIR/a/stdout"'`);
  assert.equal(at.code, 0, show(at));
  assert.equal(at.stdout.trim(), String(16 * MiB));

  // The limit is the split's: two branches share it (docs/rules.md "Budgets and capabilities", no
  // per-branch quotas).
  const shared = await sb.bash(`"$M" split -n \
    -b a='head -c ${8 * MiB} /dev/zero' -b b='head -c ${8 * MiB} /dev/zero >&2' |
    "$M" join -- sh -c 'cat >/dev/null; cat "$SPLIT_DIR/a/stdout" "$SPLIT_DIR/b/stderr" | wc -c'`);
  assert.equal(shared.code, 0, show(shared));
  assert.equal(shared.stdout.trim(), String(16 * MiB));

  for (
    const args of [
      ["-b", `a=head -c ${16 * MiB + 1} /dev/zero`],
      ["-b", `a=head -c ${8 * MiB} /dev/zero`, "-b", `b=head -c ${8 * MiB + 1} /dev/zero`],
    ]
  ) {
    const over = await sb.marsh(["split", "-n", ...args]);
    assert.equal(over.code, 130, show(over));
    assert.match(over.stderr, /cancelled: captured output limit of 16 MiB exceeded/);
    const s = await sb.split(handleId(over.stdout));
    assert.equal(s?.state, "cancelled");
    assert.equal(s.reason, "captured output limit of 16 MiB exceeded");
    assert.ok(!exists(s.dir));
  }
  // Each branch's output is in its out/ (or gone with its split), not kept in the control dir.
  assert.deepEqual([...Deno.readDirSync(`${sb.home}/attempts`)], []);
});

Deno.test({
  name: "captured output is measured while branches run: two that together cross it are cancelled",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create();
  const gate = `${sb.scratch}/never`;
  const started = Date.now();
  const over = await sb.marsh([
    "split",
    "-n",
    ...branches(3, `head -c ${6 * MiB} /dev/zero; ${held(gate)}`),
  ]);
  assert.equal(over.code, 130, show(over));
  assert.match(over.stderr, /captured output limit of 16 MiB exceeded/);
  assert.ok(Date.now() - started < 30_000, "cancelled while the branches were still running");
  await waitFor("the split to be cancelled", async () => {
    const s = await sb.split(handleId(over.stdout));
    return s?.state === "cancelled" && !exists(s.dir);
  });
});
