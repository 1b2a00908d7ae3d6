import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { JournalCorruptError } from "./errors.ts";
import { Journal } from "./journal.ts";
import {
  checkKitEnv,
  checkKitHome,
  checkKitName,
  checkKitNetwork,
  checkKitWall,
  DEFAULT_WALL_S,
  defaultKitHome,
  type KitRecord,
  KitRuleError,
  MAX_WALL_S,
  parseKitEntrypoint,
  parseKitWall,
} from "./kits.ts";
import { applyMigrations, MIGRATIONS, SCHEMA_VERSION } from "./migrations.ts";
import { freshPath, sampleSplit, scratchDir } from "./_testing.ts";

const dir = scratchDir("kits");
const permissions: Deno.PermissionOptions = { read: [dir], write: [dir] };

const ID = `sha256:${"ab".repeat(32)}`;

function kit(name: string, over: Partial<KitRecord> = {}): KitRecord {
  return {
    name,
    image: `marsh-kit/${name}:0123abcd4567`,
    imageId: ID,
    entrypoint: null,
    network: "none",
    env: [],
    wallS: DEFAULT_WALL_S,
    home: `/state/marsh/kits/${name}/home`,
    createdMs: 1_000,
    ...over,
  };
}

function refuses(fn: () => unknown, pattern: RegExp): void {
  assert.throws(fn, (e) => e instanceof KitRuleError && pattern.test(e.message));
}

Deno.test({ name: "kits: add, get, list by name, replace, remove", permissions }, () => {
  const path = freshPath(dir);
  {
    using j = Journal.open(path);
    assert.deepEqual(j.listKits(), []);
    assert.equal(j.getKit("codex"), null);
    const codex = kit("codex", {
      entrypoint: ["codex", "--full-auto"],
      env: ["OPENAI_API_KEY", "HTTPS_PROXY"],
      network: "host",
      wallS: MAX_WALL_S,
    });
    assert.equal(j.addKit(codex), null);
    assert.equal(j.addKit(kit("claude")), null);
    assert.deepEqual(j.getKit("codex"), codex);
    assert.deepEqual(j.listKits().map((k) => k.name), ["claude", "codex"]);

    assert.throws(
      () => j.addKit(kit("codex", { image: "other:1" })),
      (e) => e instanceof Deno.errors.AlreadyExists && /"codex"/.test(e.message),
    );
    assert.deepEqual(j.getKit("codex"), codex, "a refused add changes nothing");

    const newer = kit("codex", { image: "other:1", createdMs: 2_000 });
    assert.deepEqual(j.addKit(newer, { replace: true }), codex);
    assert.deepEqual(j.getKit("codex"), newer);
    assert.equal(j.addKit(kit("pi"), { replace: true }), null, "replace of a new name adds it");

    assert.deepEqual(j.removeKit("claude"), kit("claude"));
    assert.equal(j.removeKit("claude"), null);
    assert.equal(j.removeKit("nope"), null);
  }
  using again = Journal.open(path);
  assert.deepEqual(again.listKits().map((k) => k.name), ["codex", "pi"]);
  assert.deepEqual(again.getKit("codex")?.image, "other:1");
});

Deno.test({
  name: "kits: a record that breaks a rule is refused and nothing is written",
  permissions,
}, () => {
  using j = Journal.open(freshPath(dir));
  const bad: [Partial<KitRecord> & { name?: string }, RegExp][] = [
    [{ name: "Codex" }, /invalid kit name "Codex"/],
    [{ name: "bash" }, /shadow bash/],
    [{ image: "" }, /invalid --image/],
    [{ imageId: "sha256:xyz" }, /invalid image id/],
    [{ entrypoint: [] }, /invalid --entrypoint/],
    [{ network: "-x" }, /invalid --network/],
    [{ env: ["MARSH_HOME"] }, /MARSH_\*/],
    [{ env: ["A", "A"] }, /given twice/],
    [{ wallS: 0 }, /invalid --wall "0"/],
    [{ wallS: MAX_WALL_S + 1 }, /invalid --wall "86401"/],
    [{ wallS: 1.5 }, /invalid --wall/],
    [{ home: "relative" }, /invalid home/],
    [{ createdMs: -1 }, /createdMs/],
  ];
  for (const [over, pattern] of bad) {
    assert.throws(
      () => j.addKit(kit(over.name ?? "ok", over)),
      (e) => e instanceof KitRuleError && e instanceof TypeError && pattern.test(e.message),
      JSON.stringify(over),
    );
  }
  assert.deepEqual(j.listKits(), []);
});

