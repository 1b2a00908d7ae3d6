/**
 * The split-filesystem service as the daemon will drive it: a real child
 * process with its own narrow permissions, spoken to in frames.
 */
import assert from "node:assert/strict";
import { encodeFrame, readFrames } from "../protocol/frame.ts";
import type {
  CapturedReply,
  CreatedReply,
  DoneReply,
  ForkedReply,
  LocatedReply,
  WireIdentity,
} from "../protocol/splitfs.ts";
import type { RenderBranchSpec } from "../protocol/splitfs_out.ts";
import { denoPath, SplitfsError, SplitfsService } from "../protocol/splitfs_client.ts";
import { splitfsFlags } from "../protocol/entrypoints.ts";
import {
  exists,
  fingerprint,
  fingerprintDiff,
  gitOk,
  gitProject,
  mountsBelow,
  put,
  sandbox,
  text,
  unmountBelow,
} from "../splitfs/_testing.ts";
import { GITFILE_ROOT_REFUSAL } from "../splitfs/git/git_source.ts";

const perms: Deno.PermissionOptions = { run: true, read: true, write: true, env: true };
const dec = new TextDecoder();

function project(): string {
  const root = Deno.makeTempDirSync({ prefix: "marsh-service-" });
  Deno.writeTextFileSync(`${root}/a.txt`, "one\ntwo\n");
  Deno.mkdirSync(`${root}/src`);
  Deno.writeTextFileSync(`${root}/src/b.txt`, "bee\n");
  return root;
}

Deno.test(
  { name: "service: create, fork, capture, remove a split", permissions: perms },
  async () => {
    const root = project();
    try {
      await using svc = SplitfsService.start();
      const created = await svc.request<CreatedReply>({
        v: 1,
        t: "create",
        id: "s1",
        cwd: root,
        env: {},
        withIgnored: false,
        forks: "auto",
      });
      assert.equal(created.t, "created");
      assert.equal(created.root, Deno.realPathSync(root));
      assert.equal(created.cwd, "");
      assert.equal(created.dir, `${Deno.realPathSync(root)}/.marsh/split/s1`);
      assert.equal(created.git, null);
      assert.equal(created.snapshot.files, 2);
      const forked = await svc.request<ForkedReply>({ v: 1, t: "fork", id: "s1", label: "a" });
      assert.equal(forked.path, `${created.dir}/a`);
      assert.equal(forked.strategy, "overlay");
      assert.equal(created.forks.strategy, "overlay");
      assert.equal(created.snapshot.layers, 1);
      assert.match(created.snapshot.rootId ?? "", /^[0-9a-f]{40}$/);
      Deno.writeTextFileSync(`${forked.path}/a.txt`, "one\n2\n");
      Deno.writeTextFileSync(`${forked.path}/src/new.txt`, "new\n");
      const captured = await svc.request<CapturedReply>({
        v: 1,
        t: "capture",
        id: "s1",
        label: "a",
      });
      assert.equal(captured.files, 2);
      assert.equal(
        dec.decode(Deno.readFileSync(`${created.dir}/out/a/files`)),
        "M\ta.txt\nA\tsrc/new.txt\n",
      );
      assert.match(dec.decode(Deno.readFileSync(`${created.dir}/out/a/diff.patch`)), /^\+2$/m);
      assert.equal((await svc.request({ v: 1, t: "remove", id: "s1" })).t, "ok");
      assert.throws(() => Deno.statSync(created.dir), Deno.errors.NotFound);
      assert.deepEqual(mountsBelow(root), []);
    } finally {
      unmountBelow(root);
      Deno.removeSync(root, { recursive: true });
    }
  },
);

Deno.test(
  { name: "service: rejected and replaced results are typed errors", permissions: perms },
  async () => {
    const root = project();
    try {
      await using svc = SplitfsService.start();
      const created = await svc.request<CreatedReply>({
        v: 1,
        t: "create",
        id: "s2",
        cwd: root,
        env: {},
        withIgnored: false,
        forks: "copy",
      });
      const f = await svc.request<ForkedReply>({ v: 1, t: "fork", id: "s2", label: "bad" });
      Deno.mkdirSync(`${f.path}/src/.git`);
      await assert.rejects(
        svc.request({ v: 1, t: "capture", id: "s2", label: "bad" }),
        (e) =>
          e instanceof SplitfsError && e.kind === "rejected" &&
          e.message === "nested .git at src/.git",
      );
      await assert.rejects(
        svc.request({ v: 1, t: "fork", id: "s2", label: "no/slash" }),
        (e) => e instanceof SplitfsError && e.kind === "input" && /invalid label/.test(e.message),
      );
      // git clean -xfd in the project mid-split.
      Deno.removeSync(`${root}/.marsh`, { recursive: true });
      await assert.rejects(
        svc.request({ v: 1, t: "remove", id: "s2" }),
        (e) =>
          e instanceof SplitfsError && e.kind === "replaced" && e.message === "workspace replaced",
      );
      assert.equal((await svc.request({ v: 1, t: "release", id: "s2" })).t, "ok");
      void created;
    } finally {
      Deno.removeSync(root, { recursive: true });
    }
  },
);

