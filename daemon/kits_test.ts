import assert from "node:assert/strict";
import { Journal } from "../journal/journal.ts";
import type { KitsAddRequest } from "../protocol/daemon.ts";
import type { Authority } from "./conn.ts";
import { KitRegistry } from "./kits.ts";
import { RequestError } from "./request_error.ts";

const host: Authority = { kind: "host" };
const branch: Authority = { kind: "branch", split: "s1", label: "a", session: "host" };
const ID = `sha256:${"cd".repeat(32)}`;

// Made with the runner's permissions; each test may touch only this directory.
const scratch = Deno.makeTempDirSync({ prefix: "marsh-kits-" });
globalThis.addEventListener("unload", () => Deno.removeSync(scratch, { recursive: true }));
const permissions: Deno.PermissionOptions = { read: [scratch], write: [scratch] };

function request(name: string, over: Partial<KitsAddRequest> = {}): KitsAddRequest {
  return {
    v: 1,
    t: "kits.add",
    name,
    image: `marsh-kit/${name}:0123abcd4567`,
    imageId: ID,
    entrypoint: null,
    network: "none",
    env: [],
    wallS: 3600,
    home: null,
    replace: false,
    ...over,
  };
}

async function world(): Promise<
  { home: string; journal: Journal; kits: KitRegistry } & AsyncDisposable
> {
  const home = await Deno.makeTempDir({ dir: scratch });
  const journal = Journal.open(`${home}/journal.db`);
  return {
    home,
    journal,
    kits: new KitRegistry({ journal, home, now: () => 42 }),
    async [Symbol.asyncDispose]() {
      journal.close();
      await Deno.remove(home, { recursive: true });
    },
  };
}

function refusal(fn: () => unknown, code: number, pattern: RegExp): void {
  assert.throws(fn, (e) => e instanceof RequestError && e.code === code && pattern.test(e.message));
}

Deno.test({
  name: "registry: add makes the default home 0700 and journals the kit",
  permissions,
}, async () => {
  await using w = await world();
  const r = w.kits.add(host, request("tools", { env: ["A"], wallS: 60 }));
  const home = `${w.home}/kits/tools/home`;
  assert.deepEqual(r, {
    replaced: false,
    kit: {
      name: "tools",
      image: "marsh-kit/tools:0123abcd4567",
      image_id: ID,
      entrypoint: null,
      network: "none",
      env: ["A"],
      wall_s: 60,
      home,
      created_unix_ms: 42,
    },
  });
  for (const dir of [`${w.home}/kits`, `${w.home}/kits/tools`, home]) {
    assert.equal(Deno.statSync(dir).mode! & 0o777, 0o700, dir);
  }
  assert.deepEqual(w.kits.list(host), [r.kit]);
  assert.equal(w.journal.getKit("tools")?.home, home);
});

Deno.test({
  name: "registry: duplicates, --replace, and removal keeping the home",
  permissions,
}, async () => {
  await using w = await world();
  w.kits.add(host, request("tools"));
  refusal(
    () => w.kits.add(host, request("tools")),
    2,
    /^kit "tools" is already registered; replace it with/,
  );
  const again = w.kits.add(host, request("tools", { wallS: 5, replace: true }));
  assert.equal(again.replaced, true);
  assert.equal(w.journal.getKit("tools")?.wallS, 5);

  const removed = w.kits.remove(host, "tools");
  assert.equal(removed.name, "tools");
  assert.ok(Deno.statSync(removed.home).isDirectory, "the home is kept");
  refusal(
    () => w.kits.remove(host, "tools"),
    2,
    /^no kit "tools"; no Kit commands are registered$/,
  );
  w.kits.add(host, request("b"));
  w.kits.add(host, request("a"));
  refusal(() => w.kits.remove(host, "c"), 2, /^no kit "c"; registered: a, b$/);
});

Deno.test({
  name: "registry: only the host may list, register or remove",
  permissions,
}, async () => {
  await using w = await world();
  w.kits.add(host, request("tools"));
  refusal(() => w.kits.list(branch), 2, /^only the host may list Kit commands$/);
  refusal(() => w.kits.add(branch, request("x")), 2, /^only the host may register Kit commands$/);
  refusal(() => w.kits.remove(branch, "tools"), 2, /^only the host may remove Kit commands$/);
  assert.deepEqual(w.journal.listKits().map((k) => k.name), ["tools"]);
  assert.throws(() => Deno.lstatSync(`${w.home}/kits/x`), Deno.errors.NotFound);
});

Deno.test({
  name: "registry: a field that breaks its rule is refused before any effect",
  permissions,
}, async () => {
  await using w = await world();
  const cases: [KitsAddRequest, RegExp][] = [
    [request("Bad"), /^invalid kit name "Bad"/],
    [request("sh"), /shadow sh/],
    [request("k", { imageId: "sha256:nothex" }), /^invalid image id/],
    [request("k", { wallS: 0 }), /^invalid --wall "0"/],
    [request("k", { wallS: 86_401 }), /^invalid --wall "86401"/],
    [request("k", { env: ["DOCKER_HOST"] }), /DOCKER_\*/],
    [request("k", { network: "a b" }), /^invalid --network/],
    [request("k", { entrypoint: [] }), /^invalid --entrypoint/],
    [request("k", { home: "/p/.marsh/x" }), /inside a project's \.marsh/],
    [request("k", { home: "relative" }), /invalid home "relative"|give an absolute path/],
  ];
  for (const [req, pattern] of cases) refusal(() => w.kits.add(host, req), 2, pattern);
  refusal(() => w.kits.add(host, request("k", { home: w.home })), 2, /holds marsh's control dir/);
  refusal(
    () => w.kits.add(host, request("k", { home: `${w.home}/engine` })),
    2,
    /inside marsh's control dir/,
  );
  assert.deepEqual(w.journal.listKits(), []);
  assert.throws(() => Deno.lstatSync(`${w.home}/kits`), Deno.errors.NotFound);
});

Deno.test({
  name: "registry: a symlink where the home should be is refused",
  // Deno makes symlinks only with unscoped read and write.
  permissions: { read: true, write: true },
}, async () => {
  await using w = await world();
  Deno.mkdirSync(`${w.home}/kits/tools`, { recursive: true });
  Deno.symlinkSync(scratch, `${w.home}/kits/tools/home`);
  refusal(() => w.kits.add(host, request("tools")), 2, /home is a symlink; remove it/);
  assert.deepEqual(w.journal.listKits(), []);
});

Deno.test({
  name: "registry: a chosen home is recorded as given",
  permissions,
}, async () => {
  await using w = await world();
  const r = w.kits.add(host, request("tools", { home: "/srv/homes/tools" }));
  assert.equal(r.kit.home, "/srv/homes/tools");
  assert.throws(() => Deno.lstatSync(`${w.home}/kits`), Deno.errors.NotFound);
});
