/**
 * Each entrypoint runs with the narrowest flags that work (DESIGN.md §4):
 * a probe under each entrypoint's exact flags shows what is refused.
 */
import assert from "node:assert/strict";
import { cliFlags, daemonFlags, splitfsFlags } from "../protocol/entrypoints.ts";

const root = new URL("../", import.meta.url).pathname;
const deno = Deno.env.get("MARSH_DENO") ?? Deno.execPath();

async function probe(flags: string[]): Promise<Record<string, string>> {
  const out = await new Deno.Command(deno, {
    args: [
      "run",
      ...flags,
      `--config=${root}deno.json`,
      `${root}tests/probes/capabilities.ts`,
      `${root}README.md`,
    ],
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
  return JSON.parse(new TextDecoder().decode(out.stdout));
}

const perms: Deno.PermissionOptions = { run: true, read: true, write: true, env: true };

Deno.test({
  name: "the CLI can read no project file and load no library",
  permissions: perms,
}, async () => {
  const home = Deno.makeTempDirSync({ prefix: "marsh-home-" });
  try {
    const got = await probe(cliFlags(home));
    assert.equal(got.readProject, "refused");
    assert.equal(got.writeTmp, "refused");
    assert.equal(got.ffiLibc, "refused");
    assert.equal(got.ffiOther, "refused");
    assert.equal(got.net, "refused");
    assert.equal(got.envHome, "granted");
    // `join -- CMD` runs any command the user names, so running is granted.
    assert.equal(got.runGit, "granted");
  } finally {
    Deno.removeSync(home, { recursive: true });
  }
});

Deno.test({ name: "the launcher passes exactly the CLI's flags", permissions: perms }, () => {
  const launcher = Deno.readTextFileSync(`${root}marsh`);
  const scoped = (f: string) => /^--allow-(net|read|write)=/.test(f);
  for (const flag of cliFlags("$home").filter((f) => !scoped(f))) {
    const shown = flag.replace("$home", '"$home"');
    assert.ok(launcher.includes(shown), `launcher lacks ${shown}`);
  }
  assert.deepEqual(
    cliFlags("$home", "$MARSH_SOCK").filter(scoped),
    [
      "--allow-read=$home,$MARSH_SOCK",
      "--allow-write=$home,$MARSH_SOCK",
      "--allow-net=unix:$home/marshd.sock,unix:$MARSH_SOCK",
    ],
  );
  assert.ok(launcher.includes('--allow-net="$sockets"'));
  assert.ok(launcher.includes('sockets="unix:$home/marshd.sock"'));
  assert.ok(launcher.includes('sockets="$sockets,unix:$MARSH_SOCK"'));
  assert.ok(launcher.includes('--allow-read="$paths" --allow-write="$paths"'));
  assert.ok(launcher.includes('paths="$home"'));
  assert.ok(launcher.includes('paths="$paths,$MARSH_SOCK"'));
  assert.ok(
    !/--allow-(all|ffi)|--allow-sys(?!=uid\s)|\s-A\s/.test(launcher),
    "launcher grants more than the CLI needs",
  );
});

Deno.test({
  name: "the split-filesystem service may load libc and nothing else",
  permissions: perms,
}, async () => {
  const got = await probe(splitfsFlags());
  assert.equal(got.ffiLibc, "granted");
  assert.equal(got.ffiOther, "refused");
  assert.equal(got.readProject, "refused");
  assert.equal(got.writeTmp, "refused");
  assert.equal(got.runGit, "refused");
  assert.equal(got.net, "refused");
});

Deno.test({
  name: "the daemon may use its control dir and start Deno, and load no library",
  permissions: perms,
}, async () => {
  const home = Deno.makeTempDirSync({ prefix: "marsh-home-" });
  try {
    const got = await probe(daemonFlags(home, deno, 16));
    assert.equal(got.ffiLibc, "refused");
    assert.equal(got.ffiOther, "refused");
    assert.equal(got.readProject, "refused");
    assert.equal(got.writeTmp, "refused");
    assert.equal(got.runGit, "refused");
    assert.equal(got.net, "refused");
  } finally {
    Deno.removeSync(home, { recursive: true });
  }
});
