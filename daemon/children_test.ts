import assert from "node:assert/strict";
import type { ProcessId } from "../protocol/processes.ts";
import {
  type ChildRecord,
  endChildren,
  type ProcessLink,
  readChildren,
  removeChildren,
  writeChildren,
} from "./children.ts";

/** A process table with a clock: who is alive, what SIGKILL does, when one ends by itself. */
class FakeProcesses implements ProcessLink {
  now = 0;
  readonly kills: { at: number; pids: number[] }[] = [];
  readonly #procs = new Map<number, { start: number; endsAt: number; killable: boolean }>();

  add(pid: number, start: number, opts: { endsAt?: number; killable?: boolean } = {}): void {
    this.#procs.set(pid, {
      start,
      endsAt: opts.endsAt ?? Infinity,
      killable: opts.killable ?? true,
    });
  }

  starts(pids: readonly number[]): Promise<(number | null)[]> {
    return Promise.resolve(pids.map((pid) => {
      const p = this.#procs.get(pid);
      return p && this.now < p.endsAt ? p.start : null;
    }));
  }

  kill(processes: readonly ProcessId[]): Promise<void> {
    this.kills.push({ at: this.now, pids: processes.map((p) => p.pid) });
    for (const { pid, start } of processes) {
      const p = this.#procs.get(pid);
      // A SIGKILLed process is gone a moment later, as the kernel tears it down.
      if (p && p.start === start && p.killable) p.endsAt = Math.min(p.endsAt, this.now + 10);
    }
    return Promise.resolve();
  }

  get options() {
    return {
      workerWaitMs: 2000,
      killWaitMs: 3000,
      pollMs: 50,
      sleep: (ms: number) => {
        this.now += ms;
        return Promise.resolve();
      },
      now: () => this.now,
    };
  }
}

const service: ChildRecord = { role: "splitfs", pid: 100, start: 5000 };
const worker: ChildRecord = { role: "worker", pid: 101, start: 5001 };

Deno.test("endChildren: nothing recorded, nothing asked", async () => {
  const fake = new FakeProcesses();
  assert.deepEqual(await endChildren(fake, [], fake.options), []);
  assert.deepEqual(fake.kills, []);
});

Deno.test("endChildren: the service is killed at once; a worker ending by itself is not", async () => {
  const fake = new FakeProcesses();
  fake.add(100, 5000);
  fake.add(101, 5001, { endsAt: 700 });
  const fates = await endChildren(fake, [service, worker], fake.options);
  assert.deepEqual(fates.map((f) => f.fate), ["killed", "exited"]);
  assert.deepEqual(fake.kills, [{ at: 0, pids: [100] }]);
  assert.ok(fake.now < 2000, `returned at ${fake.now} ms`);
});

Deno.test("endChildren: a worker that does not end is killed after its wait", async () => {
  const fake = new FakeProcesses();
  fake.add(101, 5001);
  const fates = await endChildren(fake, [worker], fake.options);
  assert.deepEqual(fates.map((f) => f.fate), ["killed"]);
  assert.equal(fake.kills.length, 1);
  assert.ok(fake.kills[0]!.at >= 2000, `killed at ${fake.kills[0]!.at} ms`);
  assert.deepEqual(fake.kills[0]!.pids, [101]);
});

Deno.test("endChildren: a reused pid (another start time) is gone and never signalled", async () => {
  const fake = new FakeProcesses();
  fake.add(100, 9999);
  fake.add(101, 1);
  const fates = await endChildren(fake, [service, worker], fake.options);
  assert.deepEqual(fates.map((f) => f.fate), ["gone", "gone"]);
  assert.deepEqual(fake.kills, []);
  assert.equal(fake.now, 0);
});

Deno.test("endChildren: one that survives SIGKILL is left, after a bounded wait", async () => {
  const fake = new FakeProcesses();
  fake.add(100, 5000, { killable: false });
  const fates = await endChildren(fake, [service], fake.options);
  assert.deepEqual(fates.map((f) => f.fate), ["left"]);
  assert.ok(fake.now >= 3000 && fake.now <= 2000 + 3000 + 50, `gave up at ${fake.now} ms`);
});

Deno.test({
  name: "children.json: written whole, read back, removed; junk is a problem, not a kill",
  permissions: { read: true, write: true },
}, () => {
  const home = Deno.makeTempDirSync({ prefix: "marsh-children-" });
  try {
    assert.deepEqual(readChildren(home), { children: [], problem: null });
    writeChildren(home, [service, worker]);
    assert.equal(Deno.statSync(`${home}/children.json`).mode! & 0o777, 0o600);
    assert.deepEqual(readChildren(home), { children: [service, worker], problem: null });
    removeChildren(home);
    removeChildren(home);
    assert.deepEqual(readChildren(home), { children: [], problem: null });
    for (
      const junk of [
        "not json",
        "[]",
        JSON.stringify({ v: 2, children: [] }),
        JSON.stringify({ v: 1, children: [{ role: "shell", pid: 1, start: 1 }] }),
        JSON.stringify({ v: 1, children: [{ role: "worker", pid: 0, start: 1 }] }),
        JSON.stringify({ v: 1, children: [{ role: "worker", pid: 5, start: -1 }] }),
        JSON.stringify({ v: 1, children: [service, worker, service] }),
      ]
    ) {
      Deno.writeTextFileSync(`${home}/children.json`, junk);
      const r = readChildren(home);
      assert.deepEqual(r.children, [], junk);
      assert.match(r.problem ?? "", /children\.json is unreadable/, junk);
    }
  } finally {
    Deno.removeSync(home, { recursive: true });
  }
});
