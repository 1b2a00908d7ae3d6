/**
 * The Kit registry (issue 5 §2) through the real CLI and daemon, against a
 * real engine holding the fixture Kit image: `marsh kits add|ls|rm`,
 * duplicates and `--replace`, every rule at its boundary, a missing image
 * and an unreachable engine (nothing registered either way), `--home`,
 * and a caller on a branch socket refused.
 *
 * The engine is the one {@linkcode ensureEngine} provides (see
 * `tests/_engine.ts`): a missing engine fails these tests, never skips them.
 */

import assert from "node:assert/strict";
import { kitCheckFlags } from "../docker/flags.ts";
import { PERMISSIONS as permissions, type Result, ROOT, Sandbox, show } from "./_acceptance.ts";
import { ensureEngine, fixtureKit } from "./_engine.ts";

interface KitJson {
  name: string;
  image: string;
  image_id: string;
  entrypoint: string[] | null;
  network: string;
  env: string[];
  wall_s: number;
  home: string;
  created_unix_ms: number;
}

/** A sandbox whose CLI (and daemon) use the test engine, and the fixture image there. */
async function world(): Promise<{ sb: Sandbox; ref: string; id: string }> {
  const socket = await ensureEngine();
  const { ref, id } = await fixtureKit(socket);
  const sb = await Sandbox.create({ env: { DOCKER_HOST: `unix://${socket}` } });
  return { sb, ref, id };
}

async function kits(sb: Sandbox): Promise<KitJson[]> {
  const r = await sb.marsh(["kits", "ls", "--json"]);
  assert.equal(r.code, 0, show(r));
  return (JSON.parse(r.stdout) as { kits: KitJson[] }).kits;
}

function refused(r: Result, pattern: RegExp): void {
  assert.equal(r.code, 2, show(r));
  assert.equal(r.stdout, "", show(r));
  assert.match(r.stderr, pattern, show(r));
}

Deno.test({ name: "kits add, ls, ls --json and rm", permissions }, async () => {
  const { sb, ref, id } = await world();
  await using _ = sb;
  const empty = await sb.marsh(["kits", "ls"]);
  assert.equal(empty.code, 0, show(empty));
  assert.equal(
    empty.stdout,
    "no kits registered (add one with: marsh kits add NAME --image IMAGE)\n",
  );

  const before = Date.now();
  const add = await sb.marsh([
    "kits",
    "add",
    "tools",
    "--image",
    ref,
    "--env",
    "ANTHROPIC_API_KEY",
    "--env",
    "HTTPS_PROXY",
    "--entrypoint",
    '["sh","-c","exec \\"$0\\" \\"$@\\""]',
    "--wall",
    "600",
  ]);
  assert.equal(add.code, 0, show(add));
  const home = `${sb.home}/kits/tools/home`;
  assert.equal(
    add.stdout,
    `kit tools registered: ${ref} (${id.slice(0, 19)}), network=none, wall=600s, home ${home}\n`,
  );
  assert.equal(add.stderr, "");
  const st = Deno.statSync(home);
  assert.ok(st.isDirectory);
  assert.equal(st.mode! & 0o777, 0o700);
  assert.equal(Deno.statSync(`${sb.home}/kits`).mode! & 0o777, 0o700);

  const second = await sb.marsh(["kits", "add", "agent", "--image", id, "--network", "host"]);
  assert.equal(second.code, 0, show(second));

  const listed = await kits(sb);
  assert.deepEqual(listed.map((k) => k.name), ["agent", "tools"]);
  const tools = listed[1]!;
  assert.ok(tools.created_unix_ms >= before && tools.created_unix_ms <= Date.now());
  assert.deepEqual(tools, {
    name: "tools",
    image: ref,
    image_id: id,
    entrypoint: ["sh", "-c", 'exec "$0" "$@"'],
    network: "none",
    env: ["ANTHROPIC_API_KEY", "HTTPS_PROXY"],
    wall_s: 600,
    home,
    created_unix_ms: tools.created_unix_ms,
  });
  assert.deepEqual({ ...listed[0]!, created_unix_ms: 0 }, {
    name: "agent",
    image: id,
    image_id: id,
    entrypoint: null,
    network: "host",
    env: [],
    wall_s: 3600,
    home: `${sb.home}/kits/agent/home`,
    created_unix_ms: 0,
  });

  const text = await sb.marsh(["kits", "ls"]);
  assert.equal(text.code, 0, show(text));
  const width = Math.max(id.length, ref.length);
  assert.equal(
    text.stdout,
    `agent  ${id.padEnd(width)}  network=host  wall=3600s  home=${sb.home}/kits/agent/home\n` +
      `tools  ${ref.padEnd(width)}  network=none  wall=600s  home=${home}\n`,
  );

  Deno.writeTextFileSync(`${home}/settings.json`, "{}\n");
  const rm = await sb.marsh(["kits", "rm", "tools"]);
  assert.equal(rm.code, 0, show(rm));
  assert.equal(rm.stdout, `kit tools removed; home kept at ${home}\n`);
  assert.equal(Deno.readTextFileSync(`${home}/settings.json`), "{}\n", "the home is kept");
  assert.deepEqual((await kits(sb)).map((k) => k.name), ["agent"]);

  refused(
    await sb.marsh(["kits", "rm", "tools"]),
    /^marsh kits rm: no kit "tools"; registered: agent\n$/,
  );
  assert.equal((await sb.marsh(["kits", "rm", "agent"])).code, 0);
  refused(
    await sb.marsh(["kits", "rm", "agent"]),
    /^marsh kits rm: no kit "agent"; no Kit commands are registered\n$/,
  );

  // Adding the name again reuses the kept home.
  const again = await sb.marsh(["kits", "add", "tools", "--image", ref]);
  assert.equal(again.code, 0, show(again));
  assert.equal(Deno.readTextFileSync(`${home}/settings.json`), "{}\n");
});

