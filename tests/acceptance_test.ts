/**
 * Acceptance (docs/rules.md "Acceptance", issue 3 §6): the real `./marsh` CLI and daemon
 * in temp dirs, driven the way a user's shell drives them. Restart, limits
 * and signals are in the other `acceptance_*_test.ts` files.
 */

import assert from "node:assert/strict";
import {
  exists,
  handleId,
  PERMISSIONS,
  Sandbox,
  show,
  uncommittedNine,
  waitFor,
} from "./_acceptance.ts";

Deno.test({
  name: "a plain-bash pipeline: three -b branches | join -- CMD applies one with git apply --3way",
  permissions: PERMISSIONS,
}, async () => {
  // An uncommitted edit goes into the snapshot, so the patch's preimage is in no commit.
  await using sb = await uncommittedNine();
  const r = await sb.bash(String.raw`
set -o pipefail
printf 'from the spool\n' |
  "$M" split -b edit="sed -i 's/^9\$/nine/' a.txt; cat > spool.txt" -b fail='exit 3' -b four='exit 4' |
  "$M" join -- sh -c '
    cat > "$HOME/rendering"
    # The host moved on after the snapshot: the hunk applies only as a 3-way merge.
    sed -i "s/^7\$/seven/" a.txt && git add -A
    # join wrote the patch blobs into the project first: the a.txt pre-image is there.
    pre=$(sed -n "s/^index \([0-9a-f]*\)[.][.].*/\1/p" "$SPLIT_DIR/edit/diff.patch" | head -n 1)
    git cat-file -e "$pre" || { echo "pre-image $pre is not in the project" >&2; exit 90; }
    GIT_ALTERNATE_OBJECT_DIRECTORIES="$SPLIT_OBJECTS" git apply --3way "$SPLIT_DIR/edit/diff.patch"'
`);
  // CMD exited 0, so pipefail gives split's status: the first nonzero branch in declaration order.
  assert.equal(r.code, 3, show(r));
  assert.equal(
    Deno.readTextFileSync(`${sb.project}/a.txt`),
    "one\n2\n3\n4\n5\n6\nseven\n8\nnine\n",
  );
  assert.equal(Deno.readTextFileSync(`${sb.project}/spool.txt`), "from the spool\n");
  const rendering = Deno.readTextFileSync(`${sb.scratch}/rendering`);
  assert.match(rendering, /^== edit: exited 0 \(2 files changed\)$/m);
  assert.match(rendering, /^== fail: exited 3/m);
  assert.match(rendering, /^== four: exited 4/m);
  const [s] = await sb.splits();
  assert.ok(s);
  assert.equal(s.state, "joined");
  assert.equal(s.status, 3);
  assert.deepEqual(s.branches.map((b) => b.status), ["exited 0", "exited 3", "exited 4"]);
  assert.ok(!exists(s.dir), "CMD exited 0: the split's directory is removed");
});

Deno.test({
  name: "the two-step handle: split </dev/null prints exactly one handle line; join <<<handle",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create();
  const split = await sb.marsh(["split", "-b", "a=echo two > two.txt", "-b", "b=true"]);
  assert.equal(split.code, 0, show(split));
  const id = handleId(split.stdout);
  assert.equal(split.stdout, `{"marsh_split":1,"id":"${id}"}\n`);
  assert.equal((await sb.split(id))?.state, "await");
  const join = await sb.bash(
    `"$M" join <<<"$H" -- sh -c 'cat >/dev/null; echo "$SPLIT_ID"; git apply "$SPLIT_DIR/a/diff.patch"'`,
    { env: { H: split.stdout.trim() } },
  );
  assert.equal(join.code, 0, show(join));
  assert.equal(join.stdout, `${id}\n`);
  assert.equal(Deno.readTextFileSync(`${sb.project}/two.txt`), "two\n");
  assert.equal((await sb.split(id))?.state, "joined");
});

Deno.test({
  name: "exit status: first nonzero branch in declaration order; with pipefail CMD's when nonzero",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create();
  const r = await sb.bash(`
"$M" split -n -b a=true -b b='exit 4' -b c='exit 3' >/dev/null; echo "split $?"
set -o pipefail
"$M" split -n -b a='exit 3' | "$M" join -- sh -c 'cat >/dev/null; exit 5'; echo "cmd $?"
"$M" split -n -b a='exit 3' | "$M" join -- sh -c 'cat >/dev/null; exit 0'; echo "split $?"
"$M" split -n -b a=true | "$M" join -- sh -c 'cat >/dev/null; exit 0'; echo "none $?"
`);
  assert.equal(r.code, 0, show(r));
  assert.equal(r.stdout, "split 4\ncmd 5\nsplit 3\nnone 0\n");
});

