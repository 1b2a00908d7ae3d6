/** The renderer join and collect share: lines, the stderr section, and escaping on a terminal. */

import assert from "node:assert/strict";
import { BranchRendering } from "./branch_rendering.ts";

const enc = new TextEncoder();

function render(terminal: boolean, body: (r: BranchRendering) => void): string {
  let out = "";
  const dec = new TextDecoder();
  const r = new BranchRendering((b) => out += dec.decode(b, { stream: true }), terminal);
  body(r);
  r.finish();
  return out;
}

Deno.test("a body without a final newline still ends its line before the next section", () => {
  const text = render(false, (r) => {
    r.header("a", "exited 1", null);
    r.body(enc.encode("no newline"));
    r.stderr("a", enc.encode("err"));
    r.end();
    r.header("b", "exited 0", "2 files changed");
    r.stderr("b", new Uint8Array(0));
    r.end();
  });
  assert.equal(
    text,
    "== a: exited 1\nno newline\n== a stderr ==\nerr\n\n== b: exited 0 (2 files changed)\n\n",
  );
});

Deno.test("on a terminal a branch's control bytes are shown, not sent", () => {
  const text = render(true, (r) => {
    r.header("a", "exited 0", null);
    r.body(enc.encode("\x1b[2Jred\x07\n"));
    r.end();
  });
  assert.equal(text, "== a: exited 0\n\\x1b[2Jred\\x07\n\n");
});
