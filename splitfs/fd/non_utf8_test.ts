/**
 * Names that are not UTF-8 (issue 11 §3): one the ignore rules exclude
 * passes silently through snapshot and capture, as it passes through
 * `git status`; any other is refused with its bytes shown and the fix.
 * Real files (made by bash, since a Deno path is UTF-8), real git.
 */

import assert from "node:assert/strict";
import fc from "fast-check";
import { assertProperty } from "../../tests/_property.ts";
import {
  exists,
  gitEnv,
  gitOk,
  gitProject,
  leaves,
  run,
  type Sandbox,
  sandbox,
  text,
  throwsA,
} from "../_testing.ts";
import { InvalidNameError } from "./dir.ts";
import { RejectedError } from "../errors.ts";
import { decodeEscaped } from "./escaped_utf8.ts";
import { IgnoreRules } from "../git/ignore_rules.ts";
import { FIX_IGNORABLE, FIX_RENAME } from "./non_utf8.ts";
import { SplitWorkspace } from "../workspace/workspace.ts";

const perms: Deno.PermissionOptions = {
  ffi: true,
  read: true,
  write: true,
  run: ["git", "bash", "awk", "umount"],
  env: ["PATH", "MARSH_SEED"],
};

const POLICIES = ["copy", "auto"] as const;
type Policy = typeof POLICIES[number];

function create(sb: Sandbox, forks: Policy, id = "s1"): SplitWorkspace {
  const ws = SplitWorkspace.create({ id, root: sb.root, env: { HOME: sb.home }, forks });
  if (ws.forkChoice.strategy !== (forks === "auto" ? "overlay" : "copy")) {
    ws.close();
    throw new Error(`forks: ${forks} took ${ws.forkChoice.strategy} forks`);
  }
  return ws;
}

/** Runs a bash script in `cwd`: `$'...'` makes the names Deno cannot. */
async function sh(sb: Sandbox, cwd: string, script: string): Promise<string> {
  return await run("bash", ["-c", `set -e\n${script}`], { home: sb.home, cwd });
}

const bytes = (...b: number[]) => new Uint8Array(b);
const enc = new TextEncoder();

Deno.test("decodeEscaped decodes UTF-8 and keeps every other byte apart", () => {
  const dec = new TextDecoder();
  assert.equal(decodeEscaped(new TextEncoder().encode("café/ü")), "café/ü");
  assert.equal(decodeEscaped(bytes(0xef, 0xbb, 0xbf, 0x61)), "\ufeffa", "a BOM is kept");
  assert.equal(decodeEscaped(bytes(0x62, 0xff, 0x63)), "b\udcffc");
  assert.equal(decodeEscaped(bytes(0x63, 0x61, 0x66, 0xe9)), "caf\udce9", "Latin-1 é");
  // Overlong, surrogate, out-of-range and truncated sequences: each byte on its own.
  assert.equal(decodeEscaped(bytes(0xc0, 0x80)), "\udcc0\udc80");
  assert.equal(decodeEscaped(bytes(0xed, 0xa0, 0x80)), "\udced\udca0\udc80");
  assert.equal(decodeEscaped(bytes(0xf4, 0x90, 0x80, 0x80)), "\udcf4\udc90\udc80\udc80");
  assert.equal(decodeEscaped(bytes(0xe2, 0x82, 0x61)), "\udce2\udc82a");
  assert.equal(decodeEscaped(bytes(0xff, 0xef, 0xbb, 0xbf)), "\udcff\ufeff");
  assert.equal(
    decodeEscaped(bytes(0xf0, 0x9f, 0x98, 0x80, 0xfe)),
    `${dec.decode(bytes(0xf0, 0x9f, 0x98, 0x80))}\udcfe`,
  );
});

Deno.test("decodeEscaped maps different bytes to different strings, and UTF-8 as TextDecoder does", (t) => {
  const dec = new TextDecoder("utf-8", { ignoreBOM: true });
  const enc = new TextEncoder();
  assertProperty(
    t,
    fc.property(fc.uint8Array({ maxLength: 12 }), fc.uint8Array({ maxLength: 12 }), (a, b) => {
      const same = a.length === b.length && a.every((x, i) => x === b[i]);
      assert.equal(decodeEscaped(a) === decodeEscaped(b), same);
    }),
    { numRuns: 2000 },
  );
  assertProperty(
    t,
    fc.property(fc.string({ unit: "grapheme" }), (s) => {
      assert.equal(decodeEscaped(enc.encode(s)), dec.decode(enc.encode(s)));
    }),
    { numRuns: 500 },
  );
});