Deno.test({
  name: "service: a malformed frame gets an error frame and a clean exit",
  permissions: perms,
}, async () => {
  const child = new Deno.Command(denoPath(), {
    args: ["run", ...splitfsFlags(), new URL("../splitfs/main.ts", import.meta.url).pathname],
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const w = child.stdin.getWriter();
  await w.write(encodeFrame({ v: 1, t: "nonsense" }));
  await w.write(new Uint8Array([0xff, 0xff, 0xff, 0xff, 1, 2, 3]));
  await w.close().catch(() => {});
  const replies: unknown[] = [];
  for await (const f of readFrames(child.stdout)) replies.push(f);
  const status = await child.status;
  await child.stderr.cancel();
  assert.deepEqual(replies.map((r) => (r as { kind: string }).kind), ["input", "input"]);
  assert.match((replies[1] as { message: string }).message, /exceeds/);
  assert.equal(status.code, 2);
});

// ---------------------------------------------------------------------------
// The frames the daemon drives: locate/create from a cwd, publish, manifest,
// render, reopen, progress. Each through the real service process.

function failsWith(kind: SplitfsError["kind"], message: string | RegExp) {
  return (e: unknown) => {
    assert.ok(e instanceof SplitfsError, `not a SplitfsError: ${e}`);
    assert.equal(e.kind, kind, e.message);
    if (typeof message === "string") assert.equal(e.message, message);
    else assert.match(e.message, message);
    return true;
  };
}

function isSymlink(path: string): boolean {
  return Deno.lstatSync(path).isSymlink;
}

async function created(
  svc: SplitfsService,
  id: string,
  cwd: string,
  env: { HOME?: string } = {},
  forks: "auto" | "copy" = "auto",
): Promise<CreatedReply> {
  return await svc.request<CreatedReply>({
    v: 1,
    t: "create",
    id,
    cwd,
    env,
    withIgnored: false,
    forks,
  });
}

async function forked(svc: SplitfsService, id: string, label: string): Promise<ForkedReply> {
  return await svc.request<ForkedReply>({ v: 1, t: "fork", id, label });
}

/** Runs a render and returns its bytes and how many chunks carried them. */
async function rendered(
  svc: SplitfsService,
  id: string,
  branches: RenderBranchSpec[],
  terminal = false,
): Promise<{ bytes: Uint8Array; chunks: number; changed: number }> {
  const parts: Uint8Array[] = [];
  const done = await svc.request<DoneReply>(
    { v: 1, t: "render", id, branches, terminal },
    (b) => {
      parts.push(b);
    },
  );
  const bytes = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    bytes.set(p, at);
    at += p.length;
  }
  return { bytes, chunks: parts.length, changed: done.changed };
}

Deno.test(
  { name: "service: every fork has its own index; nothing of it is shared", permissions: perms },
  async () => {
    using sb = sandbox("marsh-service-");
    await gitProject(sb, { "top.txt": "t\n" });
    await using svc = SplitfsService.start();
    const c = await created(svc, "si", sb.root, { HOME: sb.home });
    const st = (label: string) => Deno.lstatSync(`${c.dir}/.admin/${label}/index`);
    // A request that still says shareIndex gets a private copy too.
    await svc.request<ForkedReply>(
      { v: 1, t: "fork", id: "si", label: "a", shareIndex: true } as unknown as Parameters<
        typeof svc.request
      >[0],
    );
    await forked(svc, "si", "b");
    assert.notEqual(st("a").ino, st("b").ino);
    for (const label of ["a", "b"]) {
      assert.equal(st(label).nlink, 1);
      assert.equal(st(label).mode! & 0o777, 0o644);
    }
    assert.deepEqual(
      [...Deno.readDirSync(`${c.dir}/.admin`)].map((e) => e.name).sort(),
      ["a", "b"],
    );
    assert.equal(
      (await svc.request<CapturedReply>({ v: 1, t: "capture", id: "si", label: "a" })).files,
      0,
    );
    assert.equal((await svc.request({ v: 1, t: "remove", id: "si" })).t, "ok");
    assert.ok(!exists(c.dir));
  },
);

Deno.test(
  {
    name: "service: locate and create find the project root from the caller's cwd",
    permissions: perms,
  },
  async () => {
    using sb = sandbox("marsh-service-");
    const head = await gitProject(sb, { "src/deep/x.txt": "x\n", "top.txt": "t\n" });
    await using svc = SplitfsService.start();
    const nested = `${sb.root}/src/deep`;
    assert.deepEqual(
      await svc.request<LocatedReply>({ v: 1, t: "locate", cwd: nested }),
      { v: 1, t: "located", root: sb.root, cwd: "src/deep" },
    );
    // The real path counts: a symlinked cwd is located where it leads.
    Deno.symlinkSync(nested, `${sb.outside}/link`);
    assert.deepEqual(
      await svc.request<LocatedReply>({ v: 1, t: "locate", cwd: `${sb.outside}/link` }),
      { v: 1, t: "located", root: sb.root, cwd: "src/deep" },
    );
    const c = await created(svc, "g1", nested, { HOME: sb.home });
    assert.equal(c.root, sb.root);
    assert.equal(c.cwd, "src/deep");
    assert.equal(c.dir, `${sb.root}/.marsh/split/g1`);
    assert.equal(c.git?.head, head);
    assert.equal(c.snapshot.files, 2);

    // Without Git anywhere above, the cwd itself is the root.
    Deno.mkdirSync(`${sb.outside}/plain/sub`, { recursive: true });
    assert.deepEqual(
      await svc.request<LocatedReply>({ v: 1, t: "locate", cwd: `${sb.outside}/plain/sub` }),
      { v: 1, t: "located", root: `${sb.outside}/plain/sub`, cwd: "" },
    );

    await assert.rejects(
      svc.request({ v: 1, t: "locate", cwd: "/" }),
      failsWith("input", /^cannot use \/ as the project root/),
    );
    await assert.rejects(
      created(svc, "root", "/"),
      failsWith("input", /^cannot use \/ as the project root/),
    );

    // From a fork or from marsh's state: refused, and nothing is made.
    const f = await forked(svc, "g1", "a");
    for (const cwd of [f.path, `${f.path}/src`, `${sb.root}/.marsh`]) {
      await assert.rejects(
        svc.request({ v: 1, t: "locate", cwd }),
        failsWith("input", `cannot split from inside .marsh/: ${cwd}`),
      );
    }
    await assert.rejects(
      created(svc, "g2", `${f.path}/src`),
      failsWith("input", `cannot split from inside .marsh/: ${f.path}/src`),
    );
    assert.ok(!exists(`${sb.root}/.marsh/split/g2`));

    // A gitfile at the nearest root is refused as create refuses it.
    put(`${sb.outside}/wt`, ".git", "gitdir: /nowhere\n");
    Deno.mkdirSync(`${sb.outside}/wt/sub`);
    await assert.rejects(
      svc.request({ v: 1, t: "locate", cwd: `${sb.outside}/wt/sub` }),
      failsWith("input", GITFILE_ROOT_REFUSAL),
    );
    await assert.rejects(
      svc.request({ v: 1, t: "locate", cwd: "relative/dir" }),
      failsWith("input", /cwd must be an absolute path/),
    );
    await assert.rejects(
      svc.request({ v: 1, t: "locate", cwd: `${sb.outside}/missing` }),
      failsWith("input", /ENOENT/),
    );
    assert.equal((await svc.request({ v: 1, t: "remove", id: "g1" })).t, "ok");
  },
);

Deno.test(
  {
    name:
      "service: a nested split (parent) is located in its creator's fork and snapshots it as a sibling",
    permissions: perms,
  },
  async () => {
    using sb = sandbox("marsh-service-");
    const opts = { home: sb.home };
    await gitProject(sb, { "src/x.txt": "x\n", "top.txt": "t\n" });
    await using svc = SplitfsService.start();
    const p = await created(svc, "p1", sb.root, { HOME: sb.home });
    const a = await forked(svc, "p1", "a");
    const b = await forked(svc, "p1", "b");
    put(a.path, "top.txt", "t from a\n");
    await gitOk(a.path, ["commit", "-q", "-am", "in a"], opts);
    const aHead = (await gitOk(a.path, ["rev-parse", "HEAD"], opts)).trim();
    put(a.path, "src/y.txt", "y\n");
    const parent = { split: "p1", label: "a" };

    assert.deepEqual(
      await svc.request<LocatedReply>({ v: 1, t: "locate", cwd: `${a.path}/src`, parent }),
      { v: 1, t: "located", root: sb.root, cwd: "src" },
    );
    assert.deepEqual(
      await svc.request<LocatedReply>({ v: 1, t: "locate", cwd: a.path, parent }),
      { v: 1, t: "located", root: sb.root, cwd: "" },
    );
    // Outside the named fork (another fork, the project, marsh's state): refused.
    for (const cwd of [b.path, `${sb.root}/src`, `${p.dir}/base`, `${p.dir}/.admin/a`]) {
      await assert.rejects(
        svc.request({ v: 1, t: "locate", cwd, parent }),
        failsWith("input", /is not inside the fork \.marsh\/split\/p1\/a of its creator branch/),
      );
      await assert.rejects(
        svc.request({
          v: 1,
          t: "create",
          id: "n0",
          cwd,
          env: {},
          withIgnored: false,
          forks: "copy",
          parent,
        }),
        failsWith("input", /is not inside the fork/),
      );
    }
    assert.ok(!exists(`${sb.root}/.marsh/split/n0`));
    // A malformed parent is a protocol error.
    for (
      const bad of [{ split: "p1", label: "a/b" }, { split: "P1", label: "a" }, { split: "p1" }, 7]
    ) {
      await assert.rejects(
        // deno-lint-ignore no-explicit-any
        svc.request({ v: 1, t: "locate", cwd: a.path, parent: bad as any }),
        failsWith("input", /^malformed locate frame: parent/),
      );
    }

    const n = await svc.request<CreatedReply>({
      v: 1,
      t: "create",
      id: "n1",
      cwd: `${a.path}/src`,
      env: { HOME: sb.home },
      withIgnored: false,
      forks: "auto",
      parent,
    });
    assert.equal(n.root, sb.root);
    assert.equal(n.cwd, "src");
    assert.equal(n.dir, `${sb.root}/.marsh/split/n1`);
    assert.equal(n.forks.strategy, "copy");
    assert.match(n.forks.reason, /a nested split's forks are copies/);
    assert.equal(n.snapshot.layers, 0);
    assert.equal(n.snapshot.files, 3);
    assert.equal(n.git?.head, aHead);
    assert.deepEqual(n.git?.objects, [
      `${n.dir}/store.git/objects`,
      ...p.git!.objects,
      `${p.dir}/.admin/a/objects`,
    ]);
    const x = await forked(svc, "n1", "x");
    assert.equal(x.path, `${n.dir}/x`);
    assert.equal(text(`${x.path}/top.txt`), "t from a\n");
    assert.equal(await gitOk(x.path, ["status", "--porcelain"], opts), "?? src/y.txt\n");
    put(x.path, "src/y.txt", "y from x\n");
    const cap = await svc.request<CapturedReply>({ v: 1, t: "capture", id: "n1", label: "x" });
    assert.equal(cap.files, 1);
    assert.equal(text(`${n.dir}/out/x/files`), "M\tsrc/y.txt\n");
    assert.equal(text(`${a.path}/src/y.txt`), "y\n");
    assert.equal((await svc.request({ v: 1, t: "remove", id: "n1" })).t, "ok");
    assert.equal((await svc.request({ v: 1, t: "remove", id: "p1" })).t, "ok");
  },
);

Deno.test(
  {
    name:
      "service: publish writes status and attempt output through out/ and refuses planted entries",
    permissions: perms,
  },
  async () => {
    using sb = sandbox("marsh-service-");
    put(sb.root, "a.txt", "one\n");
    const control = `${sb.top}/control`;
    Deno.mkdirSync(control);
    const big = crypto.getRandomValues(new Uint8Array(65536));
    const stdout = new Uint8Array(3 * 1024 * 1024 + 17).map((_, i) => big[i % big.length]!);
    Deno.writeFileSync(`${control}/a.out`, stdout);
    Deno.writeTextFileSync(`${control}/a.err`, "warn\n");
    Deno.writeTextFileSync(`${sb.outside}/target`, "keep\n");

    await using svc = SplitfsService.start();
    const c = await created(svc, "p1", sb.root);
    const out = `${c.dir}/out`;
    const a = await forked(svc, "p1", "a");
    Deno.writeTextFileSync(`${a.path}/a.txt`, "two\n");
    await svc.request({ v: 1, t: "capture", id: "p1", label: "a" });
    const publish = (label: string, status: string, o: string | null, e: string | null) =>
      svc.request({ v: 1, t: "publish", id: "p1", label, status, stdout: o, stderr: e });

    assert.equal((await publish("a", "exited 0", `${control}/a.out`, `${control}/a.err`)).t, "ok");
    assert.equal(text(`${out}/a/status`), "exited 0\n");
    assert.deepEqual(Deno.readFileSync(`${out}/a/stdout`), stdout);
    assert.equal(text(`${out}/a/stderr`), "warn\n");
    assert.equal(text(`${out}/a/files`), "M\ta.txt\n", "capture's results stay");

    // A branch that never had a fork (the pool was full): out/<label>/ is made.
    assert.equal((await publish("cap", "failed: capacity", null, null)).t, "ok");
    assert.equal(text(`${out}/cap/status`), "failed: capacity\n");
    assert.equal(text(`${out}/cap/stdout`), "");
    assert.equal(text(`${out}/cap/stderr`), "");

    // Once per label: a second publish finds the files there.
    await assert.rejects(
      publish("a", "exited 1", null, null),
      failsWith("rejected", "out/a was tampered with"),
    );
    assert.equal(text(`${out}/a/status`), "exited 0\n");

    // A symlink planted in out/<label>/ is refused, never followed, and nothing is left half-written.
    await forked(svc, "p1", "b");
    Deno.symlinkSync(`${sb.outside}/target`, `${out}/b/stdout`);
    await assert.rejects(
      publish("b", "exited 0", `${control}/a.out`, null),
      failsWith("rejected", "out/b was tampered with"),
    );
    assert.equal(text(`${sb.outside}/target`), "keep\n");
    assert.ok(!exists(`${out}/b/status`));
    assert.ok(isSymlink(`${out}/b/stdout`));

    // out/<label> itself a symlink to a directory outside.
    Deno.symlinkSync(sb.outside, `${out}/c`);
    await assert.rejects(
      publish("c", "exited 0", null, null),
      failsWith("rejected", "out/c was tampered with"),
    );
    assert.ok(!exists(`${sb.outside}/status`));

    // A missing attempt file fails before anything is written.
    await assert.rejects(
      publish("d", "exited 0", `${control}/missing`, null),
      failsWith("input", /ENOENT/),
    );
    assert.ok(!exists(`${out}/d/status`));
    await assert.rejects(
      publish("e/..", "exited 0", null, null),
      failsWith("input", /invalid label/),
    );
    await assert.rejects(
      publish("e", "exited 0", "relative", null),
      failsWith("input", /stdout must be an absolute path/),
    );

    // Remove takes the never-forked label's out/ along with everything else.
    assert.equal((await svc.request({ v: 1, t: "remove", id: "p1" })).t, "ok");
    assert.ok(!exists(c.dir));
    assert.deepEqual([...Deno.readDirSync(`${sb.root}/.marsh/.trash`)], []);
  },
);

Deno.test(
  {
    name: "service: manifest replaces out/manifest.json atomically and refuses a planted one",
    permissions: perms,
  },
  async () => {
    using sb = sandbox("marsh-service-");
    put(sb.root, "a.txt", "one\n");
    Deno.writeTextFileSync(`${sb.outside}/target`, "keep\n");
    await using svc = SplitfsService.start();
    const c = await created(svc, "m1", sb.root);
    const path = `${c.dir}/out/manifest.json`;
    const write = (json: string) => svc.request({ v: 1, t: "manifest", id: "m1", json });
    const one = JSON.stringify({ version: 2, id: "m1", state: "run" });
    const two = JSON.stringify({ version: 2, id: "m1", state: "await", branches: [] }, null, 2);
    assert.equal((await write(one)).t, "ok");
    assert.equal(text(path), one);
    const ino = Deno.statSync(path).ino;
    assert.equal((await write(two)).t, "ok");
    assert.equal(text(path), two);
    assert.notEqual(Deno.statSync(path).ino, ino, "replaced by a rename, not rewritten in place");
    assert.ok(!exists(`${path}.tmp`));

    // A temporary file left by a crash mid-write does not stop the next write.
    Deno.writeTextFileSync(`${path}.tmp`, "{ partial");
    assert.equal((await write(one)).t, "ok");
    assert.equal(text(path), one);
    assert.ok(!exists(`${path}.tmp`));

    await assert.rejects(write("{ not json"), failsWith("input", /json is not JSON/));
    await assert.rejects(write("[1]"), failsWith("input", /json is not an object/));

    Deno.removeSync(path);
    Deno.symlinkSync(`${sb.outside}/target`, path);
    await assert.rejects(write(one), failsWith("rejected", "out/ was tampered with"));
    assert.equal(text(`${sb.outside}/target`), "keep\n");
    assert.ok(isSymlink(path));
    Deno.removeSync(path);
    Deno.mkdirSync(path);
    await assert.rejects(write(one), failsWith("rejected", "out/ was tampered with"));
    assert.ok(Deno.statSync(path).isDirectory);
    assert.equal((await svc.request({ v: 1, t: "remove", id: "m1" })).t, "ok");
  },
);

const dec8 = new TextDecoder();

Deno.test(
  {
    name: "service: render summarises binary hunks and escapes control bytes for a terminal",
    permissions: perms,
  },
  async () => {
    using sb = sandbox("marsh-service-");
    put(sb.root, "a.txt", "one\ntwo\n");
    const bin = new Uint8Array(3000).map((_, i) => (i * 31) % 251);
    put(sb.root, "img.bin", bin);
    Deno.writeTextFileSync(`${sb.outside}/target`, "keep\n");
    await using svc = SplitfsService.start();
    const c = await created(svc, "r1", sb.root);
    const a = await forked(svc, "r1", "a");
    await forked(svc, "r1", "b");
    Deno.writeTextFileSync(`${a.path}/a.txt`, "one\n\x1b[2Jtwo\x9b\n");
    Deno.writeFileSync(`${a.path}/img.bin`, bin.slice(0, 1234));
    await svc.request({ v: 1, t: "capture", id: "r1", label: "a" });
    await svc.request({ v: 1, t: "capture", id: "r1", label: "b" });
    const patch = text(`${c.dir}/out/a/diff.patch`);
    assert.match(patch, /GIT binary patch\nliteral 1234\n/);
    const branches: RenderBranchSpec[] = [
      { label: "a", status: "exited 0", files: 2 },
      { label: "b", status: "exited 3", files: 0 },
      { label: "never", status: "failed: capacity", files: 0 },
    ];

    const plain = await rendered(svc, "r1", branches);
    assert.equal(plain.changed, 2);
    const textSection = patch.slice(0, patch.indexOf("diff --git a/img.bin"));
    const binHeader = patch.slice(
      patch.indexOf("diff --git a/img.bin"),
      patch.indexOf("GIT binary patch"),
    );
    assert.equal(
      dec8.decode(plain.bytes),
      "== a: exited 0 (2 files changed)\n" + textSection + binHeader +
        "binary file changed: img.bin (1234 bytes; full patch in $SPLIT_DIR/a/diff.patch)\n\n" +
        "== b: exited 3 (no changes)\n\n" +
        "== never: failed: capacity (no changes)\n\n",
    );
    assert.ok(plain.bytes.includes(0x1b), "not a terminal: the bytes pass as they are");
    assert.equal(text(`${c.dir}/out/a/diff.patch`), patch, "diff.patch keeps its literal hunks");

    const term = await rendered(svc, "r1", branches, true);
    assert.ok(!term.bytes.includes(0x1b));
    const shown = dec8.decode(term.bytes);
    assert.ok(shown.includes("+\\x1b[2Jtwo\\xc2\\x9b\n"), shown);
    assert.ok(shown.startsWith("== a: exited 0 (2 files changed)\n"));

    // A planted symlink at a diff.patch fails the rendering before its first byte.
    Deno.symlinkSync(`${sb.outside}/target`, `${c.dir}/out/b/diff.patch`);
    let chunks = 0;
    await assert.rejects(
      svc.request({ v: 1, t: "render", id: "r1", branches, terminal: false }, () => {
        chunks++;
      }),
      failsWith("rejected", "out/b was tampered with"),
    );
    assert.equal(chunks, 0);
    await assert.rejects(
      rendered(svc, "r1", [branches[0]!, branches[0]!]),
      failsWith("input", /duplicate label/),
    );
    assert.equal((await svc.request({ v: 1, t: "remove", id: "r1" })).t, "ok");
  },
);

/**
 * The service's peak resident memory, from /proc. Read by `cat`: Deno lets
 * only an all-permissions process read /proc itself.
 */
async function peakRssKiB(pid: number): Promise<number> {
  const r = await new Deno.Command("cat", { args: [`/proc/${pid}/status`] }).output();
  const m = /^VmHWM:\s+(\d+) kB$/m.exec(dec.decode(r.stdout));
  assert.ok(m, "no VmHWM in /proc/<pid>/status");
  return Number(m[1]);
}

Deno.test(
  {
    name: "service: render streams a 160 MiB patch in bounded chunks and bounded memory",
    permissions: perms,
  },
  async () => {
    using sb = sandbox("marsh-service-");
    put(sb.root, "a.txt", "one\n");
    await using svc = SplitfsService.start();
    const c = await created(svc, "big", sb.root);
    await forked(svc, "big", "a");
    // One block: a text section, then a binary one whose body is ~1 MiB of base85-like lines.
    const enc8 = new TextEncoder();
    const hunk = Array.from({ length: 1000 }, (_, n) => `+added line ${n} of the text part\n`);
    const textPart = enc8.encode(
      "diff --git a/t.txt b/t.txt\n--- a/t.txt\n+++ b/t.txt\n@@ -1 +1,1000 @@\n-old\n" +
        hunk.join(""),
    );
    const binHead = enc8.encode("diff --git a/b.bin b/b.bin\nindex 1..2 100644\n");
    const line = "z" + "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz!#$%&()*+-;<"
      .slice(0, 65) +
      "\n";
    const body = enc8.encode(
      "GIT binary patch\nliteral 777\n" + line.repeat(16_000) + "\nliteral 0\nHcmV?d00001\n\n",
    );
    const blocks = 160;
    {
      using f = Deno.openSync(`${c.dir}/out/a/diff.patch`, { write: true, createNew: true });
      for (let i = 0; i < blocks; i++) {
        for (const part of [textPart, binHead, body]) {
          let off = 0;
          while (off < part.length) off += f.writeSync(part.subarray(off));
        }
      }
    }
    const size = Deno.statSync(`${c.dir}/out/a/diff.patch`).size;
    const summary = enc8.encode(
      "binary file changed: b.bin (777 bytes; full patch in $SPLIT_DIR/a/diff.patch)\n",
    );
    const header = enc8.encode("== a: exited 0 (320 files changed)\n");
    const expected = header.length + blocks * (textPart.length + binHead.length + summary.length) +
      1;
    assert.ok(size > 160 * 1024 * 1024, `${size}`);
    assert.ok(expected > 5 * 1024 * 1024, "the rendering itself is several MiB");
    const before = await peakRssKiB(svc.pid);
    let bytes = 0, chunks = 0, largest = 0, summaries = 0, carry = "";
    await svc.request(
      {
        v: 1,
        t: "render",
        id: "big",
        branches: [{ label: "a", status: "exited 0", files: 320 }],
        terminal: false,
      },
      (b) => {
        bytes += b.length;
        chunks++;
        largest = Math.max(largest, b.length);
        const s = carry + dec8.decode(b);
        summaries += s.split("binary file changed: ").length - 1;
        assert.ok(!s.includes("GIT binary patch"));
        carry = s.slice(-40);
      },
    );
    const after = await peakRssKiB(svc.pid);
    assert.equal(bytes, expected);
    assert.equal(summaries, blocks);
    assert.ok(largest <= 256 * 1024, `a chunk of ${largest} bytes`);
    assert.ok(chunks >= Math.floor(expected / (256 * 1024)));
    // Holding the patch (or the rendering) whole would add more than 160 MiB.
    assert.ok(after - before < 64 * 1024, `peak RSS grew from ${before} KiB to ${after} KiB`);
    assert.equal((await svc.request({ v: 1, t: "remove", id: "big" })).t, "ok");
  },
);

Deno.test(
  {
    name: "service: reopen after a restart checks identities; remove works or nothing is removed",
    permissions: perms,
  },
  async () => {
    using sb = sandbox("marsh-service-");
    put(sb.root, "a.txt", "one\n");
    let c: CreatedReply, a: ForkedReply, b: ForkedReply;
    {
      // The first daemon: create, fork, capture one branch, then it dies.
      await using first = SplitfsService.start();
      // Copy forks: the test deletes a fork by path, which a mount would refuse.
      c = await created(first, "r1", sb.root, {}, "copy");
      a = await forked(first, "r1", "a");
      b = await forked(first, "r1", "b");
      await forked(first, "r1", "gone");
      Deno.writeTextFileSync(`${a.path}/a.txt`, "two\n");
      await first.request({ v: 1, t: "capture", id: "r1", label: "a" });
    }
    Deno.removeSync(`${c.dir}/gone`, { recursive: true });
    await using svc = SplitfsService.start();
    const reopen = (identity: WireIdentity, forks: { label: string; identity: WireIdentity }[]) =>
      svc.request({ v: 1, t: "reopen", id: "r1", root: c.root, identity, forks, git: false });
    const forks = [{ label: "a", identity: a.identity }, { label: "b", identity: b.identity }];

    // A wrong identity: replaced, and nothing is touched.
    const before = fingerprint(c.dir);
    const [dev, ino] = c.identity;
    await assert.rejects(
      reopen([dev, String(BigInt(ino) + 1n)], forks),
      failsWith("replaced", "workspace replaced"),
    );
    await assert.rejects(
      reopen(c.identity, [...forks, { label: "gone", identity: b.identity }]),
      failsWith("replaced", "workspace replaced"),
    );
    // A fork removed and made again (git clean -xfd, then a stray mkdir).
    Deno.renameSync(`${c.dir}/b`, `${sb.outside}/b-saved`);
    Deno.mkdirSync(`${c.dir}/b`);
    await assert.rejects(reopen(c.identity, forks), failsWith("replaced", "workspace replaced"));
    Deno.removeSync(`${c.dir}/b`);
    Deno.renameSync(`${sb.outside}/b-saved`, `${c.dir}/b`);
    assert.deepEqual(fingerprintDiff(before, fingerprint(c.dir)), []);
    await assert.rejects(
      svc.request({
        v: 1,
        t: "reopen",
        id: "nope",
        root: c.root,
        identity: c.identity,
        forks: [],
        git: false,
      }),
      failsWith("replaced", "workspace replaced"),
    );

    // The journaled identities: the split is open again.
    assert.equal((await reopen(c.identity, forks)).t, "ok");
    await assert.rejects(
      svc.request({ v: 1, t: "capture", id: "r1", label: "a" }),
      failsWith("input", /reopened after a restart: its forks are untrusted/),
    );
    await assert.rejects(forked(svc, "r1", "c"), failsWith("input", /reopened after a restart/));
    const r = await rendered(svc, "r1", [{ label: "a", status: "uncertain", files: 1 }]);
    assert.match(dec8.decode(r.bytes), /^== a: uncertain \(1 file changed\)\ndiff --git a\/a.txt/);
    assert.equal(
      (await svc.request({
        v: 1,
        t: "publish",
        id: "r1",
        label: "b",
        status: "uncertain",
        stdout: null,
        stderr: null,
      })).t,
      "ok",
    );
    assert.equal((await svc.request({ v: 1, t: "manifest", id: "r1", json: "{}" })).t, "ok");
    assert.equal((await svc.request({ v: 1, t: "remove", id: "r1" })).t, "ok");
    assert.ok(!exists(c.dir));
  },
);

Deno.test(
  {
    name: "service: reopen of a split whose fork was replaced removes nothing on remove",
    permissions: perms,
  },
  async () => {
    using sb = sandbox("marsh-service-");
    put(sb.root, "a.txt", "one\n");
    await using svc = SplitfsService.start();
    const c = await created(svc, "r2", sb.root, {}, "copy");
    const a = await forked(svc, "r2", "a");
    assert.equal((await svc.request({ v: 1, t: "release", id: "r2" })).t, "ok");
    // Not listed: fine.
    assert.equal(
      (await svc.request({
        v: 1,
        t: "reopen",
        id: "r2",
        root: c.root,
        identity: c.identity,
        forks: [],
        git: false,
      })).t,
      "ok",
    );
    await assert.rejects(
      svc.request({
        v: 1,
        t: "reopen",
        id: "r2",
        root: c.root,
        identity: c.identity,
        forks: [],
        git: false,
      }),
      failsWith("input", /already open/),
    );
    assert.equal((await svc.request({ v: 1, t: "release", id: "r2" })).t, "ok");
    assert.equal(
      (await svc.request({
        v: 1,
        t: "reopen",
        id: "r2",
        root: c.root,
        identity: c.identity,
        forks: [{ label: "a", identity: a.identity }],
        git: false,
      })).t,
      "ok",
    );
    // git clean -xfd between reopen and remove.
    Deno.removeSync(`${c.dir}/a`, { recursive: true });
    Deno.mkdirSync(`${c.dir}/a`);
    await assert.rejects(
      svc.request({ v: 1, t: "remove", id: "r2" }),
      failsWith("replaced", "workspace replaced"),
    );
    assert.ok(exists(`${c.dir}/out`) && exists(`${c.dir}/base/a.txt`));
    assert.equal((await svc.request({ v: 1, t: "release", id: "r2" })).t, "ok");
  },
);

Deno.test(
  {
    name: "service: create and fork report progress on a tree of a few thousand files",
    permissions: perms,
  },
  async () => {
    using sb = sandbox("marsh-service-");
    const data = "x".repeat(2000);
    for (let d = 0; d < 30; d++) {
      Deno.mkdirSync(`${sb.root}/d${d}`);
      for (let i = 0; i < 100; i++) Deno.writeTextFileSync(`${sb.root}/d${d}/f${i}.txt`, data);
    }
    const check = (frames: { files: number; bytes: number }[], total: number) => {
      assert.ok(frames.length >= 2, `${frames.length} progress frames`);
      for (const [i, p] of frames.entries()) {
        assert.ok(p.files > 0 && p.files <= total, `files ${p.files}`);
        assert.equal(p.bytes, p.files * data.length);
        if (i > 0) assert.ok(p.files >= frames[i - 1]!.files);
      }
    };
    {
      await using svc = SplitfsService.start({ progressIntervalMs: 5 });
      const frames: { files: number; bytes: number }[] = [];
      const c = await svc.request<CreatedReply>(
        { v: 1, t: "create", id: "pg", cwd: sb.root, env: {}, withIgnored: false, forks: "copy" },
        undefined,
        (p) => {
          frames.push(p);
        },
      );
      assert.equal(c.snapshot.files, 3000);
      check(frames, 3000);
      const forkFrames: { files: number; bytes: number }[] = [];
      await svc.request<ForkedReply>({ v: 1, t: "fork", id: "pg", label: "a" }, undefined, (p) => {
        forkFrames.push(p);
      });
      check(forkFrames, 3000);
      assert.equal((await svc.request({ v: 1, t: "remove", id: "pg" })).t, "ok");
    }
    {
      // The default interval bounds how many frames a create sends.
      await using svc = SplitfsService.start();
      let frames = 0;
      const t0 = performance.now();
      await svc.request(
        {
          v: 1,
          t: "create",
          id: "pg2",
          cwd: sb.root,
          env: {},
          withIgnored: false,
          forks: "copy",
        },
        undefined,
        () => {
          frames++;
        },
      );
      const ms = performance.now() - t0;
      assert.ok(frames <= ms / 250 + 1, `${frames} frames in ${ms} ms`);
      assert.equal((await svc.request({ v: 1, t: "remove", id: "pg2" })).t, "ok");
    }
  },
);

Deno.test(
  {
    name:
      "service: an overlay split survives its service; a new one reopens it and unmounts on remove",
    permissions: perms,
  },
  async () => {
    using sb = sandbox("marsh-service-");
    put(sb.root, "a.txt", "one\n");
    put(sb.root, "d/b.txt", "bee\n");
    let c: CreatedReply, a: ForkedReply, b: ForkedReply;
    {
      await using first = SplitfsService.start();
      c = await created(first, "o1", sb.root);
      a = await forked(first, "o1", "a");
      b = await forked(first, "o1", "b");
      assert.equal(a.strategy, "overlay");
      Deno.writeTextFileSync(`${a.path}/a.txt`, "two\n");
      Deno.removeSync(`${b.path}/d`, { recursive: true });
      const cap = await first.request<CapturedReply>({ v: 1, t: "capture", id: "o1", label: "b" });
      assert.equal(cap.files, 1);
    }
    // The service is gone; its mounts are not: the forks keep the branches' work.
    assert.deepEqual(
      mountsBelow(c.dir),
      [`${c.dir}/base`, `${c.dir}/a`, `${c.dir}/b`].sort((x, y) => y.length - x.length),
    );
    assert.equal(Deno.readTextFileSync(`${a.path}/a.txt`), "two\n");
    await using svc = SplitfsService.start();
    const forks = [{ label: "a", identity: a.identity }, { label: "b", identity: b.identity }];
    assert.equal(
      (await svc.request({
        v: 1,
        t: "reopen",
        id: "o1",
        root: c.root,
        identity: c.identity,
        forks,
        git: false,
      })).t,
      "ok",
    );
    assert.equal((await svc.request({ v: 1, t: "remove", id: "o1" })).t, "ok");
    assert.deepEqual(mountsBelow(sb.root), []);
    assert.equal(exists(c.dir), false);
    assert.equal(Deno.readTextFileSync(`${sb.root}/a.txt`), "one\n");
  },
);
