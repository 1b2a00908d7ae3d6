/**
 * The property tests' seeds (`tests/_property.ts`), through a real child
 * `deno test` of `tests/probes/seeded_property.ts`: each run prints its
 * seed, `MARSH_SEED` draws the same values again, and a failure says the
 * command that reproduces it, which does.
 */

import assert from "node:assert/strict";
import { finish, type Result, ROOT, show } from "./_acceptance.ts";
import { parseSeed, reproduceCommand } from "./_property.ts";

const PROBE = "tests/probes/seeded_property.ts";

/** `sh -c COMMAND` in the repository, with `extra` in the environment. */
async function sh(command: string, extra: Record<string, string>): Promise<Result> {
  const env: Record<string, string> = { ...Deno.env.toObject(), NO_COLOR: "1", ...extra };
  if (extra.MARSH_SEED === undefined) delete env.MARSH_SEED;
  const child = new Deno.Command("sh", {
    args: ["-c", command],
    cwd: ROOT,
    env,
    clearEnv: true,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  return await finish(child, command, 120_000);
}

/** The probe, as a test file run on its own. */
function probe(extra: Record<string, string> = {}): Promise<Result> {
  return sh(`./bin/deno test -A ${PROBE}`, extra);
}

function drawn(r: Result): string[] {
  return r.stdout.split("\n").filter((l) => l.startsWith("drawn "));
}

function printedSeed(r: Result): number {
  const m = /^property seed (-?\d+) \(MARSH_SEED=\1 re-runs it\)$/m.exec(r.stdout);
  assert.ok(m, show(r));
  return Number(m[1]);
}

Deno.test("the same MARSH_SEED draws the same values; another seed draws others", async () => {
  const a = await probe({ MARSH_SEED: "424242" });
  const b = await probe({ MARSH_SEED: "424242" });
  const c = await probe({ MARSH_SEED: "424243" });
  for (const r of [a, b, c]) assert.equal(r.code, 0, show(r));
  assert.equal(printedSeed(a), 424242);
  assert.equal(drawn(a).length, 20, show(a));
  assert.deepEqual(drawn(b), drawn(a));
  assert.equal(printedSeed(c), 424243);
  assert.notDeepEqual(drawn(c), drawn(a));
});

Deno.test("without MARSH_SEED each run prints the random seed it used, which replays it", async () => {
  const a = await probe();
  assert.equal(a.code, 0, show(a));
  const seed = printedSeed(a);
  const again = await probe({ MARSH_SEED: String(seed) });
  assert.deepEqual(drawn(again), drawn(a));
});

Deno.test("a failure ends with the command that reproduces it, and that command does", async () => {
  const failed = await probe({ PROBE_FAIL: "1" });
  assert.equal(failed.code, 1, show(failed));
  const seed = printedSeed(failed);
  const command = reproduceCommand({
    name: "probe: a seeded property",
    origin: new URL(`../${PROBE}`, import.meta.url).href,
  }, seed);
  assert.equal(
    command,
    `MARSH_SEED=${seed} ./bin/deno test -A '${PROBE}' --filter 'probe: a seeded property'`,
  );
  assert.ok(failed.stdout.includes(`Reproduce with: ${command}\n`), show(failed));
  const counterexample = /^Counterexample: .*$/m.exec(failed.stdout)?.[0];
  assert.ok(counterexample, show(failed));

  const replayed = await sh(command, { PROBE_FAIL: "1" });
  assert.equal(replayed.code, 1, show(replayed));
  assert.equal(/^Counterexample: .*$/m.exec(replayed.stdout)?.[0], counterexample);
  assert.deepEqual(drawn(replayed), drawn(failed));
});

Deno.test("a MARSH_SEED that is not a 32-bit integer is refused with the reason", async () => {
  for (const bad of ["abc", "1.5", "4294967296", "12x"]) {
    assert.throws(
      () => parseSeed(bad),
      /^Error: MARSH_SEED=.*: expected the integer a property test printed/,
    );
  }
  assert.equal(parseSeed("-7"), -7);
  const r = await probe({ MARSH_SEED: "abc" });
  assert.notEqual(r.code, 0, show(r));
  assert.match(
    `${r.stdout}${r.stderr}`,
    /MARSH_SEED=abc: expected the integer a property test printed/,
  );
});
