/**
 * A property test for `tests/property_seed_test.ts` to run in a child
 * `deno test`: it prints every value it draws (one JSON line each, after
 * `drawn `), and with `PROBE_FAIL=1` it fails on the first odd number,
 * unshrunk, so the counterexample depends on the seed. Not named `_test`:
 * the suite runs it only through that test.
 */

import fc from "fast-check";
import { assertProperty } from "../_property.ts";

const fail = Deno.env.get("PROBE_FAIL") === "1";

Deno.test("probe: a seeded property", (t) => {
  assertProperty(
    t,
    fc.property(fc.nat(), fc.string({ maxLength: 8 }), (n, s) => {
      console.log(`drawn ${JSON.stringify([n, s])}`);
      return !fail || n % 2 === 0;
    }),
    { numRuns: 20, endOnFailure: true },
  );
});
