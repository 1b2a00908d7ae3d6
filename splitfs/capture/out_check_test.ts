import assert from "node:assert/strict";
import { put, sandbox } from "../_testing.ts";
import { Dir } from "../fd/dir.ts";
import { missingOut } from "./out_check.ts";

Deno.test({
  name: "missingOut names each file a branch's out/<label>/ lacks, and nothing for a whole out/",
  permissions: { ffi: true, read: true, write: true },
}, () => {
  using sb = sandbox("marsh-out-check-test-");
  const out = `${sb.root}/out`;
  for (const name of ["status", "stdout", "stderr", "files", "diff.patch"]) {
    put(out, `whole/${name}`, "x\n");
  }
  for (const name of ["status", "stdout", "stderr", "files"]) put(out, `nopatch/${name}`, "x\n");
  put(out, "planted/stdout", "x\n");
  put(out, "planted/stderr", "x\n");
  Deno.symlinkSync(`${sb.outside}/status`, `${out}/planted/status`);
  Deno.writeTextFileSync(`${sb.outside}/status`, "exited 0\n");
  Deno.symlinkSync(sb.outside, `${out}/linked`);
  using dir = Dir.openAbsolute(out);
  assert.deepEqual(
    missingOut(dir, [
      { label: "whole", captured: true, changed: true },
      { label: "nopatch", captured: true, changed: false },
      { label: "nopatch", captured: true, changed: true },
      { label: "planted", captured: false, changed: false },
      { label: "linked", captured: false, changed: false },
      { label: "absent", captured: true, changed: true },
    ]),
    [
      { label: "nopatch", files: ["diff.patch"] },
      { label: "planted", files: ["status"] },
      { label: "linked", files: ["status", "stdout", "stderr"] },
      { label: "absent", files: ["status", "stdout", "stderr", "files", "diff.patch"] },
    ],
  );
});
