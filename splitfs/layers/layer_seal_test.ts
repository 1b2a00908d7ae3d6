import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { fingerprint, fingerprintDiff, put, run } from "../_testing.ts";
import { gitTree, type LayerProject, layerProject, mountStack } from "./_layers_testing.ts";
import type { LayerSnapshot } from "./layers.ts";

// Real files, real git, real overlay mounts (the tests run as root, so a
// layer's read-only modes stop none of the writes below).
const perms: Deno.PermissionOptions = {
  ffi: true,
  read: true,
  write: true,
  run: ["git", "mount", "umount", "bash", "awk", "touch"],
  env: ["PATH"],
};

type Project = LayerProject;

function project(files: Record<string, string>): Project {
  return layerProject("marsh-seal-test-", files);
}

/** Mounts the stack read-only, as a split's base; what it shows, then unmounted. */
async function mounted(p: Project, snap: LayerSnapshot): Promise<Map<string, string>> {
  await using base = await mountStack(p, snap.layers);
  return fingerprint(base.path);
}

/** How a test poisons a sealed layer's data dir, and what the refusal must say. */
interface Tamper {
  readonly name: string;
  /** `data` is the layer's data dir. */
  readonly act: (data: string, p: Project) => unknown;
  readonly says: RegExp;
  /** Poison the bottom layer of a two-layer stack instead of a one-layer stack. */
  readonly bottom?: boolean;
}

const TAMPERS: readonly Tamper[] = [
  {
    name: "an append to a file (as root: its mode is ignored)",
    act: (data) => {
      Deno.chmodSync(`${data}/a.txt`, 0o444);
      Deno.writeTextFileSync(`${data}/a.txt`, "BACKDOOR\n", { append: true });
    },
    says: /a\.txt: mode 0644 → 0444, size 6 → 15, mtime and ctime changed$/,
  },
  {
    name: "an append in the bottom layer of a stack",
    act: (data) => Deno.writeTextFileSync(`${data}/sub/b.txt`, "BACKDOOR\n", { append: true }),
    says: /sub\/b\.txt: size 2 → 11, mtime and ctime changed/,
    bottom: true,
  },
  {
    name: "a chmod",
    act: (data) => Deno.chmodSync(`${data}/a.txt`, 0o755),
    says: /a\.txt: mode 0644 → 0755, ctime changed/,
  },
  {
    name: "a new file",
    act: (data) => Deno.writeTextFileSync(`${data}/sub/evil.sh`, "BACKDOOR\n"),
    says: /sub\/evil\.sh: added \(2 entries differ\)/,
  },
  {
    name: "a removed file",
    act: (data) => Deno.removeSync(`${data}/sub/b.txt`),
    says: /sub\/b\.txt: removed \(2 entries differ\)/,
  },
  {
    name: "a file replaced by a rename over it",
    act: (data) => {
      Deno.writeTextFileSync(`${data}/.tmp`, "BACKDOOR\n");
      Deno.renameSync(`${data}/.tmp`, `${data}/a.txt`);
    },
    says: /a\.txt: replaced by another inode/,
  },
  {
    name: "a same-size edit with its mtime put back (ctime still moves)",
    act: async (data, p) => {
      // touch -r keeps nanoseconds; a Date would round the mtime to ms.
      const ref = `${p.sb.top}/mtime-ref`;
      const opts = { home: p.sb.home };
      await run("touch", ["-r", `${data}/a.txt`, ref], opts);
      using f = Deno.openSync(`${data}/a.txt`, { write: true });
      f.writeSync(new TextEncoder().encode("BAD!!\n"));
      f.close();
      await run("touch", ["-r", ref, `${data}/a.txt`], opts);
    },
    says: /^layer "[a-z0-9]+" was changed after it was sealed: a\.txt: ctime changed$/,
  },
  {
    name: "a directory replaced by a symlink",
    act: (data) => {
      Deno.renameSync(`${data}/sub`, `${data}/../old-sub`);
      Deno.symlinkSync("/etc", `${data}/sub`);
    },
    says: /sub: replaced: a dir became a symlink/,
  },
  {
    name: "a name that is not UTF-8",
    act: (data, p) => run("bash", ["-c", `printf x > "${data}"/$'\\xff'`], { home: p.sb.home }),
    says: /file name is not valid UTF-8 in .*data: "\\xff"/,
  },
];