Deno.test({
  name: "IgnoreRules agrees with git check-ignore on names that are not UTF-8",
  permissions: perms,
}, async () => {
  using sb = sandbox();
  await gitProject(sb, { "a.txt": "a\n" });
  await sh(
    sb,
    sb.root,
    String.raw`
printf '*.bin\njunk*/\n'"$(printf 'lit\xff')"'\n?x\n!keep\xfe.bin\n' > .gitignore
mkdir -p $'junk\xfa' sub
printf x > $'junk\xfa/in'
for n in $'a\xff.bin' $'lit\xff' $'lit\xfe' $'\xfdx' $'\xfd\xfdx' $'keep\xfe.bin' $'plain\xfc' $'sub/\xfb.bin'; do
  printf x > "$n"
done`,
  );
  // The rules as marsh builds them, on each name's escaped form.
  const rules = IgnoreRules.load({ globalExcludes: null, infoExclude: null });
  const root = rules.enter("", Deno.readFileSync(`${sb.root}/.gitignore`));
  const sub = root.enter("sub", null);
  const cases: [string, number[], boolean][] = [
    ["a\\xff.bin", [0x61, 0xff, 0x2e, 0x62, 0x69, 0x6e], false],
    ["lit\\xff", [0x6c, 0x69, 0x74, 0xff], false],
    ["lit\\xfe", [0x6c, 0x69, 0x74, 0xfe], false],
    ["\\xfdx", [0xfd, 0x78], false],
    ["\\xfd\\xfdx", [0xfd, 0xfd, 0x78], false],
    ["keep\\xfe.bin", [0x6b, 0x65, 0x65, 0x70, 0xfe, 0x2e, 0x62, 0x69, 0x6e], false],
    ["plain\\xfc", [0x70, 0x6c, 0x61, 0x69, 0x6e, 0xfc], false],
    ["junk\\xfa", [0x6a, 0x75, 0x6e, 0x6b, 0xfa], true],
  ];
  const ours = new Map<string, boolean>();
  for (const [shown, raw, isDir] of cases) {
    ours.set(shown, root.isIgnored(decodeEscaped(new Uint8Array(raw)), isDir));
  }
  ours.set(
    "sub/\\xfb.bin",
    sub.isIgnored(`sub/${decodeEscaped(bytes(0xfb, 0x2e, 0x62, 0x69, 0x6e))}`, false),
  );
  // Git's verdicts: `git check-ignore` reads the raw paths and prints those it ignores.
  const input = [...cases.map(([, raw]) => raw), [
    ...enc.encode("sub/"),
    0xfb,
    0x2e,
    0x62,
    0x69,
    0x6e,
  ]]
    .flatMap((raw) => [...raw, 0]);
  const child = new Deno.Command("git", {
    args: ["check-ignore", "--no-index", "-z", "--stdin"],
    cwd: sb.root,
    clearEnv: true,
    env: gitEnv({ home: sb.home }),
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const w = child.stdin.getWriter();
  await w.write(new Uint8Array(input));
  await w.close();
  const out = await child.output();
  // The sandbox's cleanup lists directories by UTF-8 names only.
  await sh(sb, sb.root, "rm -r $'junk\\xfa'");
  assert.ok(out.code === 0 || out.code === 1, new TextDecoder().decode(out.stderr));
  const ignored = new Set(splitNul(out.stdout).map(show));
  assert.ok(ignored.size > 0);
  for (const [shown, v] of ours) assert.equal(v, ignored.has(shown), shown);
  // Spot checks, so a shared mistake cannot hide: `?` is one byte, a literal pattern is exact.
  assert.equal(ours.get("lit\\xff"), true);
  assert.equal(ours.get("lit\\xfe"), false);
  assert.equal(ours.get("\\xfdx"), true);
  assert.equal(ours.get("\\xfd\\xfdx"), false);
  assert.equal(ours.get("keep\\xfe.bin"), false);
});

/** NUL-terminated byte strings. */
function splitNul(b: Uint8Array): Uint8Array[] {
  const out: Uint8Array[] = [];
  let start = 0;
  for (let i = 0; i < b.length; i++) {
    if (b[i] === 0) {
      out.push(b.subarray(start, i));
      start = i + 1;
    }
  }
  return out;
}

/** Bytes as marsh shows a name: printable ASCII kept, every other byte as `\xNN`. */
function show(raw: Uint8Array): string {
  return Array.from(
    raw,
    (b) => b >= 0x20 && b < 0x7f ? String.fromCharCode(b) : `\\x${b.toString(16).padStart(2, "0")}`,
  ).join("");
}

for (const forks of POLICIES) {
  Deno.test({
    name: `snapshot and capture pass over ignored names that are not UTF-8 (forks: ${forks})`,
    permissions: perms,
  }, async () => {
    using sb = sandbox();
    await gitProject(sb, { "a.txt": "a\n", ".gitignore": "build/\n*.log\njunk*/\n" });
    await sh(
      sb,
      sb.root,
      String.raw`
mkdir -p build/sub .pytest_cache
printf '*\n' > .pytest_cache/.gitignore
printf x > $'build/caf\xe9.o'; printf x > $'build/sub/\xff'
printf x > $'x\xfe.log'
printf x > $'.pytest_cache/\xfd'`,
    );
    // Git shows none of them.
    const status = await gitOk(sb.root, ["status", "--porcelain"], { home: sb.home });
    assert.equal(status, "");
    for (const id of ["s1", "s2"]) {
      using ws = create(sb, forks, id);
      assert.deepEqual(leaves(`${sb.root}/.marsh/split/${id}/base`), [".gitignore", "a.txt"]);
      const fork = ws.fork("a");
      await sh(
        sb,
        fork.path,
        String.raw`
printf b > a.txt
printf x > $'new\xfc.log'
mkdir -p $'junk\xfb/deeper'; printf x > $'junk\xfb/deeper/\xfa'
printf x > $'.pytest_cache/\xf9'`,
      );
      const summary = ws.capture("a");
      assert.equal(summary.files, 1);
      assert.equal(summary.rejected, null);
      assert.equal(text(`${sb.root}/.marsh/split/${id}/out/a/files`), "M\ta.txt\n");
      ws.remove();
    }
  });
}

for (const forks of POLICIES) {
  Deno.test({
    name:
      `a name that is not UTF-8 and not ignored is refused with its bytes and the fix (forks: ${forks})`,
    permissions: perms,
  }, async () => {
    using sb = sandbox();
    await gitProject(sb, { "a.txt": "a\n", ".gitignore": "*.log\n" });
    await sh(sb, sb.root, String.raw`mkdir dir; printf x > $'dir/caf\xe9.txt'`);
    const err = throwsA(() => create(sb, forks), InvalidNameError);
    assert.equal(
      err.message,
      `file name is not valid UTF-8 in ${sb.root}/dir: "caf\\xe9.txt"; ${FIX_IGNORABLE}`,
    );
    assert.equal(exists(`${sb.root}/.marsh/split/s1`), false);
    // Ignoring it is the way out.
    Deno.writeTextFileSync(`${sb.root}/.gitignore`, "*.log\ncaf*\n");
    await gitOk(sb.root, ["commit", "-qam", "ignore it"], { home: sb.home });
    using ws = create(sb, forks);
    const fork = ws.fork("a");
    await sh(sb, fork.path, String.raw`printf x > $'new\xfe.txt'`);
    const rejected = throwsA(() => ws.capture("a"), RejectedError);
    assert.equal(rejected.reason, `file name is not valid UTF-8: a/new\\xfe.txt; ${FIX_IGNORABLE}`);
    // A directory the rules exclude is still searched for a nested `.git`, whatever its name.
    const nested = ws.fork("nested");
    await sh(
      sb,
      nested.path,
      String.raw`mkdir -p $'caf\xe9/\xff/.git'; printf x > $'caf\xe9/\xff/.git/HEAD'`,
    );
    const git = throwsA(() => ws.capture("nested"), RejectedError);
    assert.equal(git.reason, "nested .git at caf\\xe9/\\xff/.git");
    ws.remove();
  });
}

Deno.test({
  name: "without ignore rules (no Git) a name that is not UTF-8 is refused with the rename fix",
  permissions: perms,
}, async () => {
  using sb = sandbox();
  Deno.writeTextFileSync(`${sb.root}/a.txt`, "a\n");
  await sh(sb, sb.root, String.raw`printf x > $'\xff.log'`);
  const err = throwsA(() => create(sb, "copy"), InvalidNameError);
  assert.equal(
    err.message,
    `file name is not valid UTF-8 in ${sb.root}: "\\xff.log"; ${FIX_RENAME}`,
  );
});
