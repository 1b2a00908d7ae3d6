import assert from "node:assert/strict";
import { ratioText, renderTargets, report, target, verdict } from "./targets.ts";

const base = { what: "fork per branch", limitText: "≤ 3 ms", files: 1000, strategy: "overlay" };

Deno.test("an upper-bound target is met at or under its limit and missed by value/limit over it", () => {
  const met = target({ ...base, value: 3, limit: 3, bound: "max", measured: "3.00 ms" });
  assert.equal(met.met, true);
  assert.equal(met.missedBy, null);
  assert.equal(verdict(met), "met");

  const missed = target({ ...base, value: 7.5, limit: 3, bound: "max", measured: "7.50 ms" });
  assert.equal(missed.met, false);
  assert.equal(missed.missedBy, 2.5);
  assert.equal(verdict(missed), "MISSED by 2.50×");
});

Deno.test("a lower-bound target is missed by limit/value", () => {
  const spec = { ...base, limitText: "≥ 2000× faster", limit: 2000, bound: "min" as const };
  assert.equal(target({ ...spec, value: 2500, measured: "2500×" }).met, true);
  const missed = target({ ...spec, value: 500, measured: "500×" });
  assert.equal(missed.met, false);
  assert.equal(missed.missedBy, 4);
});

Deno.test("a target without a measurement is reported as not measured", () => {
  for (const value of [null, NaN]) {
    const t = target({ ...base, value, limit: 3, bound: "max", measured: "n/a" });
    assert.equal(t.met, null);
    assert.equal(t.value, null);
    assert.equal(verdict(t), "not measured");
  }
  assert.throws(
    () => target({ ...base, value: 1, limit: 0, bound: "max", measured: "" }),
    RangeError,
  );
});

Deno.test("ratioText and renderTargets show both sides and the verdict", () => {
  assert.equal(ratioText(12.3, 30), "0.41× (12.3 ms vs 30.0 ms)");
  const out = renderTargets([
    target({ ...base, value: 6, limit: 3, bound: "max", measured: "6.00 ms" }),
  ]);
  const lines = out.split("\n");
  assert.equal(lines.length, 3);
  assert.match(
    lines[2] ?? "",
    /fork per branch ≤ 3 ms \| 1000 +\| overlay +\| 6\.00 ms +\| MISSED by 2\.00×/,
  );
});

Deno.test("a reported number has no limit: never met nor missed, verdict report", () => {
  const spec = { what: "kit overhead per branch", files: 2, strategy: "kit:fixture, overlay" };
  const r = report({ ...spec, value: 120, measured: "120.0 ms per branch" });
  assert.equal(r.met, null);
  assert.equal(r.missedBy, null);
  assert.equal(r.report, true);
  assert.equal(r.limitText, "(report)");
  assert.equal(verdict(r), "report");
  const none = report({ ...spec, value: NaN, measured: "n/a" });
  assert.equal(none.value, null);
  assert.equal(verdict(none), "not measured");
  assert.match(renderTargets([r]), /kit overhead per branch \(report\) \| 2 .*\| report +\|$/m);
});
