/**
 * The rules every Kit registration obeys, as the CLI, the daemon and the
 * journal apply them (`kit_rules.ts`).
 */

import assert from "node:assert/strict";
import {
  checkKitEnv,
  checkKitHome,
  checkKitName,
  checkKitNetwork,
  checkKitWall,
  defaultKitHome,
  KitRuleError,
  parseKitEntrypoint,
  parseKitWall,
} from "./kit_rules.ts";

function refuses(fn: () => unknown, pattern: RegExp): void {
  assert.throws(fn, (e) => e instanceof KitRuleError && pattern.test(e.message));
}

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
