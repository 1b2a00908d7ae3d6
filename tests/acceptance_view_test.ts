/**
 * Issue 10 §2, §3 through the real CLI and a root daemon: a shell branch
 * sees its fork at the project's own path. What it writes through an
 * absolute path, `../../..`, a venv-style shebang, an absolute symlink, or
 * straight at the layer store lands in its fork (and its patch) or nowhere;
 * the project, the layers, other forks, `out/` and the journal are unchanged.
 * Git works there as in the project. The manifest and `marsh status` say
 * which view the branches got.
 */

import assert from "node:assert/strict";
import { fingerprint, fingerprintDiff } from "../splitfs/_testing.ts";
import { PERMISSIONS, Sandbox, show } from "./_acceptance.ts";

/** A venv's interpreter that writes next to itself, and a tool whose shebang names it absolutely. */
function venv(root: string): Record<string, string> {
  return {
    ".venv/bin/python3": '#!/bin/sh\necho "pip by $0" >> "$(dirname "$0")/installed.txt"\n',
    ".venv/bin/pip": `#!${root}/.venv/bin/python3\n`,
  };
}

Deno.test({
  name:
    "a shell branch's absolute paths, ../../.., venv shebang and symlinks reach its fork only; the project and layers are unchanged",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create({ files: { "a.txt": "a\n", "b.txt": "b\n" } });
  const root = sb.project;
  for (const [rel, text] of Object.entries(venv(root))) {
    Deno.mkdirSync(`${root}/.venv/bin`, { recursive: true });
    Deno.writeTextFileSync(`${root}/${rel}`, text, { mode: 0o755 });
  }
  Deno.symlinkSync(`${root}/b.txt`, `${root}/link`);
  await sb.git("add", "-A");
  await sb.git("commit", "-qm", "venv");
  // A first split leaves its layers behind: the second one's branch goes for them.
  const first = await sb.marsh(["split", "-n", "-b", "x=true"]);
  assert.equal(first.code, 0, show(first));
  assert.equal((await sb.marsh(["join"], { stdin: first.stdout })).code, 0);
  const project = fingerprint(root, { skip: (rel) => rel === ".marsh" });
  const layers = fingerprint(`${root}/.marsh/layers`);
  assert.ok(layers.size > 0, "the first split made layers");
  const home = fingerprint(sb.home, {
    skip: (rel) => /^(marshd\.log|journal\.db.*|attempts|spool|b)(\/|$)/.test(rel),
  });

  const attack = [
    `echo abs >> ${root}/a.txt`,
    // The fork's old place was <root>/.marsh/split/<id>/<label>: from there, the project.
    "test -e ../../../../a.txt && echo up >> ../../../../a.txt",
    `${root}/.venv/bin/pip`,
    "echo via-link >> link",
    `for f in ${root}/.marsh/layers/*/data/a.txt ../../../layers/*/data/a.txt; do ` +
    `echo BACKDOOR >> "$f" 2>/dev/null && echo "wrote $f"; done`,
    `for f in ${root}/.marsh/split/*/quiet/a.txt; do echo x >> "$f" 2>/dev/null && echo "wrote $f"; done`,
    `for d in ${root}/.marsh/split/*/out; do touch "$d/x" 2>/dev/null && echo "wrote $d"; done`,
    `touch ${sb.home}/x 2>/dev/null && echo "wrote the control dir"`,
    `echo x >> ${sb.home}/journal.db 2>/dev/null && echo "wrote the journal"`,
    `umount -l ${root} 2>/dev/null && echo "unmounted the fork"`,
    `echo "pwd=$PWD"`,
  ].join("\n");
  const r = await sb.bash(
    `"$M" split -b attack="$ATTACK" -b quiet='sleep 1' -b git="$GIT" -b branch="$BRANCH" ` +
      `| "$M" join --keep -- true`,
    {
      env: {
        ATTACK: attack,
        GIT: [
          "git status --porcelain",
          "echo g > g.txt && git add g.txt && git commit -qm in-branch && git log --format=%s -1",
        ].join("\n"),
        // Whether capture accepts a moved HEAD is the admin rules' business; the command works.
        BRANCH: "git checkout -q -b feature && git symbolic-ref HEAD",
      },
    },
  );
  const [m] = (await sb.splits()).filter((s) => s.state === "kept");
  assert.ok(m, show(r));
  assert.deepEqual(
    m.branches.filter((b) => b.label !== "branch").map((b) => [b.label, b.status]),
    [["attack", "exited 0"], ["quiet", "exited 0"], ["git", "exited 0"]],
    show(r),
  );

  // Nothing outside the forks changed: the project, the layers, the control dir. Join adds
  // the blobs the patches name to .git/objects (docs/guide.md, "Applying a branch's patch"):
  // new objects only, nothing there changed.
  assert.deepEqual(
    fingerprintDiff(project, fingerprint(root, { skip: (rel) => rel === ".marsh" }))
      .filter((d) => !d.startsWith("+ .git/objects/")),
    [],
  );
  assert.deepEqual(fingerprintDiff(layers, fingerprint(`${root}/.marsh/layers`)), []);
  assert.deepEqual(
    fingerprintDiff(
      home,
      fingerprint(sb.home, {
        skip: (rel) => /^(marshd\.log|journal\.db.*|attempts|spool|b)(\/|$)/.test(rel),
      }),
    ),
    [],
  );
  assert.equal(Deno.readTextFileSync(`${m.dir}/quiet/a.txt`), "a\n");
  // No change: the .marsh mount point the view made in its fork adds nothing.
  assert.equal(Deno.readTextFileSync(`${m.out}/quiet/files`), "");
  assert.deepEqual([...Deno.readDirSync(`${m.out}/quiet`)].map((e) => e.name).sort(), [
    "files",
    "status",
    "stderr",
    "stdout",
  ]);

  // The branch saw its fork at the project's path and wrote only there.
  const out = (label: string, file: string) => Deno.readTextFileSync(`${m.out}/${label}/${file}`);
  assert.equal(out("attack", "stdout"), `pwd=${root}\n`, out("attack", "stderr"));
  const patch = out("attack", "diff.patch");
  assert.match(patch, /^\+abs$/m);
  assert.match(patch, /^\+via-link$/m);
  assert.match(patch, new RegExp(`^\\+pip by ${root}/\\.venv/bin/python3$`, "m"));
  assert.equal(out("attack", "files"), "A\t.venv/bin/installed.txt\nM\ta.txt\nM\tb.txt\n");
  // Git works there as in the project.
  assert.equal(out("git", "stdout"), "in-branch\n", out("git", "stderr"));
  assert.match(out("git", "diff.patch"), /^\+\+\+ b\/g\.txt$/m);
  assert.equal(out("branch", "stdout"), "refs/heads/feature\n", out("branch", "stderr"));

  // The manifest and status say which view the branches got, and why.
  for (const b of m.branches) {
    assert.equal(b.view, "project", b.label);
    assert.match(
      b.view_reason ?? "",
      /^root: each shell branch sees its fork at the project's path/,
    );
  }
  const status = await sb.marsh(["status", "--json"]);
  assert.equal(status.code, 0, show(status));
  assert.equal(JSON.parse(status.stdout).view.view, "project");
  const text = await sb.marsh(["status"]);
  assert.match(text.stdout, /^shell branches: project view \(root: /m);
  assert.equal((await sb.marsh(["splits", "rm", m.id])).code, 0);
});

Deno.test({
  name:
    "a shell branch in a subdirectory starts there, at the project's path; the view has no .marsh state",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create({ files: { "sub/deep/c.txt": "c\n", "a.txt": "a\n" } });
  const r = await sb.bash(
    `cd sub/deep && "$M" split -b s='pwd; ls -A ${sb.project}/.marsh | tr "\\n" " "; echo; ls ../../.marsh/split | wc -l; echo more >> ../../a.txt' | "$M" join --keep -- true`,
  );
  assert.equal(r.code, 0, show(r));
  const [m] = await sb.splits();
  assert.ok(m);
  assert.equal(
    Deno.readTextFileSync(`${m.out}/s/stdout`),
    `${sb.project}/sub/deep\n.gitignore git-objects split \n1\n`,
  );
  assert.match(Deno.readTextFileSync(`${m.out}/s/diff.patch`), /^\+more$/m);
  assert.equal(Deno.readTextFileSync(`${sb.project}/a.txt`), "a\n");
  assert.equal((await sb.marsh(["splits", "rm", m.id])).code, 0);
});

Deno.test({
  name: "a root shell branch that writes its Git index in place leaves its siblings' Git alone",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create({ files: { "a.txt": "a\n" } });
  const done = `${sb.scratch}/written`;
  const r = await sb.bash(
    `"$M" split -b a="$A" -b b="$B" | "$M" join --keep -- true`,
    {
      env: {
        // In place: the same inode, truncated and rewritten (Git itself renames).
        A: `printf junk > "$(git rev-parse --git-dir)/index"; touch ${done}`,
        B: `while [ ! -e ${done} ]; do sleep 0.05; done; echo b >> a.txt; git status --porcelain`,
      },
    },
  );
  const [m] = await sb.splits();
  assert.ok(m, show(r));
  assert.equal(Deno.readTextFileSync(`${m.out}/b/stdout`), " M a.txt\n", show(r));
  assert.equal((await sb.marsh(["splits", "rm", m.id])).code, 0);
});