Deno.test(
  { name: "kits add of a registered name fails unless --replace", permissions },
  async () => {
    const { sb, ref, id } = await world();
    await using _ = sb;
    assert.equal((await sb.marsh(["kits", "add", "tools", "--image", ref])).code, 0);
    const first = (await kits(sb))[0]!;

    refused(
      await sb.marsh(["kits", "add", "tools", "--image", id, "--wall", "5"]),
      /^marsh kits add: kit "tools" is already registered; replace it with: marsh kits add tools --replace --image IMAGE, or remove it with: marsh kits rm tools\n$/,
    );
    assert.deepEqual(await kits(sb), [first], "the refused add changed nothing");

    const replaced = await sb.marsh([
      "kits",
      "add",
      "tools",
      "--replace",
      "--image",
      id,
      "--wall",
      "5",
    ]);
    assert.equal(replaced.code, 0, show(replaced));
    assert.match(replaced.stdout, /^kit tools replaced: sha256:/);
    const now = await kits(sb);
    assert.equal(now.length, 1);
    assert.equal(now[0]!.image, id);
    assert.equal(now[0]!.wall_s, 5);

    // --replace of a name not yet registered just adds it.
    const fresh = await sb.marsh(["kits", "add", "other", "--replace", "--image", ref]);
    assert.equal(fresh.code, 0, show(fresh));
    assert.match(fresh.stdout, /^kit other registered: /);
  },
);

