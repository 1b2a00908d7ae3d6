import assert from "node:assert/strict";
import { Readable } from "node:stream";
import { OutputBudget, pump } from "./output.ts";

Deno.test({ name: "budget: just under, at and just over the limit", permissions: "none" }, () => {
  for (
    const [sizes, kept, crossed] of [
      [[999], [999], false],
      [[1000], [1000], false],
      [[1001], [1000], true],
      [[600, 399], [600, 399], false],
      [[600, 400], [600, 400], false],
      [[600, 401], [600, 400], true],
      [[1000, 1], [1000, 0], true],
      [[1000, 0], [1000, 0], false],
    ] as const
  ) {
    const b = new OutputBudget(1000);
    assert.deepEqual(sizes.map((n) => b.take(n)), kept, JSON.stringify(sizes));
    assert.equal(b.crossed, crossed);
    assert.equal(b.report(), crossed);
    assert.equal(b.report(), false, "reported once");
  }
  const zero = new OutputBudget(0);
  assert.equal(zero.take(0), 0);
  assert.equal(zero.crossed, false);
  assert.equal(zero.take(1), 0);
  assert.equal(zero.crossed, true);
});

Deno.test(
  {
    name: "pump: keeps at most the limit across two streams",
    permissions: { read: true, write: true },
  },
  async () => {
    const dir = Deno.makeTempDirSync();
    try {
      const budget = new OutputBudget(10);
      const crossings: number[] = [];
      await using a = await Deno.open(`${dir}/a`, { write: true, createNew: true });
      await using b = await Deno.open(`${dir}/b`, { write: true, createNew: true });
      const enc = new TextEncoder();
      const kept = await Promise.all([
        pump(
          Readable.from([enc.encode("aaaa"), enc.encode("aaaa")]),
          a,
          budget,
          (n) => crossings.push(n),
        ),
        pump(
          Readable.from([enc.encode("bb"), enc.encode("bbbb")]),
          b,
          budget,
          (n) => crossings.push(n),
        ),
      ]);
      assert.equal(kept[0] + kept[1], 10);
      assert.equal(crossings.length, 1);
      assert.ok(crossings[0]! > 10);
      assert.equal(Deno.statSync(`${dir}/a`).size + Deno.statSync(`${dir}/b`).size, 10);
    } finally {
      Deno.removeSync(dir, { recursive: true });
    }
  },
);

Deno.test(
  {
    name: "pump: a source destroyed by its owner ends quietly",
    permissions: { read: true, write: true },
  },
  async () => {
    const dir = Deno.makeTempDirSync();
    try {
      await using f = await Deno.open(`${dir}/a`, { write: true, createNew: true });
      const source = new Readable({ read() {} });
      source.push(new TextEncoder().encode("abc"));
      const done = pump(source, f, new OutputBudget(100), () => {});
      await new Promise((r) => setTimeout(r, 10));
      source.destroy();
      assert.equal(await done, 3);
    } finally {
      Deno.removeSync(dir, { recursive: true });
    }
  },
);
