import assert from "node:assert/strict";
import { isGitName } from "./snapshot.ts";

Deno.test("isGitName matches .git, its case variants and NTFS look-alikes only", () => {
  for (
    const name of [
      ".git",
      ".GIT",
      ".Git",
      ".git.",
      ".git ",
      ".git. .",
      "git~1",
      "GIT~1",
      "GIT~1.",
      "x\\.git",
    ]
  ) {
    assert.equal(isGitName(name), true, name);
  }
  for (
    const name of [
      ".gitignore",
      ".gitmodules",
      ".github",
      "git",
      ".git~1",
      ".gitx",
      "git~2",
      "a.git",
    ]
  ) {
    assert.equal(isGitName(name), false, name);
  }
});
