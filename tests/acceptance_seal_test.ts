/**
 * Acceptance for the layer seal (issue 10 §2): a split's snapshot layers
 * are shared by the project's later splits, and what poisons one — an
 * append as root, a chmod, a new file, a rename over a file, an edit whose
 * mtime is put back — is found before the next `marsh split` stacks it:
 * that split's branch sees the real tree, its `root_id` is the real tree's
 * `git write-tree`, and the refusal is said and logged. The real `./marsh`
 * CLI and daemon in temp dirs, overlay forks (the tests run as root).
 */

import assert from "node:assert/strict";
import { mountsBelow } from "../splitfs/_testing.ts";
import { exists, handleId, PERMISSIONS, type Result, Sandbox, show } from "./_acceptance.ts";

/** What the branch prints of its tree: contents, modes and names. */
const LOOK = "sha1sum a.txt sub/*; stat -c '%a %s %n' a.txt sub/*; ls -A sub";

/** Each poisons `data/` of the project's current head layer. */
const TAMPERS: readonly {
  readonly name: string;
  readonly script: string;
  readonly says: RegExp;
}[] = [
  {
    name: "append as root to a read-only file",
    script: 'chmod 444 "$D/a.txt"; echo BACKDOOR >> "$D/a.txt"',
    says: /a\.txt: mode 0644 → 0444, size 6 → 15, mtime and ctime changed/,
  },
  { name: "chmod", script: 'chmod 755 "$D/sub/b.sh"', says: /sub\/b\.sh: mode 0644 → 0755/ },
  {
    name: "add a file",
    script: 'echo BACKDOOR > "$D/sub/evil.txt"',
    says: /sub\/evil\.txt: added/,
  },
  {
    name: "replace a file by rename",
    script: 'echo BACKDOOR > "$D/.x" && mv -f "$D/.x" "$D/a.txt"',
    says: /a\.txt: replaced by another inode/,
  },
  {
    name: "same-size edit with its mtime put back",
    script: 'touch -r "$D/a.txt" "$D/../../ref" && printf "BAD!!\\n" | dd of="$D/a.txt" ' +
      'conv=notrunc status=none && touch -r "$D/../../ref" "$D/a.txt" && rm "$D/../../ref"',
    says: /a\.txt: ctime changed; it was not used/,
  },
];

/** `marsh split -n -b look=LOOK` to its end, then joined; its manifest, stderr and stdout. */
async function look(sb: Sandbox): Promise<{ rootId: string; stderr: string; stdout: string }> {
  const r = await sb.marsh(["split", "-n", "-b", `look=${LOOK}`]);
  assert.equal(r.code, 0, show(r));
  const s = await sb.split(handleId(r.stdout));
  assert.ok(s, `no split ${r.stdout}`);
  assert.equal(s.branches[0]?.fork_strategy, "overlay");
  const stdout = Deno.readTextFileSync(`${s.out}/look/stdout`);
  const j: Result = await sb.marsh(["join"], { stdin: `{"marsh_split":1,"id":"${s.id}"}\n` });
  assert.equal(j.code, 0, show(j));
  assert.ok(!exists(s.dir), "the split's directory is removed");
  return { rootId: s.root_id ?? "", stderr: r.stderr, stdout };
}

/** The project's current head layer of the tracked chain. */
function headLayer(sb: Sandbox): string {
  return Deno.readTextFileSync(`${sb.project}/.marsh/layers/tracked.head`).trim();
}

Deno.test({
  name:
    "a poisoned snapshot layer (append as root, chmod, new file, rename over, mtime put back) is never a later split's base: the branch sees the real tree and root_id is git write-tree's",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create({
    files: { "a.txt": "clean\n", "sub/b.sh": "echo b\n" },
  });
  const real = await sb.bash(LOOK);
  assert.equal(real.code, 0, show(real));
  const tree = (await sb.git("write-tree")).trim();
  const first = await look(sb);
  assert.equal(first.stdout, real.stdout);
  assert.equal(first.rootId, tree);
  assert.doesNotMatch(first.stderr, /sealed/);
  const used: string[] = [];
  for (const t of TAMPERS) {
    const layer = headLayer(sb);
    used.push(layer);
    const D = `${sb.project}/.marsh/layers/${layer}/data`;
    const poison = await sb.bash(t.script, { env: { D } });
    assert.equal(poison.code, 0, `${t.name}: ${show(poison)}`);
    const next = await look(sb);
    assert.equal(next.stdout, real.stdout, `${t.name}: the branch sees the real tree`);
    assert.equal(next.rootId, tree, `${t.name}: root_id`);
    assert.match(next.stderr, new RegExp(`layer "${layer}" was changed after it was sealed: `));
    assert.match(next.stderr, t.says, `${t.name}: ${next.stderr}`);
    assert.match(next.stderr, /this split's base is a fresh copy of the tree/);
    assert.notEqual(headLayer(sb), layer, `${t.name}: the chain starts afresh`);
  }
  // Untouched, the fresh chain is reused as it is, with nothing said.
  const head = headLayer(sb);
  const quiet = await look(sb);
  assert.equal(quiet.stdout, real.stdout);
  assert.equal(headLayer(sb), head);
  assert.doesNotMatch(quiet.stderr, /sealed/);
  const log = Deno.readTextFileSync(`${sb.home}/marshd.log`);
  for (const layer of used) {
    assert.match(log, new RegExp(`layer "${layer}" was changed after it was sealed`));
  }
  assert.deepEqual(mountsBelow(sb.base), []);
});