Deno.test({
  name: "join -- CMD after a failed branch: CMD sees the statuses; nonzero keeps, zero removes",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create();
  const split = await sb.marsh(["split", "-b", "ok=echo x > x.txt", "-b", "bad=exit 7"]);
  assert.equal(split.code, 7, show(split));
  const id = handleId(split.stdout);
  const consumer =
    `cat > "$HOME/seen"; cat "$SPLIT_DIR/bad/status" >> "$HOME/seen"; exit "$CMD_EXIT"`;

  const failed = await sb.marsh(["join", "--", "sh", "-c", consumer], {
    stdin: split.stdout,
    env: { CMD_EXIT: "9" },
  });
  assert.equal(failed.code, 9, show(failed));
  const seen = Deno.readTextFileSync(`${sb.scratch}/seen`);
  assert.match(seen, /^== ok: exited 0 \(1 files? changed\)$/m);
  assert.match(seen, /^== bad: exited 7/m);
  assert.ok(seen.endsWith("exited 7\n"), seen);
  assert.match(failed.stderr, new RegExp(`marsh splits rm ${id}`));
  const kept = await sb.split(id);
  assert.equal(kept?.state, "kept");
  assert.ok(exists(`${kept.dir}/out/ok/diff.patch`));

  const ok = await sb.marsh(["join", "--", "sh", "-c", consumer], {
    stdin: split.stdout,
    env: { CMD_EXIT: "0" },
  });
  assert.equal(ok.code, 0, show(ok));
  assert.equal((await sb.split(id))?.state, "joined");
  assert.ok(!exists(kept.dir));
});

Deno.test({
  name: "a kept split, joined after the lease, is still joinable by its creator",
  permissions: PERMISSIONS,
}, async () => {
  // The autostarted daemon inherits the CLI's environment, the lease setting included.
  await using sb = await Sandbox.create({ env: { MARSH_LEASE_MS: "1000" } });
  const split = await sb.marsh(["split", "-b", "a=echo late > l.txt"]);
  assert.equal(split.code, 0, show(split));
  const id = handleId(split.stdout);
  const kept = await waitFor("the lease to expire", async () => {
    const s = await sb.split(id);
    return s?.state === "kept" ? s : undefined;
  });
  assert.match(kept.reason ?? "", /not joined within 1 s/);
  const join = await sb.marsh(
    ["join", "--", "sh", "-c", 'cat >/dev/null; git apply "$SPLIT_DIR/a/diff.patch"'],
    { stdin: split.stdout },
  );
  assert.equal(join.code, 0, show(join));
  assert.equal(Deno.readTextFileSync(`${sb.project}/l.txt`), "late\n");
  assert.equal((await sb.split(id))?.state, "joined");
});

Deno.test({
  name: "a repo whose own config sets core.fsmonitor, filters and hooks: nothing runs on the host",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create({
    files: { "a.txt": "a\n", ".gitattributes": "* filter=x\n" },
  });
  const marker = `${sb.scratch}/marker`;
  const hook = `${sb.scratch}/hook.sh`;
  Deno.writeTextFileSync(hook, `#!/bin/sh\necho "$0 $*" >> '${marker}'\ncat\n`, { mode: 0o755 });
  // Set up after the commit: from here on, any Git run in the project runs the hook.
  for (const key of ["core.fsmonitor", "filter.x.clean", "filter.x.smudge", "diff.external"]) {
    await sb.git("config", key, hook);
  }
  await sb.git("config", "filter.x.required", "true");
  for (
    const name of ["post-checkout", "post-index-change", "pre-commit", "reference-transaction"]
  ) {
    Deno.copyFileSync(hook, `${sb.project}/.git/hooks/${name}`);
  }

  const r = await sb.bash(
    `"$M" split -n -b a='echo b >> a.txt; echo n > n.txt; git status --short >/dev/null' | "$M" join`,
  );
  assert.equal(r.code, 0, show(r));
  assert.match(r.stdout, /^\+b$/m);
  assert.match(r.stdout, /^\+\+\+ b\/n.txt$/m);
  assert.ok(!exists(marker), `something ran: ${exists(marker) && Deno.readTextFileSync(marker)}`);
  // The control: the same repository does run the hook for an ordinary git status.
  await sb.git("status", "--short");
  assert.ok(exists(marker), "the marker mechanism works");
});