Deno.test({
  name: "kit names: the Kit image rule, and no shadowing of marsh or the shells",
  permissions: {},
}, () => {
  for (const ok of ["a", "claude", "codex-2", `a${"b".repeat(62)}`]) checkKitName(ok);
  for (const name of ["", "2x", "-a", "A", "a_b", "a.b", `a${"b".repeat(63)}`, "a b", "é"]) {
    refuses(() => checkKitName(name), /invalid kit name/);
  }
  for (const name of ["marsh", "bash", "sh", "env"]) {
    refuses(
      () => checkKitName(name),
      new RegExp(`shadow ${name}; marsh, bash, sh, env are reserved`),
    );
  }
});

Deno.test({ name: "kit networks: none, host or an engine network's name", permissions: {} }, () => {
  for (const ok of ["none", "host", "bridge", "my_net.1-a", "N"]) checkKitNetwork(ok);
  for (const bad of ["", "-x", "_x", ".x", "a b", "container:abc", "a/b", "x".repeat(129)]) {
    refuses(() => checkKitNetwork(bad), /invalid --network/);
  }
});

Deno.test({ name: "kit env: variable names outside MARSH_* and DOCKER_*", permissions: {} }, () => {
  checkKitEnv(["ANTHROPIC_API_KEY", "_X", "a1", "HTTPS_PROXY"]);
  for (const bad of ["", "1A", "A-B", "A=1", "A B", "x".repeat(129)]) {
    refuses(() => checkKitEnv([bad]), /invalid --env .*not NAME=VALUE/);
  }
  for (const bad of ["MARSH_HOME", "MARSH_SOCK", "DOCKER_HOST", "docker_config", "Marsh_x"]) {
    refuses(() => checkKitEnv([bad]), /is refused: (MARSH|DOCKER)_\* variables/);
  }
  for (const bad of ["HOME", "PATH"]) {
    refuses(() => checkKitEnv([bad]), new RegExp(`--env ${bad} is refused: a Kit's ${bad} is set`));
  }
  // As the worker never passes them (isReservedEnvName): in any case.
  refuses(() => checkKitEnv(["home"]), /--env home is refused: a Kit's HOME is set/);
  refuses(() => checkKitEnv(["Path"]), /--env Path is refused: a Kit's PATH is set/);
  // A name that only contains the prefix is fine.
  checkKitEnv(["MY_MARSH_X", "MARSH", "DOCKER"]);
  refuses(() => checkKitEnv(Array.from({ length: 65 }, (_, i) => `V${i}`)), /too many --env/);
});

Deno.test({ name: "kit wall: 1..86400 whole seconds, digits only", permissions: {} }, () => {
  assert.equal(parseKitWall("1"), 1);
  assert.equal(parseKitWall("86400"), 86_400);
  assert.equal(parseKitWall("0600"), 600);
  for (const bad of ["0", "86401", "", "-1", "+5", "1.5", "1e3", " 5", "5s", "9999999999"]) {
    refuses(() => parseKitWall(bad), /invalid --wall .*from 1 to 86400 \(default 3600\)/);
  }
  checkKitWall(1);
  for (const bad of [0, -1, 86_401, 2.5, Number.NaN]) refuses(() => checkKitWall(bad), /--wall/);
});

Deno.test(
  { name: "kit entrypoint: a JSON array of strings or a single word", permissions: {} },
  () => {
    assert.deepEqual(parseKitEntrypoint("/usr/local/bin/claude"), ["/usr/local/bin/claude"]);
    assert.deepEqual(parseKitEntrypoint('["claude","-p","a b"]'), ["claude", "-p", "a b"]);
    assert.deepEqual(parseKitEntrypoint(' ["x"]'), ["x"]);
    refuses(
      () => parseKitEntrypoint("claude -p"),
      /give one word, or several as a JSON array: --entrypoint '\["claude","-p"\]'/,
    );
    refuses(() => parseKitEntrypoint(""), /give one word/);
    refuses(() => parseKitEntrypoint("[claude]"), /not a JSON array of strings/);
    refuses(() => parseKitEntrypoint('["a", 1]'), /not a JSON array of strings/);
    refuses(() => parseKitEntrypoint("[]"), /1-64 non-empty words/);
    refuses(() => parseKitEntrypoint('["a",""]'), /1-64 non-empty words/);
    refuses(() => parseKitEntrypoint('["a\\u0000"]'), /NUL/);
  },
);

Deno.test({
  name: "kit home: absolute, normalized, outside .marsh and the control dir",
  permissions: {},
}, () => {
  const home = "/root/.local/state/marsh";
  checkKitHome("/srv/agents/claude", home);
  checkKitHome(defaultKitHome(home, "claude"), home);
  checkKitHome(`${home}/kits/x`, home);
  checkKitHome("/root/.local/state/marsh2", home);
  checkKitHome("/p/.marshal/x", home);
  const cases: [string, RegExp][] = [
    ["rel/dir", /absolute path/],
    ["/a/../b", /normalized/],
    ["/a/./b", /normalized/],
    ["/a//b", /normalized/],
    ["/a/b/", /normalized/],
    ["/a,b", /comma/],
    ["/p/.marsh/split/x", /inside a project's \.marsh/],
    ["/p/.marsh", /inside a project's \.marsh/],
    ["/", /holds marsh's control dir/],
    ["/root", /holds marsh's control dir/],
    [home, /holds marsh's control dir/],
    [`${home}/b`, /inside marsh's control dir/],
    [`${home}/kits`, /inside marsh's control dir/],
  ];
  for (const [path, pattern] of cases) refuses(() => checkKitHome(path, home), pattern);
});

/** A journal file as a version 3 marsh left it: migrations 1..3 and one split. */
function v3Journal(path: string): void {
  const db = new DatabaseSync(path);
  try {
    applyMigrations(db, path, 0, MIGRATIONS.slice(0, 3));
    db.exec(`
      INSERT INTO splits (id, creator_kind, session, depth, root, dir, cwd, cap, state, created_ms,
                          root_id)
        VALUES ('old', 'host', 'host', 1, '/p', '/p/.marsh/split/old', '.', 'cap-old', 'kept', 1000,
                '${"a".repeat(40)}');
    `);
  } finally {
    db.close();
  }
}

function schemaOf(path: string): string[] {
  const db = new DatabaseSync(path);
  try {
    return db.prepare("SELECT type, name, sql FROM sqlite_schema ORDER BY type, name").all()
      .map((r) => `${r.type} ${r.name} ${r.sql}`);
  } finally {
    db.close();
  }
}

Deno.test({
  name: "kits: a version 3 journal gains the kits table and keeps its rows",
  permissions,
}, () => {
  assert.equal(SCHEMA_VERSION >= 4, true);
  assert.equal(MIGRATIONS[3]?.version, 4);
  const path = freshPath(dir);
  v3Journal(path);
  assert.ok(!schemaOf(path).some((s) => s.startsWith("table kits ")));
  {
    using j = Journal.open(path);
    assert.equal(j.schemaVersion, SCHEMA_VERSION);
    assert.deepEqual(
      j.getSplit("old"),
      sampleSplit("old", { state: "kept", rootId: "a".repeat(40) }),
    );
    assert.deepEqual(j.listKits(), []);
    j.addKit(kit("codex"));
    assert.deepEqual(j.getKit("codex"), kit("codex"));
  }
  const fresh = freshPath(dir);
  Journal.open(fresh).close();
  assert.deepEqual(schemaOf(path), schemaOf(fresh));
});

Deno.test({
  name: "kits: SQLite refuses rows the rules forbid, and a bad row reads as corrupt",
  permissions,
}, () => {
  const path = freshPath(dir);
  Journal.open(path).close();
  const db = new DatabaseSync(path);
  const insert = (over: Record<string, string | number | null>) => {
    const row: Record<string, string | number | null> = {
      name: "k",
      image: "i:1",
      image_id: ID,
      entrypoint: null,
      network: "none",
      env: "[]",
      wall_s: 60,
      home: "/h",
      created_ms: 0,
      ...over,
    };
    const names = Object.keys(row);
    db.prepare(
      `INSERT INTO kits (${names.join(", ")}) VALUES (${names.map((n) => `:${n}`).join(", ")})`,
    ).run(row);
  };
  try {
    const rows: Record<string, string | number | null>[] = [
      { name: "K" },
      { name: "1k" },
      { image_id: "sha256:xyz" },
      { entrypoint: "{}" },
      { env: "nope" },
      { wall_s: 0 },
      { wall_s: 86_401 },
      { home: "h" },
    ];
    for (const over of rows) {
      assert.throws(() => insert(over), /CHECK constraint failed/, JSON.stringify(over));
    }
    insert({ name: "odd", network: "a b" });
  } finally {
    db.close();
  }
  using j = Journal.open(path);
  assert.throws(
    () => j.listKits(),
    (e) =>
      e instanceof JournalCorruptError && e.table === "kit" && e.key === "odd" &&
      e.column === "network",
  );
});
