import assert from "node:assert/strict";
import { elfClosure, ldSoConfDirs, readElf } from "./elf.ts";

const dec = new TextDecoder();

/** What `ldd` says `program` loads, as real paths (vdso excluded). */
async function lddRealPaths(program: string): Promise<Set<string>> {
  const out = await new Deno.Command("ldd", { args: [program] }).output();
  assert.equal(out.code, 0, dec.decode(out.stderr));
  const paths = new Set<string>();
  for (const line of dec.decode(out.stdout).split("\n")) {
    const m = /=>\s*(\/\S+)/.exec(line) ?? /^\s*(\/\S+)\s+\(/.exec(line);
    if (m) paths.add(await Deno.realPath(m[1]!));
  }
  return paths;
}

async function which(name: string): Promise<string> {
  const out = await new Deno.Command("sh", { args: ["-c", `command -v ${name}`] }).output();
  return dec.decode(out.stdout).trim();
}

const perms: Deno.PermissionOptions = {
  read: true,
  run: ["ldd", "sh"],
  env: ["PATH", "MARSH_DENO"],
};

Deno.test({
  name: "the libraries found by reading ELF files are the ones ldd reports",
  permissions: perms,
}, async () => {
  const conf = await ldSoConfDirs();
  const deno = Deno.env.get("MARSH_DENO") ?? Deno.execPath();
  for (const program of [await which("git"), await which("bash"), deno]) {
    const ours = await elfClosure(program, conf);
    assert.equal(ours[0], program);
    const real = new Set(await Promise.all(ours.slice(1).map((p) => Deno.realPath(p))));
    assert.deepEqual(real, await lddRealPaths(program), program);
  }
});

Deno.test({ name: "a script or a text file is not ELF", permissions: perms }, async () => {
  assert.equal(await readElf("/etc/passwd"), null);
  const info = await readElf(await which("git"));
  assert.ok(info?.interpreter?.includes("ld-linux"), JSON.stringify(info));
  assert.ok(info?.needed.includes("libc.so.6"));
});
