/**
 * The split-filesystem service as the daemon will drive it: a real child
 * process with its own narrow permissions, spoken to in frames.
 */
import assert from "node:assert/strict";
import { encodeFrame, readFrames } from "../protocol/frame.ts";
import type { CapturedReply, CreatedReply, ForkedReply } from "../protocol/splitfs.ts";
import { denoPath, SplitfsError, SplitfsService } from "../splitfs/client.ts";
import { splitfsFlags } from "../protocol/permissions.ts";

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
        root,
        env: {},
      });
      assert.equal(created.t, "created");
      assert.equal(created.dir, `${Deno.realPathSync(root)}/.marsh/split/s1`);
      assert.equal(created.git, null);
      assert.equal(created.snapshot.files, 2);
      const forked = await svc.request<ForkedReply>({ v: 1, t: "fork", id: "s1", label: "a" });
      assert.equal(forked.path, `${created.dir}/a`);
      assert.match(forked.strategy, /^(reflink|copy_file_range|copy)$/);
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
    } finally {
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
        root,
        env: {},
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
