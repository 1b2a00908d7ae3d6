import assert from "node:assert/strict";
import {
  drift,
  median,
  percentile,
  renderStorageEquation,
  slope,
  storageTotal,
} from "./checkpoints_stats.ts";

Deno.test("percentile: nearest rank, whatever the order", () => {
  const xs = [5, 1, 4, 2, 3, 10, 9, 8, 7, 6];
  assert.equal(percentile(xs, 50), 5);
  assert.equal(percentile(xs, 99), 10);
  assert.equal(percentile(xs, 90), 9);
  assert.equal(percentile(xs, 0), 1);
  assert.equal(percentile([7], 99), 7);
  const hundred = Array.from({ length: 100 }, (_, i) => 100 - i);
  assert.equal(percentile(hundred, 99), 99);
  assert.throws(() => percentile([], 50), RangeError);
  assert.throws(() => percentile([1], 101), RangeError);
});

Deno.test("median: odd and even counts", () => {
  assert.equal(median([3, 1, 2]), 2);
  assert.equal(median([4, 1, 3, 2]), 2.5);
  assert.throws(() => median([]), RangeError);
});

Deno.test("drift: first decile's median against the last one's", () => {
  const xs = Array.from({ length: 100 }, (_, i) => i < 10 ? 2 : i >= 90 ? 6 : 4);
  assert.deepEqual(drift(xs), { firstMs: 2, lastMs: 6, ratio: 3 });
  assert.deepEqual(drift([1, 2, 3]), { firstMs: 1, lastMs: 3, ratio: 3 });
  assert.deepEqual(drift([4]), { firstMs: 4, lastMs: 4, ratio: 1 });
});

Deno.test("slope: least squares, and refusals", () => {
  assert.equal(slope([1, 10, 100], [100, 1000, 10000]), 100);
  assert.equal(slope([1, 2, 3, 4], [5, 5, 5, 5]), 0);
  assert.throws(() => slope([1], [1]), RangeError);
  assert.throws(() => slope([2, 2], [1, 3]), RangeError);
});

Deno.test("storage equation: the total adds the terms and takes the reclaimed off", () => {
  const terms = { payload: 10, tree: 200, root: 30, journal: 4096, projection: 0, reclaimed: 6 };
  assert.equal(storageTotal(terms), 4330);
  const text = renderStorageEquation(terms, 10);
  assert.match(text, /^DeltaStorage = 4,330 B\n/);
  assert.match(text, /new unique payload bytes +10 B \(the changed files' bytes: 10 B\)/);
  assert.match(text, /- reclaimed unreachable bytes +6 B/);
  assert.equal(text.split("\n").length, 7);
});