Deno.test({
  name: "kits add refuses bad names, env, networks and walls at the boundary",
  permissions,
}, async () => {
  const { sb, ref } = await world();
  await using _ = sb;
  const add = (...extra: string[]) => sb.marsh(["kits", "add", ...extra]);
  const cases: [string[], RegExp][] = [
    [["Tools", "--image", ref], /invalid kit name "Tools": use 1-63 lowercase letters/],
    [["2x", "--image", ref], /invalid kit name "2x"/],
    [[`a${"b".repeat(63)}`, "--image", ref], /invalid kit name/],
    [
      ["bash", "--image", ref],
      /invalid kit name "bash": it would shadow bash; marsh, bash, sh, env are reserved/,
    ],
    [["marsh", "--image", ref], /it would shadow marsh/],
    [["sh", "--image", ref], /it would shadow sh/],
    [["env", "--image", ref], /it would shadow env/],
    [
      ["k", "--image", ref, "--env", "MARSH_HOME"],
      /--env MARSH_HOME is refused: MARSH_\* variables/,
    ],
    [["k", "--image", ref, "--env", "DOCKER_HOST"], /--env DOCKER_HOST is refused: DOCKER_\*/],
    [["k", "--image", ref, "--env", "HOME"], /--env HOME is refused: a Kit's HOME is set/],
    [["k", "--image", ref, "--env", "A=1"], /invalid --env "A=1": give a variable's name/],
    [["k", "--image", ref, "--env", "1A"], /invalid --env "1A"/],
    [["k", "--image", ref, "--env", "A", "--env", "A"], /--env A is given twice/],
    [
      ["k", "--image", ref, "--network", "-x"],
      /invalid --network "-x": use none \(the default\), host/,
    ],
    [["k", "--image", ref, "--network", "a b"], /invalid --network "a b"/],
    [["k", "--image", ref, "--network", "container:x"], /invalid --network/],
    [
      ["k", "--image", ref, "--wall", "0"],
      /invalid --wall "0": give a whole number of seconds from 1 to 86400 \(default 3600\)/,
    ],
    [["k", "--image", ref, "--wall", "86401"], /invalid --wall "86401"/],
    [["k", "--image", ref, "--wall", "1.5"], /invalid --wall "1.5"/],
    [["k", "--image", ref, "--wall", "-5"], /invalid --wall "-5"/],
    [
      ["k", "--image", ref, "--entrypoint", "claude -p"],
      /invalid --entrypoint "claude -p": give one word, or several as a JSON array/,
    ],
    [["k", "--image", ref, "--entrypoint", "[1]"], /not a JSON array of strings/],
    [["k", "--image", "bad image"], /invalid --image "bad image"/],
    [
      ["k", "--image", ref, "--home", "rel/dir"],
      /invalid --home "rel\/dir": give an absolute path/,
    ],
  ];
  for (const [args, pattern] of cases) {
    const r = await add(...args);
    refused(r, /^marsh kits add: [^\n]+\n$/);
    assert.match(r.stderr, pattern, show(r));
  }
  const missing = await add("k");
  assert.equal(missing.code, 2, show(missing));
  assert.match(missing.stderr, /required option '--image <IMAGE>' not specified/);
  assert.deepEqual(await kits(sb), [], "nothing was registered");

  for (const wall of ["1", "86400"]) {
    const r = await add(`w${wall}`, "--image", ref, "--wall", wall, "--network", "my_net.1");
    assert.equal(r.code, 0, show(r));
  }
  const r = await add(`a${"b".repeat(62)}`, "--image", ref, "--env", "MY_MARSH_X");
  assert.equal(r.code, 0, show(r));
  assert.deepEqual(
    (await kits(sb)).map((k) => [k.name, k.wall_s, k.network, k.env]),
    [
      [`a${"b".repeat(62)}`, 3600, "none", ["MY_MARSH_X"]],
      ["w1", 1, "my_net.1", []],
      ["w86400", 86400, "my_net.1", []],
    ],
  );
});

Deno.test({
  name: "kits add of an image the engine lacks fails and registers nothing",
  permissions,
}, async () => {
  const { sb } = await world();
  await using _ = sb;
  for (const image of ["marsh-kit/nope:000000000000", `sha256:${"0".repeat(64)}`]) {
    const r = await sb.marsh(["kits", "add", "nope", "--image", image]);
    refused(
      r,
      new RegExp(
        `^marsh kits add: no image ${
          JSON.stringify(image).replace(/[.*+?^${}()|[\]\\/]/g, "\\$&")
        } in the engine at \\S+; build one with \`marsh kit build NAME --from-host\`.*; nothing was registered\\n$`,
      ),
    );
  }
  assert.deepEqual(await kits(sb), []);
  assert.throws(() => Deno.lstatSync(`${sb.home}/kits`), Deno.errors.NotFound);
});

Deno.test({
  name: "kits add with no engine answering fails with the fix and registers nothing",
  permissions,
}, async () => {
  const { sb, ref } = await world();
  await using _ = sb;
  // A socket file nobody listens on: bound, never listening.
  const dead = `${sb.scratch}/dead.sock`;
  const bind = await new Deno.Command("python3", {
    args: ["-c", "import socket,sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])", dead],
  }).output();
  assert.equal(bind.code, 0, new TextDecoder().decode(bind.stderr));
  for (const path of [dead, `${sb.scratch}/absent.sock`]) {
    const r = await sb.marsh(["kits", "add", "tools", "--image", ref], {
      env: { DOCKER_HOST: `unix://${path}` },
    });
    refused(
      r,
      new RegExp(
        `^marsh kits add: no Docker engine answers at ${path} \\((ECONNREFUSED|ENOENT)\\): ` +
          "start a private engine with `marsh engine start`, or set DOCKER_HOST=unix:///path/to/docker.sock; " +
          "nothing was registered\\n$",
      ),
    );
  }
  refused(
    await sb.marsh(["kits", "add", "tools", "--image", ref], {
      env: { DOCKER_HOST: "tcp://127.0.0.1:2375" },
    }),
    /^marsh kits add: DOCKER_HOST=tcp:\/\/127\.0\.0\.1:2375 is not supported/,
  );
  assert.deepEqual(await kits(sb), []);
});

Deno.test({
  name: "kits add --home: an existing directory outside .marsh and the control dir",
  permissions,
}, async () => {
  const { sb, ref } = await world();
  await using _ = sb;
  const chosen = `${sb.scratch}/homes/tools`;
  Deno.mkdirSync(chosen, { recursive: true });
  Deno.symlinkSync(chosen, `${sb.scratch}/link`);
  const ok = await sb.marsh([
    "kits",
    "add",
    "tools",
    "--image",
    ref,
    "--home",
    `${sb.scratch}/link`,
  ]);
  assert.equal(ok.code, 0, show(ok));
  assert.equal((await kits(sb))[0]!.home, chosen, "the real path is recorded");
  assert.throws(() => Deno.lstatSync(`${sb.home}/kits`), Deno.errors.NotFound);

  Deno.mkdirSync(`${sb.project}/.marsh/x`, { recursive: true });
  Deno.writeTextFileSync(`${sb.scratch}/file`, "");
  Deno.symlinkSync(`${sb.project}/.marsh/x`, `${sb.scratch}/sneaky`);
  const cases: [string, RegExp][] = [
    [`${sb.scratch}/missing`, /no such directory; make it first \(mkdir -p /],
    [`${sb.scratch}/file`, /not a directory/],
    [
      `${sb.project}/.marsh/x`,
      /it is inside a project's \.marsh directory, which only marsh may write/,
    ],
    [
      `${sb.scratch}/sneaky`,
      /\(resolves to "[^"]+\/project\/\.marsh\/x"\): it is inside a project's \.marsh/,
    ],
    [sb.home, /it holds marsh's control dir/],
    [sb.base, /it holds marsh's control dir/],
    [`${sb.home}/engine`, /it is inside marsh's control dir/],
    [`${sb.scratch}/a/../b`, /give a normalized path/],
  ];
  for (const [home, pattern] of cases) {
    const r = await sb.marsh(["kits", "add", "other", "--image", ref, "--home", home]);
    refused(r, /^marsh kits add: [^\n]+\n$/);
    assert.ok(
      r.stderr.startsWith(`marsh kits add: invalid --home ${JSON.stringify(home)}`),
      show(r),
    );
    assert.match(r.stderr, pattern, show(r));
  }
  assert.deepEqual((await kits(sb)).map((k) => k.name), ["tools"]);
});

Deno.test({ name: "a shell branch may not list, add or remove Kits", permissions }, async () => {
  const { sb, ref } = await world();
  await using _ = sb;
  assert.equal((await sb.marsh(["kits", "add", "tools", "--image", ref])).code, 0);
  const r = await sb.bash(
    `"$M" split -n -b a='"$M" kits ls' -b b='"$M" kits add x --image ${ref}' -b c='"$M" kits rm tools' |
       "$M" join -- sh -c 'cat >/dev/null; for l in a b c; do cat "$SPLIT_DIR/$l/status" "$SPLIT_DIR/$l/stdout" "$SPLIT_DIR/$l/stderr"; done'`,
  );
  assert.equal(r.code, 0, show(r));
  assert.equal(
    r.stdout,
    [
      "exited 2",
      "marsh kits ls: only the host may list Kit commands",
      "exited 2",
      "marsh kits add: only the host may register Kit commands",
      "exited 2",
      "marsh kits rm: only the host may remove Kit commands",
      "",
    ].join("\n"),
  );
  assert.deepEqual((await kits(sb)).map((k) => k.name), ["tools"], "nothing changed");
});

async function probe(flags: string[]): Promise<Record<string, string>> {
  const out = await new Deno.Command(Deno.env.get("MARSH_DENO") ?? Deno.execPath(), {
    args: [
      "run",
      ...flags,
      `--config=${ROOT}deno.json`,
      `${ROOT}tests/probes/capabilities.ts`,
      `${ROOT}README.md`,
    ],
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
  return JSON.parse(new TextDecoder().decode(out.stdout));
}

Deno.test({
  name: "the kits add check may use its socket and read the chosen home, nothing else",
  permissions,
}, async () => {
  const none = await probe(kitCheckFlags("/tmp/marsh-probe.sock", "/tmp/marsh-probe-home"));
  assert.deepEqual(
    [none.readProject, none.writeTmp, none.runGit, none.ffiLibc, none.net],
    ["refused", "refused", "refused", "refused", "refused"],
  );
  // With --home, it may read there (to resolve and stat it), and still write nothing.
  const home = await probe(
    kitCheckFlags("/tmp/marsh-probe.sock", "/tmp/marsh-probe-home", ROOT.replace(/\/$/, "")),
  );
  assert.equal(home.readProject, "granted");
  assert.equal(home.writeTmp, "refused");
});
