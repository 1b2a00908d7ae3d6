/**
 * The job tree's cancel (docs/rules.md "Kit jobs" and "Cancel"), with the
 * real CLI, daemon, worker and Docker: a Kit job whose nested split runs a
 * job of its own. Cancelling the top (`marsh splits cancel`, Ctrl-C at
 * `marsh split`) signals every container of the tree at once: the nested
 * split's cancel is on record before the top job's container ended (the
 * top job ignores SIGINT, so only the grace's SIGKILL ends it), the nested
 * job gets SIGINT (not only the SIGKILL), and every container's deletion is
 * verified.
 */

import assert from "node:assert/strict";
import type { Manifest } from "../protocol/manifest.ts";
import { exists, finish, PERMISSIONS as permissions, show, waitFor } from "./_acceptance.ts";
import { listContainers } from "./_engine.ts";
import { World } from "./_kit_world.ts";

const GRACE_MS = 4000;

async function allSplits(w: World): Promise<Manifest[]> {
  const r = await w.sb.marsh(["splits", "--json"]);
  assert.equal(r.code, 0, show(r));
  return (JSON.parse(r.stdout) as { splits: Manifest[] }).splits;
}

/** The index of the first log line matching `re`, or -1. */
function lineOf(log: string[], re: RegExp): number {
  return log.findIndex((l) => re.test(l));
}

/**
 * A top split whose job `a` ignores SIGINT and starts a nested split with
 * job `n`, which records the SIGINT it gets in the Kit home. Returns once
 * `n` runs, with both splits' ids and the creator.
 */
async function startTree(w: World) {
  const { sb } = w;
  const kitHome = `${sb.home}/kits/fixture/home`;
  // No single quote: the top job's shell quotes this whole script in single quotes.
  const nested = `trap "echo int > $HOME/n-int; exit 3" INT; echo up > $HOME/n-up; ` +
    "while :; do sleep 0.1; done";
  const creator = sb.spawnMarsh([
    "split",
    "-n",
    ":::",
    "a",
    "fixture",
    "sh",
    "-c",
    // The top job ignores SIGINT: only SIGKILL after the grace ends its container.
    `trap '' INT; env -i /run/marsh/bin/marsh split -n ::: n fixture sh -c '${nested}' ` +
    "> h.txt 2>&1 & while :; do sleep 0.1; done",
  ]);
  await waitFor("the nested job to run", () => exists(`${kitHome}/n-up`), 90_000).catch(
    (error) => {
      const log = Deno.readTextFileSync(`${sb.home}/marshd.log`).slice(-3000);
      throw new Error(`${error.message}; log: ${log}`);
    },
  );
  const splits = await allSplits(w);
  const top = splits.find((s) => s.depth === 1);
  const child = splits.find((s) => s.depth === 2);
  assert.ok(top && child, JSON.stringify(splits));
  w.splits.push(top.id, child.id);
  return { creator, top: top.id, child: child.id, kitHome };
}

/** What every cancel of the tree must leave: the order, the SIGINT, verified deletion. */
async function checkTree(w: World, top: string, child: string, kitHome: string) {
  const log = Deno.readTextFileSync(`${w.sb.home}/marshd.log`).split("\n");
  const childCancel = lineOf(log, new RegExp(`split ${child}: cancelling: its tree was cancelled`));
  const topExit = lineOf(log, new RegExp(`split ${top}/a: job [a-z0-9]+ exited`));
  assert.ok(childCancel >= 0, `the nested split's cancel in the log:\n${log.join("\n")}`);
  assert.ok(topExit >= 0, `the top job's exit in the log:\n${log.join("\n")}`);
  // The nested split was cancelled before the top job's container ended, not after it.
  assert.ok(childCancel < topExit, `cancel at line ${childCancel}, top exit at ${topExit}`);
  // The top job's container was ended by the SIGKILL after the grace: it ignored SIGINT.
  assert.match(log[topExit]!, /exited \((SIGKILL|code 137)\)/);
  // The nested job got SIGINT itself, before any SIGKILL.
  assert.equal(Deno.readTextFileSync(`${kitHome}/n-int`), "int\n");

  const splits = await allSplits(w);
  for (const id of [top, child]) {
    const s = splits.find((x) => x.id === id);
    assert.equal(s?.state, "cancelled", `split ${id}`);
    assert.equal(s?.branches[0]?.state, "cancelled", `split ${id}'s branch`);
    assert.deepEqual(await listContainers(w.socket, [`marsh.split=${id}`]), [], `split ${id}`);
  }
  // Every container's deletion was verified: no job is left uncertain.
  const jobs = await w.jobs();
  assert.equal(jobs.length, 2, JSON.stringify(jobs));
  for (const j of jobs) {
    assert.equal(j.state, "cancelled", JSON.stringify(j));
    assert.equal(j.cleanup, "removed", JSON.stringify(j));
  }
}

Deno.test({
  name: "tree cancel: marsh splits cancel of the top signals the nested split's job at once",
  permissions,
}, async () => {
  await using w = await World.create(undefined, { MARSH_CANCEL_GRACE_MS: String(GRACE_MS) });
  const { creator, top, child, kitHome } = await startTree(w);
  const t0 = Date.now();
  const cancel = await w.sb.marsh(["splits", "cancel", top]);
  assert.equal(cancel.code, 0, show(cancel));
  // SIGINT reached the nested job well inside the grace.
  await waitFor("the nested job's SIGINT", () => exists(`${kitHome}/n-int`), GRACE_MS);
  assert.ok(Date.now() - t0 < GRACE_MS, "the nested job got SIGINT within the grace");
  const done = await finish(creator, "the top marsh split", 90_000);
  assert.equal(done.code, 130, show(done));
  await waitFor("the nested split to end", async () => {
    const s = (await allSplits(w)).find((x) => x.id === child);
    return s?.state !== "run";
  }, 60_000);
  await checkTree(w, top, child, kitHome);
});

Deno.test({
  name: "tree cancel: Ctrl-C at marsh split cancels the whole tree at once, deletion verified",
  permissions,
}, async () => {
  await using w = await World.create(undefined, { MARSH_CANCEL_GRACE_MS: String(GRACE_MS) });
  const { creator, top, child, kitHome } = await startTree(w);
  creator.kill("SIGINT");
  await waitFor("the nested job's SIGINT", () => exists(`${kitHome}/n-int`), GRACE_MS);
  const done = await finish(creator, "the top marsh split", 90_000);
  assert.equal(done.code, 130, show(done));
  await waitFor("the nested split to end", async () => {
    const s = (await allSplits(w)).find((x) => x.id === child);
    return s?.state !== "run";
  }, 60_000);
  await checkTree(w, top, child, kitHome);
});
