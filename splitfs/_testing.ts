/**
 * Test helpers for the split engine's tests (`splitfs/*_test.ts` and the
 * black-box `tests/engine_*_test.ts`): a sandbox holding a project, a private
 * `HOME` and an outside directory; real Git run with a hardened environment;
 * and fingerprints of whole trees to prove what changed and what did not.
 * Imported only by tests.
 *
 * @module
 */

import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { readMounts } from "./fd/mountinfo.ts";

const enc = new TextEncoder();
const dec = new TextDecoder();

/** A temp dir with `project/`, `home/` (a private `HOME`) and `outside/`, removed on dispose. */
export interface Sandbox extends Disposable {
  readonly top: string;
  /** The project root, absolute and canonical. */
  readonly root: string;
  readonly home: string;
  /** A directory outside the project, for symlink targets that must stay untouched. */
  readonly outside: string;
}

/**
 * Unmounts every mount at or below `top`, deepest first (overlay forks and
 * bases a test left mounted: a kept split keeps its mounts). Reads
 * mountinfo through `awk`, since Deno reads /proc only with `-A`. Test
 * paths hold no spaces, so mountinfo's octal escapes do not arise.
 */
export function unmountBelow(top: string): void {
  for (const p of mountsBelow(top)) {
    if (Deno.permissions.querySync({ name: "run", command: "umount" }).state !== "granted") {
      throw new Error(`${p} is mounted and this test may not run umount`);
    }
    const r = new Deno.Command("umount", { args: [p], stderr: "null" }).outputSync();
    if (!r.success) new Deno.Command("umount", { args: ["-l", p], stderr: "null" }).outputSync();
  }
}

/** The mount points at or below `top`, deepest first. */
export function mountsBelow(top: string): string[] {
  // Tests run without run access make no mounts (their engine takes copy forks).
  if (Deno.permissions.querySync({ name: "run", command: "awk" }).state !== "granted") return [];
  const out = new Deno.Command("awk", {
    args: ["{print $5}", "/proc/self/mountinfo"],
    stdout: "piped",
    stderr: "inherit",
  }).outputSync();
  return dec.decode(out.stdout).split("\n")
    .filter((p) => p === top || p.startsWith(`${top}/`))
    .sort((a, b) => b.length - a.length);
}

/** Makes a sandbox. Needs read and write access to the temp dir. */
export function sandbox(prefix = "marsh-engine-test-"): Sandbox {
  const top = Deno.realPathSync(Deno.makeTempDirSync({ prefix }));
  for (const d of ["project", "home", "outside"]) Deno.mkdirSync(`${top}/${d}`);
  return {
    top,
    root: `${top}/project`,
    home: `${top}/home`,
    outside: `${top}/outside`,
    [Symbol.dispose]() {
      unmountBelow(top);
      makeWritable(top);
      Deno.removeSync(top, { recursive: true });
    },
  };
}

/** Snapshots keep a read-only directory read-only; the sandbox must still be removable. */
function makeWritable(dir: string): void {
  Deno.chmodSync(dir, 0o755);
  for (const e of Deno.readDirSync(dir)) {
    if (e.isDirectory && !e.isSymlink) makeWritable(`${dir}/${e.name}`);
  }
}

/** Options for {@linkcode git}. */
export interface GitOptions {
  /** The private `HOME`; Git reads `~/.gitconfig` there only with `globalConfig`. */
  readonly home: string;
  /** Read `HOME/.gitconfig` instead of `GIT_CONFIG_GLOBAL=/dev/null`. */
  readonly globalConfig?: boolean;
  readonly env?: Record<string, string>;
}

