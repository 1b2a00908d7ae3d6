import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { JournalCorruptError } from "./errors.ts";
import { Journal } from "./journal.ts";
import { type KitRecord, KitRuleError } from "../model/kit_rules.ts";
import { DEFAULT_WALL_S, MAX_WALL_S } from "../model/limits.ts";
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
