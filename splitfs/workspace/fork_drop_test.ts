import assert from "node:assert/strict";
import { exists, gitProject, mountsBelow, sandbox, text, throwsA } from "../_testing.ts";
import { MountPointError } from "../fd/mount_boundary.ts";
import { SplitWorkspace } from "./workspace.ts";

// Real files, real git, real overlay mounts (the tests run as root).
const perms: Deno.PermissionOptions = {
  ffi: true,
  read: true,
  write: true,
  run: ["git", "awk", "mount", "umount"],
  env: ["PATH"],
};

for (const forks of ["copy", "auto"] as const) {
  Deno.test({
    name:
      `dropFork removes one fork, its layer and Git metadata; out/ and its sibling stay (forks: ${forks})`,
    permissions: perms,
  }, async () => {
    using sb = sandbox();
    await gitProject(sb, { "a.txt": "a\n" });
    using ws = SplitWorkspace.create({ id: "s1", root: sb.root, env: { HOME: sb.home }, forks });
    const dir = `${sb.root}/.marsh/split/s1`;
    const a = ws.fork("a"), b = ws.fork("b");
    Deno.writeTextFileSync(`${a.path}/a.txt`, "changed in a\n");
    Deno.writeTextFileSync(`${b.path}/b.txt`, "new in b\n");
    ws.capture("a");
    ws.publish("a", "exited 0", { stdout: null, stderr: null });
    const overlay = forks === "auto";
    assert.deepEqual(mountsBelow(`${dir}/a`), overlay ? [`${dir}/a`] : []);

    // A mount marsh did not make inside the fork refuses the drop, changing nothing.
    Deno.mkdirSync(`${sb.outside}/m`);
    Deno.mkdirSync(`${a.path}/mnt`);
    const bind = new Deno.Command("mount", { args: ["--bind", `${sb.outside}/m`, `${a.path}/mnt`] })
      .outputSync();
    assert.ok(bind.success);
    const refused = throwsA(() => ws.dropFork("a"), MountPointError);
    assert.match(refused.message, new RegExp(`${a.path}/mnt is a mount point`));
    assert.equal(text(`${a.path}/a.txt`), "changed in a\n");
    assert.ok(exists(`${dir}/.admin/a/HEAD`));
    assert.ok(new Deno.Command("umount", { args: [`${a.path}/mnt`] }).outputSync().success);

    ws.dropFork("a");
    assert.deepEqual(mountsBelow(`${dir}/a`), []);
    for (const gone of ["a", ".overlay/a", ".admin/a"]) assert.ok(!exists(`${dir}/${gone}`), gone);
    assert.equal(text(`${dir}/out/a/status`), "exited 0\n");
    assert.ok(exists(`${dir}/out/a/diff.patch`));
    // The sibling is untouched and still captures.
    assert.equal(text(`${b.path}/b.txt`), "new in b\n");
    assert.deepEqual(mountsBelow(`${dir}/b`), overlay ? [`${dir}/b`] : []);
    assert.equal(ws.capture("b").files, 1);
    // Gone already: fine. The split's removal then has the rest.
    ws.dropFork("a");
    ws.remove();
    assert.ok(!exists(dir));
  });
}