Deno.test({
  name: "a join from a non-creator (inside a shell branch) is refused; so are -b and ::: there",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create();
  const host = await sb.marsh(["split", "-b", "a=echo a > a2.txt"]);
  assert.equal(host.code, 0, show(host));
  const hostId = handleId(host.stdout);

  const r = await sb.marsh(
    ["join", "--", "sh", "-c", 'cat >/dev/null; cat "$SPLIT_DIR/in/stdout" "$SPLIT_DIR/in/stderr"'],
    {
      stdin: (await sb.bash(`"$M" split -n -b in="$BRANCH"`, {
        env: {
          H: host.stdout.trim(),
          BRANCH: `echo "sock=\${MARSH_SOCK:+set}"
"$M" join <<<"$H"; echo "join $?"
"$M" split -n -b x=true; echo "split $?"
"$M" split -n ::: x echo hi; echo "argv $?"`,
        },
      })).stdout,
    },
  );
  assert.equal(r.code, 0, show(r));
  assert.match(r.stdout, /^sock=set$/m);
  assert.match(r.stdout, /^join 2$/m);
  assert.match(
    r.stdout,
    new RegExp(`split ${hostId} was not created by this caller; only its creator may join it`),
  );
  assert.match(r.stdout, /^split 2$/m);
  assert.match(
    r.stdout,
    /: shell branches \(-b, split \{ \}\) run only from the session shell; from a job or a split branch use argv branches: ::: LABEL CMD \[ARG\.\.\.\]/,
  );
  assert.match(r.stdout, /^argv 2$/m);
  // Argv branches are admitted from a branch, but only registered Kit commands.
  assert.match(
    r.stdout,
    /unknown Kit command "echo" in branch "x"; no Kit commands are registered/,
  );
  // The host split is untouched: still awaiting its creator.
  assert.equal((await sb.split(hostId))?.state, "await");
});

Deno.test({
  name:
    "::: with an unregistered CMD, or without LABEL CMD, is refused with status 2, nothing created",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create();
  for (
    const [args, want] of [
      [["split", ":::", "a", "echo", "hi"], /unknown Kit command "echo" in branch "a"/],
      [["split", "-b", "a=true", ":::", "b", "echo"], /unknown Kit command "echo" in branch "b"/],
      [["split", "-n", "-b", "a=true", ":::"], /argv branch 1 needs a label and a command/],
    ] as const
  ) {
    const r = await sb.marsh(args);
    assert.equal(r.code, 2, show(r));
    assert.equal(r.stdout, "");
    assert.match(r.stderr, want);
  }
  assert.ok(!exists(`${sb.project}/.marsh`), "no split directory");
});

Deno.test({
  name: "a background process delays capture: a late writer and a double-forked setsid writer",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create();
  const r = await sb.bash(`"$M" split -n \
    -b a='(sleep 2; echo late > late.txt) &' \
    -b b='setsid sh -c "sleep 1; echo x > y.txt" &' | "$M" join`);
  assert.equal(r.code, 0, show(r));
  assert.match(r.stdout, /^== a: exited 0 \(1 files? changed\)$/m);
  assert.match(r.stdout, /^\+\+\+ b\/late\.txt\n@@ -0,0 \+1 @@\n\+late$/m);
  assert.match(r.stdout, /^== b: exited 0 \(1 files? changed\)$/m);
  assert.match(r.stdout, /^\+\+\+ b\/y\.txt\n@@ -0,0 \+1 @@\n\+x$/m);
});

