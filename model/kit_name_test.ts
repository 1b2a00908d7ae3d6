import assert from "node:assert/strict";
import { KIT_NAME_RULE, kitNameProblem } from "./kit_name.ts";

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
