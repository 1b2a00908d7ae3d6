/**
 * The two environment-name rules: what can name an entry of an environment
 * at all, and what `--env` (and a launch's Kit `env`) may pass by name.
 */

import assert from "node:assert/strict";
import {
  ENV_NAME_RULE,
  isEnvEntryName,
  isEnvName,
  isReservedEnvName,
  KIT_SET_ENV_NAMES,
  MAX_ENV_NAME,
  RESERVED_ENV_PREFIXES,
} from "./env_name.ts";

Deno.test({ name: "env names: a shell variable's name, 1-128 characters", permissions: {} }, () => {
  for (const ok of ["A", "_", "_X", "a1", "ANTHROPIC_API_KEY", "A".repeat(MAX_ENV_NAME)]) {
    assert.ok(isEnvName(ok), ok);
    assert.ok(ENV_NAME_RULE.test(ok), ok);
  }
  for (
    const bad of ["", "1A", "A-B", "A.B", "A=1", "A B", "É", "A\0", "A".repeat(MAX_ENV_NAME + 1)]
  ) {
    assert.equal(isEnvName(bad), false, bad);
  }
});

Deno.test({ name: "env entry names: anything but empty, '=' or NUL", permissions: {} }, () => {
  for (const ok of ["A", "A.B", "1A", "a-b", "É", "A B", "x".repeat(10_000)]) {
    assert.ok(isEnvEntryName(ok), ok);
  }
  for (const bad of ["", "A=B", "=", "A\0B"]) assert.equal(isEnvEntryName(bad), false, bad);
  // Every variable name is an entry name.
  assert.ok(isEnvEntryName("A".repeat(MAX_ENV_NAME)));
});

Deno.test({ name: "env names marsh keeps: MARSH_*, DOCKER_*, HOME, PATH", permissions: {} }, () => {
  assert.deepEqual(RESERVED_ENV_PREFIXES, ["MARSH_", "DOCKER_"]);
  assert.deepEqual(KIT_SET_ENV_NAMES, ["HOME", "PATH"]);
  for (const n of ["HOME", "home", "Path", "MARSH_JOB", "marsh_x", "DOCKER_HOST", "docker_"]) {
    assert.ok(isReservedEnvName(n), n);
  }
  for (const n of ["HOMEDIR", "LANG", "MY_MARSH_X", "MARSH", "DOCKER", "XPATH"]) {
    assert.equal(isReservedEnvName(n), false, n);
  }
});
