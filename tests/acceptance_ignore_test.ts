/**
 * Acceptance (issue 11 §1): a branch that runs the test suite leaves
 * pytest's cache in its fork; the project ignores that cache through the
 * `.gitignore` pytest wrote inside it (`*`), so the patch holds the source
 * edit alone and applies with `git apply --3way`.
 */

import assert from "node:assert/strict";
import { handleId, PERMISSIONS, Sandbox, show } from "./_acceptance.ts";

const APP = "def f():\n    return 1\n";

/**
 * What pytest does to its cache: it makes `.pytest_cache` with its
 * `.gitignore`, `README.md` and `CACHEDIR.TAG` only when the directory is
 * missing, then writes `v/cache/nodeids` and `v/cache/lastfailed`.
 */
const FAKE_PYTEST = String.raw`#!/bin/sh
set -e
if [ ! -d .pytest_cache ]; then
  mkdir .pytest_cache
  printf '# Created by pytest automatically.\n*\n' > .pytest_cache/.gitignore
  printf '# pytest cache directory #\n' > .pytest_cache/README.md
  printf 'Signature: 8a477f597d28d172789f06886806bc55\n' > .pytest_cache/CACHEDIR.TAG
fi
mkdir -p .pytest_cache/v/cache
printf '[\n  "tests/test_app.py::test_f"\n]\n' > .pytest_cache/v/cache/nodeids
printf '{\n  "tests/test_app.py::test_f": true\n}\n' > .pytest_cache/v/cache/lastfailed
`;

Deno.test({
  name: "a branch that runs pytest: the patch has the source edit only and applies with --3way",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create({
    files: { "src/app.py": APP, "tests/test_app.py": "def test_f():\n    pass\n" },
  });
  const pytest = `${sb.scratch}/pytest`;
  Deno.writeTextFileSync(pytest, FAKE_PYTEST);
  Deno.chmodSync(pytest, 0o755);
  // The user ran the tests once before: the project has the cache, which Git ignores.
  const first = await sb.bash(`"${pytest}"`);
  assert.equal(first.code, 0, show(first));
  assert.equal(await sb.git("status", "--porcelain", "--ignored"), "!! .pytest_cache/\n");

  const split = await sb.marsh([
    "split",
    "-b",
    `test=sed -i 's/return 1/return 2/' src/app.py && "${pytest}"`,
  ]);
  assert.equal(split.code, 0, show(split));
  const id = handleId(split.stdout);
  const s = await sb.split(id);
  assert.ok(s);
  assert.deepEqual(s.branches.map((b) => b.status), ["exited 0"]);
  assert.equal(Deno.readTextFileSync(`${s.dir}/out/test/files`), "M\tsrc/app.py\n");
  const patch = Deno.readTextFileSync(`${s.dir}/out/test/diff.patch`);
  assert.doesNotMatch(patch, /pytest_cache/);

  const join = await sb.bash(
    String.raw`"$M" join <<<"$H" -- sh -c '
      cat >/dev/null
      GIT_ALTERNATE_OBJECT_DIRECTORIES="$SPLIT_OBJECTS" git apply --3way "$SPLIT_DIR/test/diff.patch"'`,
    { env: { H: split.stdout.trim() } },
  );
  assert.equal(join.code, 0, show(join));
  assert.equal((await sb.split(id))?.state, "joined");
  assert.equal(Deno.readTextFileSync(`${sb.project}/src/app.py`), APP.replace("1", "2"));
  assert.equal(
    await sb.git("status", "--porcelain", "--ignored"),
    "M  src/app.py\n!! .marsh/\n!! .pytest_cache/\n",
  );
});
