/**
 * A probe run under an entrypoint's exact permission flags: it tries each
 * capability and prints which ones the runtime granted, as JSON.
 *
 * @module
 */

import { LIBC_PATHS } from "../../protocol/entrypoints.ts";

function attempt(fn: () => unknown): "granted" | "refused" | "failed" {
  try {
    fn();
    return "granted";
  } catch (error) {
    return error instanceof Deno.errors.NotCapable ? "refused" : "failed";
  }
}

const libc = LIBC_PATHS.find((p) => {
  try {
    return Deno.statSync(p).isFile;
  } catch {
    return false;
  }
}) ?? LIBC_PATHS[0];

const target = Deno.args[0] ?? "/etc/hostname";
const result = {
  readProject: attempt(() => Deno.readFileSync(target)),
  writeTmp: attempt(() => Deno.writeTextFileSync("/tmp/marsh-probe-write", "x")),
  ffiLibc: attempt(() => Deno.dlopen(libc, { getpid: { parameters: [], result: "i32" } }).close()),
  ffiOther: attempt(() =>
    Deno.dlopen("/lib/x86_64-linux-gnu/libm.so.6", { cos: { parameters: ["f64"], result: "f64" } })
      .close()
  ),
  runGit: attempt(() => new Deno.Command("git", { args: ["--version"] }).outputSync()),
  net: attempt(() => Deno.listen({ port: 0 }).close()),
  envHome: attempt(() => Deno.env.get("HOME")),
  // A variable no entrypoint names in an --allow-env list.
  envOther: attempt(() => Deno.env.get("MARSH_PROBE_OTHER")),
};
console.log(JSON.stringify(result));
