/**
 * A probe run under the worker's exact flags (`workerFlags`): it tries each
 * capability and prints which ones the runtime granted, as JSON. The first
 * argument is the control dir the flags were made for.
 *
 * @module
 */

import { spawn } from "node:child_process";

type Outcome = "granted" | "refused" | "failed";

async function attempt(fn: () => unknown): Promise<Outcome> {
  try {
    await fn();
    return "granted";
  } catch (error) {
    return error instanceof Deno.errors.NotCapable ? "refused" : "failed";
  }
}

const control = Deno.args[0]!;
const result: Record<string, Outcome> = {
  writeControl: await attempt(() =>
    Deno.writeTextFileSync(`${control}/probe`, "x", { createNew: true })
  ),
  readControl: await attempt(() => Deno.readTextFileSync(`${control}/probe`)),
  writeOutside: await attempt(() => Deno.writeTextFileSync(`${control}-outside`, "x")),
  readEtc: await attempt(() => Deno.readFileSync("/etc/hostname")),
  readShadow: await attempt(() => Deno.readFileSync("/etc/shadow")),
  readProc: await attempt(() => Deno.readFileSync("/proc/self/status")),
  readCgroup: await attempt(() => Deno.statSync("/sys/fs/cgroup")),
  ffi: await attempt(() =>
    Deno.dlopen("/lib/x86_64-linux-gnu/libc.so.6", { getpid: { parameters: [], result: "i32" } })
  ),
  listen: await attempt(() => Deno.listen({ port: 0 }).close()),
  connect: await attempt(() => Deno.connect({ hostname: "127.0.0.1", port: 9 })),
  runPerl: await attempt(() => new Deno.Command("perl", { args: ["-e", "1"] }).outputSync()),
  runBash: await attempt(() => new Deno.Command("bash", { args: ["-c", "true"] }).outputSync()),
  // node:child_process is how the worker starts supervisors.
  spawnPerl: await attempt(() =>
    new Promise<void>((resolve, reject) => {
      const child = spawn("perl", ["-e", "1"], { env: {} });
      child.once("error", reject);
      child.once("exit", () => resolve());
    })
  ),
  spawnBash: await attempt(() =>
    new Promise<void>((resolve, reject) => {
      const child = spawn("bash", ["-c", "true"], { env: {} });
      child.once("error", reject);
      child.once("exit", () => resolve());
    })
  ),
  killOther: await attempt(() => Deno.kill(1, "SIGCONT")),
  envForce: await attempt(() => Deno.env.get("MARSH_WORKER_FORCE_SUBREAPER")),
  envHome: await attempt(() => Deno.env.get("HOME")),
};
console.log(JSON.stringify(result));