/** What a finished Git process said. */
export interface GitResult {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** The hardened environment tests run Git (and other tools) with. */
export function gitEnv(opts: GitOptions): Record<string, string> {
  const env: Record<string, string> = {
    PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin",
    HOME: opts.home,
    XDG_CONFIG_HOME: `${opts.home}/.config`,
    GIT_CONFIG_NOSYSTEM: "1",
    GIT_ATTR_NOSYSTEM: "1",
    GIT_TERMINAL_PROMPT: "0",
    GIT_AUTHOR_NAME: "marsh test",
    GIT_AUTHOR_EMAIL: "test@marsh.invalid",
    GIT_COMMITTER_NAME: "marsh test",
    GIT_COMMITTER_EMAIL: "test@marsh.invalid",
    GIT_AUTHOR_DATE: "2024-01-01T00:00:00Z",
    GIT_COMMITTER_DATE: "2024-01-01T00:00:00Z",
    LC_ALL: "C",
    TZ: "UTC",
  };
  if (!opts.globalConfig) env.GIT_CONFIG_GLOBAL = "/dev/null";
  return { ...env, ...opts.env };
}

/**
 * Runs `git` in `cwd` with {@linkcode gitEnv}. Needs `--allow-run=git` and
 * `--allow-env=PATH`.
 */
export async function git(cwd: string, args: string[], opts: GitOptions): Promise<GitResult> {
  const out = await new Deno.Command("git", {
    args,
    cwd,
    clearEnv: true,
    env: gitEnv(opts),
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).output();
  return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
}

/** Runs git like {@linkcode git} and returns its stdout; throws with stderr unless it exits 0. */
export async function gitOk(cwd: string, args: string[], opts: GitOptions): Promise<string> {
  const r = await git(cwd, args, opts);
  if (r.code !== 0) throw new Error(`git ${args.join(" ")} exited ${r.code}: ${r.stderr}`);
  return r.stdout;
}

/** Runs a tool with the hardened environment and throws unless it exits 0. */
export async function run(
  cmd: string,
  args: string[],
  opts: GitOptions & { cwd?: string },
): Promise<string> {
  const out = await new Deno.Command(cmd, {
    args,
    cwd: opts.cwd,
    clearEnv: true,
    env: gitEnv(opts),
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).output();
  if (out.code !== 0) {
    throw new Error(`${cmd} ${args.join(" ")} exited ${out.code}: ${dec.decode(out.stderr)}`);
  }
  return dec.decode(out.stdout);
}

/** Writes a file (making parent dirs) with exactly `mode`. */
export function put(root: string, rel: string, data: string | Uint8Array, mode = 0o644): void {
  const path = `${root}/${rel}`;
  Deno.mkdirSync(path.slice(0, path.lastIndexOf("/")), { recursive: true });
  Deno.writeFileSync(path, typeof data === "string" ? enc.encode(data) : data);
  Deno.chmodSync(path, mode);
}

/** Reads a file as UTF-8. */
export function text(path: string): string {
  return dec.decode(Deno.readFileSync(path));
}

/** Whether anything (a dangling symlink included) is at `path`. */
export function exists(path: string): boolean {
  try {
    Deno.lstatSync(path);
    return true;
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return false;
    throw error;
  }
}

/** Options for {@linkcode fingerprint}. */
export interface FingerprintOptions {
  /** Relative paths (files or whole directories) to leave out. */
  readonly skip?: (rel: string) => boolean;
  /** Include mtime and ctime, so a rewrite with the same bytes shows too. */
  readonly times?: boolean;
}

/**
 * Every entry under `root`: path → kind, permission bits, and the SHA-1 of a
 * file's bytes or a symlink's target (plus times when asked). Never follows a
 * symlink. Needs read access to `root`.
 */
export function fingerprint(root: string, opts: FingerprintOptions = {}): Map<string, string> {
  const out = new Map<string, string>();
  const walk = (dir: string, prefix: string) => {
    for (const e of [...Deno.readDirSync(dir)].sort((a, b) => a.name < b.name ? -1 : 1)) {
      const rel = prefix + e.name;
      if (opts.skip?.(rel)) continue;
      const full = `${dir}/${e.name}`;
      const st = Deno.lstatSync(full);
      const perm = ((st.mode ?? 0) & 0o7777).toString(8);
      const times = opts.times ? ` ${st.mtime?.getTime()} ${st.ctime?.getTime()}` : "";
      if (st.isSymlink) {
        out.set(rel, `symlink ${Deno.readLinkSync(full)}${times}`);
      } else if (st.isDirectory) {
        out.set(rel, `dir ${perm}${times}`);
        walk(full, `${rel}/`);
      } else if (st.isFile) {
        const sha = createHash("sha1").update(Deno.readFileSync(full)).digest("hex");
        out.set(rel, `file ${perm} ${st.size} ${sha}${times}`);
      } else {
        out.set(rel, `special ${perm}${times}`);
      }
    }
  };
  walk(root, "");
  return out;
}

/** How two fingerprints differ, one line per path (empty when equal). */
export function fingerprintDiff(before: Map<string, string>, after: Map<string, string>): string[] {
  const lines: string[] = [];
  for (const [k, v] of before) {
    const w = after.get(k);
    if (w === undefined) lines.push(`- ${k}: ${v}`);
    else if (w !== v) lines.push(`~ ${k}: ${v} -> ${w}`);
  }
  for (const [k, v] of after) if (!before.has(k)) lines.push(`+ ${k}: ${v}`);
  return lines;
}

/** The relative paths under `root` that are files, symlinks or special files, sorted. */
export function leaves(root: string, skip?: (rel: string) => boolean): string[] {
  return [...fingerprint(root, { skip })].filter(([, v]) => !v.startsWith("dir ")).map(([k]) => k)
    .sort();
}

/**
 * What Git would see of a tree: each file with its Git mode and the SHA-1 of
 * its bytes, each symlink with its target. Directories are implied, and the
 * top-level `.git` (a dir or our gitfile) and `.marsh` are left out.
 */
export function gitView(root: string): Map<string, string> {
  const out = new Map<string, string>();
  const all = fingerprint(root, { skip: (rel) => rel === ".git" || rel === ".marsh" });
  for (const [rel, v] of all) {
    if (v.startsWith("dir ")) continue;
    if (v.startsWith("file ")) {
      const [, perm, , sha] = v.split(" ");
      out.set(rel, `${(parseInt(perm!, 8) & 0o100) ? "100755" : "100644"} ${sha}`);
    } else out.set(rel, v);
  }
  return out;
}

/** Makes `sb.root` a Git repository with `files` committed on `main`; returns HEAD's id. */
export async function gitProject(
  sb: Sandbox,
  files: Record<string, string | Uint8Array>,
): Promise<string> {
  const opts = { home: sb.home };
  await gitOk(sb.root, ["init", "-q", "-b", "main"], opts);
  for (const [rel, data] of Object.entries(files)) put(sb.root, rel, data);
  await gitOk(sb.root, ["add", "-A"], opts);
  await gitOk(sb.root, ["commit", "-q", "-m", "initial"], opts);
  return (await gitOk(sb.root, ["rev-parse", "HEAD"], opts)).trim();
}

/** Calls `fn`, which must throw an instance of `cls`; returns the error for more checks. */
export function throwsA<E extends Error>(
  fn: () => unknown,
  // deno-lint-ignore no-explicit-any
  cls: new (...args: any[]) => E,
): E {
  try {
    fn();
  } catch (error) {
    if (error instanceof cls) return error;
    throw new Error(`expected a ${cls.name}, got: ${error}`, { cause: error });
  }
  throw new Error(`expected a ${cls.name}, but nothing was thrown`);
}

/** Runs `mount` or `umount` (tests run as root) and fails the test unless it succeeds. */
export function mountTool(cmd: "mount" | "umount", args: string[]): void {
  const r = new Deno.Command(cmd, { args, stderr: "piped" }).outputSync();
  assert.ok(r.success, `${cmd} ${args.join(" ")}: ${new TextDecoder().decode(r.stderr)}`);
}

/** Whether something is mounted at `path` in this process's mount namespace. */
export function isMounted(path: string): boolean {
  return readMounts().some((m) => m.mountPoint === path);
}
