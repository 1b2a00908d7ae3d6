import assert from "node:assert/strict";
import { checkKitName, KitBuildError, kitTag } from "./kit_build.ts";

Deno.test("kit names: lowercase letters, digits and '-', 1-63, a letter first", () => {
  for (const ok of ["a", "fixture", "my-kit-2", `a${"b".repeat(62)}`]) checkKitName(ok);
  for (
    const bad of [
      "",
      "Fixture",
      "2kit",
      "-kit",
      "kit_1",
      "kit.1",
      "kit/x",
      `a${"b".repeat(63)}`,
      "ki t",
    ]
  ) {
    assert.throws(() => checkKitName(bad), KitBuildError, bad);
  }
});

Deno.test("the tag is the kit's repository and the tar hash's first 12 hex digits", () => {
  const hex = "0123456789abcdef".repeat(4);
  assert.deepEqual(kitTag("fixture", hex), {
    repo: "marsh-kit/fixture",
    tag: "0123456789ab",
    ref: "marsh-kit/fixture:0123456789ab",
  });
});
