/**
 * Acceptance (issue 10 §4): what a shell branch's Git does in its fork. Git
 * at work — a new branch, identity config, gc and repack — is captured like
 * any other change; Git metadata a host Git would obey (fsmonitor,
 * hooksPath, an include, commondir, a nested repository) rejects the branch,
 * yet its fork, its split and its patch (untrusted) are kept, and a host
 * `git status` in the kept fork runs nothing.
 */

import assert from "node:assert/strict";
import { exists, PERMISSIONS, Sandbox, show } from "./_acceptance.ts";

Deno.test({
  name:
    "shell branches doing git checkout -b, switch -c, config user.name, gc and repack -ad are captured, and their patches apply",
  permissions: PERMISSIONS,
}, async () => {
  const files = Object.fromEntries(
    ["co", "sw", "id", "gc", "rp"].map((l) => [`${l}.txt`, `${l}\n`]),
  );
  await using sb = await Sandbox.create({ files });
  const r = await sb.bash(String.raw`
set -o pipefail
"$M" split -n \
  -b co='git checkout -q -b feature && echo more >> co.txt && git commit -qam co' \
  -b sw='git switch -q -c fix/two && echo more >> sw.txt && git commit -qam sw' \
  -b id='git config user.name bot && git config user.email bot@example.com && echo more >> id.txt && git commit -qam id' \
  -b gc='echo more >> gc.txt && git commit -qam gc && git gc -q' \
  -b rp='echo more >> rp.txt && git commit -qam rp && git repack -adq' |
  "$M" join -- sh -c '
    cat > "$HOME/rendering"
    for b in co sw id gc rp; do git apply "$SPLIT_DIR/$b/diff.patch" || exit 1; done'
`);
  assert.equal(r.code, 0, show(r));
  const [s] = await sb.splits();
  assert.ok(s);
  assert.deepEqual(
    s.branches.map((b) => [b.label, b.state, b.status, b.files, b.trust]),
    ["co", "sw", "id", "gc", "rp"].map((l) => [l, "captured", "exited 0", 1, undefined]),
  );
  for (const label of ["co", "sw", "id", "gc", "rp"]) {
    assert.equal(Deno.readTextFileSync(`${sb.project}/${label}.txt`), `${label}\nmore\n`);
  }
  assert.equal(s.state, "joined");
  assert.ok(!exists(s.dir), "every branch was trusted and CMD exited 0: the split is removed");
});

