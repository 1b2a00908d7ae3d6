/**
 * The daemon and its children are given only the variables the entrypoint
 * registry names (protocol/entrypoints.ts, `passes` and `sets`): a variable
 * in the CLI's environment that no entry names reaches none of them. Seen
 * in `/proc/<pid>/environ` of the real processes (through cat: Deno reads
 * /proc only with --allow-all).
 */
import assert from "node:assert/strict";
import { type EntryName, ENTRYPOINTS } from "../protocol/entrypoints.ts";
import { Sandbox, show } from "./_acceptance.ts";

const SECRET = "MARSH_PROBE_SECRET";

async function environNames(pid: number): Promise<string[]> {
  const out = await new Deno.Command("cat", { args: [`/proc/${pid}/environ`], stdout: "piped" })
    .output();
  assert.equal(out.code, 0, `cannot read /proc/${pid}/environ`);
  return new TextDecoder().decode(out.stdout).split("\0").filter((e) => e !== "")
    .map((e) => e.slice(0, e.indexOf("="))).sort();
}

function allowed(name: EntryName): Set<string> {
  const entry = ENTRYPOINTS[name];
  assert.notEqual(entry.passes, "all", `${name} must name what it is given`);
  return new Set([...(entry.passes as readonly string[]), ...entry.sets]);
}

Deno.test({
  name: "the daemon, its worker and its service are given only the variables they name",
  permissions: { read: true, write: true, run: true, env: true },
}, async () => {
  await using sb = await Sandbox.create({ env: { [SECRET]: "s3cret" } });
  const r = await sb.marsh(["splits"]);
  assert.equal(r.code, 0, show(r));
  const daemon = sb.daemonPid();
  assert.ok(daemon !== null, "the daemon wrote its pid");
  const { children } = JSON.parse(Deno.readTextFileSync(`${sb.home}/children.json`)) as {
    children: { role: "splitfs" | "worker"; pid: number }[];
  };
  const seen: [EntryName, number][] = [["daemon", daemon]];
  for (const c of children) seen.push([c.role, c.pid]);
  assert.deepEqual(seen.map(([n]) => n).sort(), ["daemon", "splitfs", "worker"]);
  for (const [name, pid] of seen) {
    const names = await environNames(pid);
    assert.ok(!names.includes(SECRET), `${name} was given ${SECRET}`);
    const extra = names.filter((n) => !allowed(name).has(n));
    assert.deepEqual(extra, [], `${name} was given ${extra.join(", ")}`);
  }
  // It still has what it needs: its control dir and Deno's cache.
  assert.ok((await environNames(daemon)).includes("MARSH_HOME"));
  assert.ok((await environNames(daemon)).includes("DENO_DIR"));
});
