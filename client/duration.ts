/**
 * Durations as a person writes them on the command line (`--older-than 2h`):
 * a whole number and one unit, `s`, `m`, `h`, `d` or `w`.
 *
 * @module
 */

import { MAX_AGE_MS } from "../protocol/housekeeping.ts";

const UNITS: Readonly<Record<string, number>> = {
  s: 1000,
  m: 60_000,
  h: 3_600_000,
  d: 86_400_000,
  w: 7 * 86_400_000,
};

const DURATION = /^([0-9]{1,12})([smhdw])$/;

/**
 * Milliseconds of a duration like `30m`, `2h`, `3d`, or the reason it is
 * not one (a message naming the value and the form wanted).
 */
export function parseDuration(text: string): { ms: number } | { problem: string } {
  const m = DURATION.exec(text);
  if (m === null) {
    return {
      problem: `${
        JSON.stringify(text)
      } is not a duration: give a whole number and a unit, s, m, h, d or w (e.g. 30m, 2h, 3d)`,
    };
  }
  const ms = Number(m[1]) * UNITS[m[2]!]!;
  if (ms > MAX_AGE_MS) {
    return { problem: `${JSON.stringify(text)} is too long a duration: at most 100 years` };
  }
  return { ms };
}