for (const forks of ["copy", "auto"] as const) {
  Deno.test({
    name:
      `git clean -xfd mid-split (MARSH_FORKS=${forks}): the branch fails with workspace replaced, nothing removed by path`,
    permissions: PERMISSIONS,
  }, async () => {
    await using sb = await Sandbox.create({ env: { MARSH_FORKS: forks } });
    const gate = `${sb.scratch}/go`;
    const started = `${sb.scratch}/started`;
    const child = sb.spawnMarsh([
      "split",
      "-n",
      "-b",
      `a=touch '${started}'; while [ ! -e '${gate}' ]; do sleep 0.05; done; echo hi > hi.txt`,
    ]);
    const running = await sb.runningSplit();
    // The branch's own code runs once its view holds the fork: only then is the clean "mid-split".
    await waitFor("the branch to start", () => exists(started));
    assert.ok(exists(`${running.dir}/a`));
    const overlay = running.branches[0]?.fork_strategy === "overlay";
    assert.equal(overlay, forks === "auto", `fork strategy ${running.branches[0]?.fork_strategy}`);
    const clean = await sb.runGit(["clean", "-xfdq"]);
    if (overlay) {
      // A mounted fork and base cannot be deleted; everything else under .marsh
      // is, the fork's upper layer (the branch's work) and the layers included.
      assert.equal(clean.code, 1, show(clean));
      assert.match(clean.stderr, /Device or resource busy|Read-only file system/);
      assert.ok(!exists(`${running.dir}/.overlay`));
      assert.ok(!exists(`${sb.project}/.marsh/layers`));
    } else {
      assert.equal(clean.code, 0, show(clean));
      assert.ok(!exists(`${sb.project}/.marsh`));
      // What sits at the path now is not the daemon's: it must survive everything below.
      Deno.mkdirSync(running.dir, { recursive: true });
    }
    const before = [...Deno.readDirSync(running.dir)].map((e) => e.name).sort();
    Deno.writeTextFileSync(gate, "");
    const split = await child.output();
    assert.equal(split.code, 125, new TextDecoder().decode(split.stderr));
    const handle = new TextDecoder().decode(split.stdout);
    assert.equal(handleId(handle), running.id);

    const s = await sb.split(running.id);
    assert.equal(s?.reason, "workspace replaced");
    assert.equal(s.branches[0]?.state, "failed");
    assert.equal(s.branches[0]?.status, "failed: workspace replaced");
    const join = await sb.marsh(["join"], { stdin: handle });
    assert.equal(join.code, 2, show(join));
    assert.match(join.stderr, /workspace replaced/);
    assert.equal((await sb.split(running.id))?.state, "kept");
    const rm = await sb.marsh(["splits", "rm", running.id]);
    assert.equal(rm.code, 0, show(rm));
    assert.match(rm.stdout, /nothing was removed from disk/);
    assert.deepEqual(
      [...Deno.readDirSync(running.dir)].map((e) => e.name).sort(),
      before,
      "what is at the path is untouched",
    );
    assert.equal(await sb.split(running.id), undefined);
  });
}

Deno.test({
  name:
    "the environment filter: FOO passes, credentials and MARSH_/DOCKER_ do not; MARSH_SOCK is set",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create();
  const r = await sb.bash(
    `"$M" split -n -b env='env' | "$M" join -- sh -c 'cat >/dev/null; cat "$SPLIT_DIR/env/stdout"'`,
    {
      env: {
        FOO: "bar",
        MY_TOKEN: "t",
        AWS_X: "a",
        DOCKER_HOST: "tcp://d",
        X_PAT: "p",
        MARSH_EXTRA: "m",
        DATABASE_URL: "postgres://app:hunter2@db/app",
        CACHE_URL: "redis://cache:6379/0",
        X_AUTH: "xa",
        JWT: "ey",
        BW_SESSION: "s",
        SENTRY_DSN: "https://k@sentry/1",
        GIT_AUTHOR_NAME: "Test",
      },
    },
  );
  assert.equal(r.code, 0, show(r));
  const seen = new Map(
    r.stdout.split("\n").filter((l) => l.includes("=")).map((l) => {
      const eq = l.indexOf("=");
      return [l.slice(0, eq), l.slice(eq + 1)] as const;
    }),
  );
  assert.equal(seen.get("FOO"), "bar");
  for (const name of ["MY_TOKEN", "AWS_X", "MARSH_HOME", "MARSH_EXTRA", "DOCKER_HOST", "X_PAT"]) {
    assert.ok(!seen.has(name), `${name} reached the branch`);
  }
  // Issue 10 §6: a URL with a password, AUTH, JWT, SESSION and DSN names.
  for (const name of ["DATABASE_URL", "X_AUTH", "JWT", "BW_SESSION", "SENTRY_DSN"]) {
    assert.ok(!seen.has(name), `${name} reached the branch`);
  }
  assert.equal(seen.get("CACHE_URL"), "redis://cache:6379/0");
  assert.equal(seen.get("GIT_AUTHOR_NAME"), "Test");
  assert.match(seen.get("MARSH_SOCK") ?? "", new RegExp(`^${sb.home}/b/\\d+\\.sock$`));
});

Deno.test({
  name: "no terminal in a branch (/dev/tty gives ENXIO); the handle is printed to a terminal too",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create();
  const r = await sb.bash(
    `"$M" split -n -b t='echo hi > /dev/tty' | "$M" join -- sh -c 'cat >/dev/null; cat "$SPLIT_DIR/t/stderr" "$SPLIT_DIR/t/status"'`,
  );
  assert.equal(r.code, 0, show(r));
  assert.match(r.stdout, /\/dev\/tty: No such device or address/);
  assert.match(r.stdout, /^exited 1\n$/m);

  // script(1) gives the CLI a pty for stdin and stdout.
  const tty = await sb.bash(`script -qec '"$M" split -b a=true' /dev/null`);
  assert.equal(tty.code, 0, show(tty));
  assert.match(tty.stdout, /^\{"marsh_split":1,"id":"[a-z0-9]+"\}\r?\n$/);
});