Deno.test({
  name:
    "shell branches writing core.fsmonitor, core.hooksPath, include.path, commondir or a nested repository are rejected; fork, split and untrusted patch are kept; host git runs nothing",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create();
  const marker = `${sb.scratch}/marker`;
  const prog = `${sb.scratch}/prog.sh`;
  Deno.writeTextFileSync(prog, `#!/bin/sh\necho "$0 $*" >> '${marker}'\nexit 1\n`, { mode: 0o755 });
  const hooks = `${sb.scratch}/hooks`;
  Deno.mkdirSync(hooks);
  for (const name of ["post-index-change", "post-checkout", "pre-commit"]) {
    Deno.copyFileSync(prog, `${hooks}/${name}`);
  }
  Deno.writeTextFileSync(`${sb.scratch}/included`, `[core]\n\tfsmonitor = ${prog}\n`);
  const env = { PROG: prog, HOOKS: hooks, INC: `${sb.scratch}/included` };
  const r = await sb.bash(
    String.raw`
set -o pipefail
"$M" split -n \
  -b fsm='echo fsm >> a.txt && git config core.fsmonitor "$PROG"' \
  -b hooks='echo hooks >> a.txt && git config core.hooksPath "$HOOKS"' \
  -b inc='echo inc >> a.txt && git config include.path "$INC"' \
  -b cd='echo cd >> a.txt && echo "$PWD/../../../../.git" > "$(git rev-parse --git-dir)/commondir"' \
  -b nest='echo nest >> a.txt && git init -q sub && git -C sub commit -q --allow-empty -m s && git add sub && git -C sub config core.fsmonitor "$PROG"' \
  -b ok='echo ok > ok.txt' |
  "$M" join -- sh -c 'cat > "$HOME/rendering"; exit 0'
`,
    { env },
  );
  // The consumer exited 0; split's status is the first rejected branch's: 125.
  assert.equal(r.code, 125, show(r));
  const [s] = await sb.splits();
  assert.ok(s);
  assert.equal(s.state, "kept", "a rejected branch's work keeps the split");
  const branch = (label: string) => s.branches.find((b) => b.label === label)!;
  const reasons: Record<string, string> = {
    fsm: "admin file changed: config (core.fsmonitor)",
    hooks: "admin file changed: config (core.hookspath)",
    inc: "admin file changed: config (include.path)",
    cd: "admin dir has an unexpected entry: commondir",
    nest: "nested .git at sub/.git",
  };
  for (const [label, why] of Object.entries(reasons)) {
    const b = branch(label);
    assert.equal(b.state, "rejected", label);
    assert.equal(b.status, `rejected: ${why}`, label);
    assert.equal(b.code, 125, label);
    assert.equal(b.trust, "untrusted", label);
    assert.ok(exists(`${b.fork}/a.txt`), `${label}: its fork is kept`);
    assert.equal(Deno.readTextFileSync(`${b.fork}/a.txt`), `hello\n${label}\n`);
    assert.equal(
      Deno.readTextFileSync(`${s.out}/${label}/status`),
      `rejected: ${why}\n`,
      label,
    );
  }
  // The join said which branch and how to get its work back.
  assert.match(
    r.stderr,
    new RegExp(
      `split ${s.id} kept: branch fsm rejected: admin file changed: config \\(core\\.fsmonitor\\); its work is kept in ${
        branch("fsm").fork
      } \\(see git -C ${
        branch("fsm").fork
      } status\\) and its untrusted patch in ${s.out}/fsm/diff\\.patch; remove it with: marsh splits rm ${s.id}`,
    ),
  );
  assert.match(s.reason ?? "", /^branch fsm rejected: /);
  // A patch is written for every rejected branch but the nested repository,
  // which a patch cannot carry; the rendering names it without showing it.
  const rendering = Deno.readTextFileSync(`${sb.scratch}/rendering`);
  for (const label of ["fsm", "hooks", "inc", "cd"]) {
    assert.equal(branch(label).files, 1, label);
    assert.equal(Deno.readTextFileSync(`${s.out}/${label}/files`), "M\ta.txt\n");
    assert.match(
      rendering,
      new RegExp(
        `^== ${label}: rejected: .*\\(1 file changed\\)\nuntrusted patch, not shown: \\$SPLIT_DIR/${label}/diff.patch\n\n`,
        "m",
      ),
    );
    const check = await sb.runGit(["apply", "--check", `${s.out}/${label}/diff.patch`]);
    assert.equal(check.code, 0, show(check));
  }
  assert.doesNotMatch(rendering, /^\+fsm$/m);
  assert.equal(branch("nest").files, 0);
  assert.ok(!exists(`${s.out}/nest/diff.patch`));
  const nested = [...Deno.readDirSync(`${branch("nest").fork}/sub`)].find((e) =>
    e.name.startsWith(".git.rejected-")
  );
  assert.ok(nested, "the nested repository is kept, set aside");
  assert.ok(exists(`${branch("nest").fork}/sub/${nested.name}/config`));
  assert.equal(branch("ok").status, "exited 0");

  // A host git (or an IDE) in each kept fork meets only marsh's metadata, in
  // the nested repository's directory too.
  for (const label of Object.keys(reasons)) {
    const st = await sb.runGit(["-C", branch(label).fork, "status", "--porcelain"]);
    assert.equal(st.code, 0, show(st));
    assert.match(st.stdout, /^ M a\.txt$/m, label);
  }
  const inSub = await sb.runGit(["-C", `${branch("nest").fork}/sub`, "status", "--porcelain"]);
  assert.equal(inSub.code, 0, show(inSub));
  assert.ok(!exists(marker), `something ran: ${exists(marker) && Deno.readTextFileSync(marker)}`);
  // The control: the marker mechanism works when Git is told to use the branch's config.
  const control = await sb.runGit([
    "-C",
    branch("fsm").fork,
    "-c",
    `core.fsmonitor=${prog}`,
    "status",
  ]);
  assert.equal(control.code, 0, show(control));
  assert.ok(exists(marker), "the marker mechanism works");

  // The branch's own Git metadata is set aside beside the fresh one, not deleted.
  assert.match(
    Deno.readTextFileSync(`${s.dir}/.admin/.rejected-fsm/config`),
    new RegExp(`fsmonitor = ${prog}`),
  );
  const rm = await sb.marsh(["splits", "rm", s.id]);
  assert.equal(rm.code, 0, show(rm));
  assert.ok(!exists(s.dir));
});

