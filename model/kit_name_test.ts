import assert from "node:assert/strict";
import {
  isLinkName,
  KIT_NAME_RULE,
  kitCommandProblem,
  kitNameProblem,
  RESERVED_KIT_NAMES,
} from "./kit_name.ts";

Deno.test({ name: "kit names: 1-63 lowercase letters, digits and '-'", permissions: {} }, () => {
  for (const ok of ["a", "fixture", "codex-2", `a${"b".repeat(62)}`]) {
    assert.equal(kitNameProblem(ok), null, ok);
    assert.ok(KIT_NAME_RULE.test(ok));
  }
  for (const bad of ["", "2x", "-a", "A", "a_b", "a.b", `a${"b".repeat(63)}`, "a b", "é"]) {
    assert.equal(
      kitNameProblem(bad),
      `invalid kit name ${
        JSON.stringify(bad)
      }: use 1-63 lowercase letters, digits and '-', starting with a letter (e.g. fixture)`,
    );
  }
});

Deno.test({
  name: "kit commands: the Kit-name rule, and no shadowing of marsh or the shells",
  permissions: {},
}, () => {
  assert.deepEqual(RESERVED_KIT_NAMES, ["marsh", "bash", "sh", "env"]);
  for (const ok of ["a", "claude", "codex-2", "shell", "marsh2"]) {
    assert.equal(kitCommandProblem(ok), null, ok);
  }
  assert.equal(kitCommandProblem("A"), kitNameProblem("A"));
  for (const name of RESERVED_KIT_NAMES) {
    assert.equal(
      kitCommandProblem(name),
      `invalid kit name "${name}": it would shadow ${name}; marsh, bash, sh, env are reserved`,
    );
  }
});

Deno.test({ name: "link names: marsh or a Kit name", permissions: {} }, () => {
  for (const ok of ["marsh", "claude", "codex-2", `a${"b".repeat(62)}`]) {
    assert.ok(isLinkName(ok), ok);
  }
  for (const bad of ["", "Marsh", "2x", "a_b", "../x", "a/b", `a${"b".repeat(63)}`]) {
    assert.equal(isLinkName(bad), false, bad);
  }
});