for (const t of TAMPERS) {
  Deno.test({
    name: `${t.name} in a sealed layer: the next snapshot starts a fresh chain and says why`,
    permissions: perms,
  }, async () => {
    using p = project({ "a.txt": "clean\n", "sub/b.txt": "b\n" });
    const s1 = p.snap();
    let stack = s1;
    if (t.bottom) {
      put(p.sb.root, "c.txt", "c\n");
      stack = p.snap();
      assert.equal(stack.layers.length, 2);
    }
    // Intact, the stack is reused as it is.
    const again = p.snap();
    assert.deepEqual(again.layers, stack.layers);
    assert.equal(again.untrusted, null);
    const live = fingerprint(p.sb.root, { skip: (rel) => rel === ".marsh" });

    const poisoned = s1.layers[0]!;
    await t.act(`${p.layersPath}/${poisoned}/data`, p);
    assert.match(p.store.checkHead("tracked") ?? "", t.says);

    const s2 = p.snap();
    assert.match(s2.untrusted ?? "", t.says);
    assert.match(s2.untrusted ?? "", new RegExp(`^layer "${poisoned}" `));
    assert.equal(s2.stats.full, true);
    assert.equal(s2.layers.length, 1);
    assert.ok(!s2.layers.includes(poisoned));
    assert.deepEqual(fingerprintDiff(live, await mounted(p, s2)), []);
    assert.equal(s2.rootId, await gitTree(p, `${p.sb.top}/check.git`));
    // The fresh chain is trusted again: the next snapshot reuses it.
    const s3 = p.snap();
    assert.deepEqual(s3.layers, s2.layers);
    assert.equal(s3.untrusted, null);
  });
}

Deno.test({
  name:
    "overlay forks over a stack (copy-up, new files, deletions) leave its seal intact, and a touch of the live tree is no change",
  permissions: perms,
}, async () => {
  using p = project({ "a.txt": "a\n", "sub/b.txt": "b\n" });
  const s1 = p.snap();
  put(p.sb.root, "c.txt", "c\n");
  const s2 = p.snap();
  const lowers = s2.layers.map((id) => `${p.layersPath}/${id}/data`).reverse().join(":");
  const top = Deno.makeTempDirSync({ dir: p.sb.top, prefix: "fork-" });
  for (const d of ["upper", "work", "mnt"]) Deno.mkdirSync(`${top}/${d}`);
  const opts = { home: p.sb.home };
  await run("mount", [
    "-t",
    "overlay",
    "overlay",
    "-o",
    `lowerdir=${lowers},upperdir=${top}/upper,workdir=${top}/work,redirect_dir=nofollow,index=off`,
    `${top}/mnt`,
  ], opts);
  try {
    Deno.writeTextFileSync(`${top}/mnt/a.txt`, "fork\n", { append: true });
    Deno.chmodSync(`${top}/mnt/sub/b.txt`, 0o600);
    Deno.removeSync(`${top}/mnt/c.txt`);
    Deno.writeTextFileSync(`${top}/mnt/sub/new.txt`, "new\n");
    Deno.readTextFileSync(`${top}/mnt/sub/b.txt`);
  } finally {
    await run("umount", [`${top}/mnt`], opts);
  }
  assert.equal(p.store.checkHead("tracked"), null);
  Deno.utimeSync(`${p.sb.root}/a.txt`, new Date(1_000_000), new Date(1_000_000));
  const s3 = p.snap();
  assert.equal(s3.untrusted, null);
  assert.deepEqual(s3.layers, s2.layers);
  assert.equal(s1.layers[0], s2.layers[0]);
});

Deno.test({
  name: "a layer sealed without stat records (an older marsh) is not reused, and says so",
  permissions: perms,
}, () => {
  using p = project({ "a.txt": "a\n" });
  const s1 = p.snap();
  const wrapper = `${p.layersPath}/${s1.layers[0]}`;
  Deno.chmodSync(wrapper, 0o755);
  const meta = JSON.parse(Deno.readTextFileSync(`${wrapper}/meta.json`));
  delete meta.data;
  meta.version = 1;
  const bytes = new TextEncoder().encode(JSON.stringify(meta, null, 2) + "\n");
  Deno.writeFileSync(`${wrapper}/meta.json`, bytes);
  const sealHex = createHash("sha256").update(bytes).digest("hex");
  Deno.writeTextFileSync(`${wrapper}/SEALED`, `sha256 ${sealHex}\n`);
  assert.deepEqual(p.store.list().map((l) => l.id), s1.layers, "still a sealed layer");
  const s2 = p.snap();
  assert.equal(
    s2.untrusted,
    `layer "${
      s1.layers[0]
    }" has no record of its data (sealed by an older marsh), so a change to it cannot be detected`,
  );
  assert.equal(s2.stats.full, true);
  assert.notDeepEqual(s2.layers, s1.layers);
});