for (const forks of ["copy", "auto"] as const) {
  Deno.test({
    name:
      `a shell branch rejected for cloning a dependency with core.fsmonitor keeps its work, and git in that dependency runs nothing (forks: ${forks})`,
    permissions: PERMISSIONS,
  }, async () => {
    await using sb = await Sandbox.create({ env: { MARSH_FORKS: forks } });
    const marker = `${sb.scratch}/marker`;
    const prog = `${sb.scratch}/prog.sh`;
    Deno.writeTextFileSync(prog, `#!/bin/sh\necho "$0 $*" >> '${marker}'\nexit 1\n`, {
      mode: 0o755,
    });
    const upstream = `${sb.scratch}/upstream`;
    const made = await sb.bash(
      `git init -q -b main '${upstream}' && echo lib > '${upstream}/lib.txt' &&
       git -C '${upstream}' add -A && git -C '${upstream}' commit -qm lib`,
    );
    assert.equal(made.code, 0, show(made));
    // Two repositories: capture stops at the first, and each must be set aside.
    const r = await sb.bash(
      String.raw`
set -o pipefail
"$M" split -n -b dep='
  echo more >> a.txt &&
  git clone -q "$UPSTREAM" dep && git -C dep config core.fsmonitor "$PROG" &&
  echo work > dep/work.txt &&
  git init -q tools/gen && git -C tools/gen config core.fsmonitor "$PROG" && echo gen > tools/gen/gen.txt' |
  "$M" join -- sh -c 'cat > /dev/null'
`,
      { env: { UPSTREAM: upstream, PROG: prog } },
    );
    assert.equal(r.code, 125, show(r));
    const [s] = await sb.splits();
    assert.ok(s);
    const b = s.branches[0]!;
    assert.equal(b.status, "rejected: nested .git at dep/.git");
    assert.equal(s.state, "kept");
    const fork = b.fork!;
    // The work is all there.
    assert.equal(Deno.readTextFileSync(`${fork}/a.txt`), "hello\nmore\n");
    assert.equal(Deno.readTextFileSync(`${fork}/dep/work.txt`), "work\n");
    assert.equal(Deno.readTextFileSync(`${fork}/dep/lib.txt`), "lib\n");
    assert.equal(Deno.readTextFileSync(`${fork}/tools/gen/gen.txt`), "gen\n");
    // Git in each dependency finds the fork's own metadata (marsh's) and runs nothing.
    for (const dir of ["dep", "tools/gen", ""]) {
      const st = await sb.runGit(["-C", `${fork}/${dir}`, "status", "--porcelain"]);
      assert.equal(st.code, 0, show(st));
      assert.match(st.stdout, /^ M a\.txt$/m, dir);
    }
    assert.ok(!exists(marker), `something ran: ${exists(marker) && Deno.readTextFileSync(marker)}`);
    // Each repository is kept beside its files, renamed; the control: Git told to use it obeys its config.
    for (const dir of ["dep", "tools/gen"]) {
      const aside = [...Deno.readDirSync(`${fork}/${dir}`)].map((e) => e.name)
        .filter((n) => /^\.git\.rejected-[0-9a-f]{8}$/.test(n));
      assert.equal(aside.length, 1, dir);
      assert.ok(!exists(`${fork}/${dir}/.git`), dir);
      const control = await sb.runGit([
        `--git-dir=${fork}/${dir}/${aside[0]}`,
        `--work-tree=${fork}/${dir}`,
        "status",
      ]);
      assert.equal(control.code, 0, show(control));
    }
    assert.ok(exists(marker), "the marker mechanism works");
    const rm = await sb.marsh(["splits", "rm", s.id]);
    assert.equal(rm.code, 0, show(rm));
    assert.ok(!exists(s.dir));
  });
}
