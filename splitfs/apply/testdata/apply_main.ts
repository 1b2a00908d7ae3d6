/**
 * Test driver for the applier's crash tests (splitfs/apply/crash_test.ts):
 * runs one apply, recover or undo as a real process, so a test can
 * `kill -9` it at a named step.
 *
 *   apply_main.ts apply <root> <fixture dir> <id>   plan.json and blobs/<id> in the fixture dir
 *   apply_main.ts recover <root> <id>               prints "pre" or "post"
 *   apply_main.ts recover-all <root>                prints {id: "pre" | "post"} as JSON
 *   apply_main.ts undo <root> <id> <undo id>
 *
 * `MARSH_TEST_PAUSE_AT=<step>` stops at that step (`#<k>`: at the k-th
 * step reached, whatever its name), after writing
 * `$MARSH_TEST_PAUSE_DIR/paused` with the pid, until the test kills it;
 * `MARSH_TEST_STEPS=<file>` appends every step's name to that file.
 *
 * Needs `--allow-read --allow-write --allow-ffi --allow-env`.
 *
 * @module
 */

import type { MergePlan } from "../../../model/resolution_plan.ts";
import { Dir } from "../../fd/dir.ts";
import { recover, recoverAll } from "../recover.ts";
import { applyPlan } from "../transaction.ts";
import { undo } from "../undo.ts";

const pauseAt = Deno.env.get("MARSH_TEST_PAUSE_AT") ?? "";
const pauseDir = Deno.env.get("MARSH_TEST_PAUSE_DIR") ?? "";
const stepsFile = Deno.env.get("MARSH_TEST_STEPS") ?? "";
let reached = 0;

async function onStep(step: string): Promise<void> {
  reached++;
  if (stepsFile !== "") Deno.writeTextFileSync(stepsFile, `${step}\n`, { append: true });
  if (step !== pauseAt && pauseAt !== `#${reached}`) return;
  Deno.writeTextFileSync(`${pauseDir}/paused`, `${Deno.pid} ${step}\n`);
  // Keep the event loop alive until the test sends SIGKILL.
  setInterval(() => {}, 60_000);
  await new Promise(() => {});
}

const [cmd, root, a, b] = Deno.args;
if (cmd === "apply" && root && a && b) {
  const plan = JSON.parse(Deno.readTextFileSync(`${a}/plan.json`)) as MergePlan;
  using blobs = Dir.openAbsolute(`${a}/blobs`);
  await applyPlan(root, plan, {
    id: b,
    content: (f) => ({ from: blobs, name: f.after.blob }),
    onStep,
  });
} else if (cmd === "recover" && root && a) {
  console.log(await recover(root, a, { onStep }));
} else if (cmd === "recover-all" && root) {
  console.log(JSON.stringify(Object.fromEntries(await recoverAll(root))));
} else if (cmd === "undo" && root && a && b) {
  await undo(root, a, { id: b, onStep });
} else {
  console.error(
    "usage: apply_main.ts apply ROOT FIXTURE ID | recover ROOT ID | undo ROOT ID UNDO_ID",
  );
  Deno.exit(2);
}
