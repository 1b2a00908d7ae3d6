/**
 * Measures the worker's latencies on this machine (not a test: timings never
 * pass or fail). Run from the repository root:
 *
 * ```sh
 * bin/deno run --allow-run --allow-read --allow-write --allow-env worker/testdata/measure_latency.ts [runs]
 * ```
 *
 * - launch: the launch frame written → the branch's first command runs;
 * - exited: bash's last command → the `exited` event read;
 * - settled: the last background process's last command → `settled` read.
 *
 * @module
 */

import { sandbox, WorkerClient } from "../_testing.ts";

const runs = Number(Deno.args[0] ?? 30);
const now = () => performance.timeOrigin + performance.now();

function median(xs: number[]): string {
  const s = [...xs].sort((a, b) => a - b);
  const q = (p: number) => s[Math.min(s.length - 1, Math.floor(p * s.length))]!.toFixed(2);
  return `median ${q(0.5)} ms (p10 ${q(0.1)}, p90 ${q(0.9)})`;
}

for (const mech of ["cgroup", "subreaper"] as const) {
  using sb = sandbox();
  await using w = WorkerClient.start(sb.control, { forceSubreaper: mech === "subreaper" });
  const launch: number[] = [], exited: number[] = [], settled: number[] = [];
  let mechanism = "";
  for (let i = 0; i < runs; i++) {
    const a = `lat-${Deno.pid}-${i}`;
    const sent = now();
    await w.launch(`${sb.control}/${a}`, {
      attempt: a,
      cwd: sb.fork,
      script: `echo $EPOCHREALTIME > first.${i}
(sleep 0.2; echo $EPOCHREALTIME > last.${i}) >/dev/null 2>&1 </dev/null &
echo $EPOCHREALTIME > exit.${i}`,
    });
    const events = await w.finish(a);
    const at = (t: string) => events.find((e) => e.event.t === t)!.at + performance.timeOrigin;
    const stamp = (f: string) =>
      Number(Deno.readTextFileSync(`${sb.fork}/${f}.${i}`).trim().replace(",", ".")) * 1000;
    const l = events.find((e) => e.event.t === "launched")!.event;
    if (l.t === "launched") mechanism = l.mechanism;
    launch.push(stamp("first") - sent);
    exited.push(at("exited") - stamp("exit"));
    settled.push(at("settled") - stamp("last"));
  }
  console.log(`${mech} (ran as ${mechanism}), ${runs} runs`);
  console.log(`  launch → first command: ${median(launch)}`);
  console.log(`  bash's end → exited:    ${median(exited)}`);
  console.log(`  last writer → settled:  ${median(settled)}`);
}