Deno.test({
  name: "a layer whose data and stat records were both changed is refused without a path",
  permissions: perms,
}, () => {
  using p = project({ "a.txt": "a\n" });
  const s1 = p.snap();
  const wrapper = `${p.layersPath}/${s1.layers[0]}`;
  Deno.writeTextFileSync(`${wrapper}/data/a.txt`, "x", { append: true });
  Deno.writeTextFileSync(`${wrapper}/stat`, "junk");
  assert.equal(
    p.store.checkHead("tracked"),
    `layer "${
      s1.layers[0]
    }" was changed after it was sealed: its data and its stat records no longer match its seal`,
  );
  assert.equal(p.snap().stats.full, true);
});

Deno.test({
  name:
    "a change anywhere in a deep layer is found by name from the stat records, and so is one under a directory that did not change",
  permissions: perms,
}, () => {
  const files = {
    "a/b/c/d.txt": "d\n",
    "a/b/e.txt": "e\n",
    "a/f.txt": "f\n",
    "g/h/i.txt": "i\n",
    "g/j.txt": "j\n",
    "z.txt": "z\n",
  };
  const cases: [string, (data: string) => void, RegExp][] = [
    [
      "deepest file",
      (d) => Deno.writeTextFileSync(`${d}/a/b/c/d.txt`, "X", { append: true }),
      /^a\/b\/c\/d\.txt: size 2 → 3/,
    ],
    [
      "file after a subtree",
      (d) => Deno.chmodSync(`${d}/a/b/e.txt`, 0o600),
      /^a\/b\/e\.txt: mode 0644 → 0600/,
    ],
    ["last file", (d) => Deno.chmodSync(`${d}/z.txt`, 0o600), /^z\.txt: mode/],
    [
      "new file in a deep directory",
      (d) => Deno.writeTextFileSync(`${d}/g/h/evil`, "x"),
      /^g\/h\/evil: added/,
    ],
    ["a directory replaced by a new one", (d) => {
      Deno.renameSync(`${d}/g/h`, `${d}/../old-h`);
      Deno.mkdirSync(`${d}/g/h`);
      Deno.copyFileSync(`${d}/../old-h/i.txt`, `${d}/g/h/i.txt`);
    }, /^g\/h: replaced by another inode/],
  ];
  for (const [what, act, says] of cases) {
    using p = project(files);
    const s1 = p.snap();
    assert.equal(p.store.checkHead("tracked"), null, what);
    act(`${p.layersPath}/${s1.layers[0]}/data`);
    const problem = p.store.checkHead("tracked") ?? "";
    const prefix = `layer "${s1.layers[0]}" was changed after it was sealed: `;
    assert.ok(problem.startsWith(prefix), `${what}: ${problem}`);
    assert.match(problem.slice(prefix.length), says, what);
  }
});

Deno.test({
  name:
    "a layer whose stat records alone were changed is checked by a full walk: reused while its data is intact, refused once it is not",
  permissions: perms,
}, () => {
  using p = project({ "a.txt": "a\n", "sub/b.txt": "b\n" });
  const s1 = p.snap();
  const wrapper = `${p.layersPath}/${s1.layers[0]}`;
  Deno.writeTextFileSync(`${wrapper}/stat`, "junk");
  assert.equal(p.store.checkHead("tracked"), null);
  assert.deepEqual(p.snap().layers, s1.layers);
  Deno.writeTextFileSync(`${wrapper}/data/sub/b.txt`, "x", { append: true });
  assert.equal(
    p.store.checkHead("tracked"),
    `layer "${
      s1.layers[0]
    }" was changed after it was sealed: its data and its stat records no longer match its seal`,
  );
});
