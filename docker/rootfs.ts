/**
 * The root filesystem of a Kit image assembled from host files, as sorted
 * tar entries: busybox with its applet links, the requested programs with
 * every shared library they need, the libraries the host `deno` needs (a
 * later step binds that `deno` into Kit containers), `--file` copies, and a
 * minimal `/etc/passwd`, `/etc/group`, `/root`, `/tmp` and `/home/kit`.
 *
 * Host paths keep their host layout, symlinks included (so `/lib64/ld-linux…`
 * and Debian's `/lib -> usr/lib` look as they do on the host and the
 * programs' loader paths work unchanged). Every entry gets fixed owners and
 * modes and the tar writer fixes mtimes, so the same host files and inputs
 * give the same archive bytes.
 *
 * Needs `--allow-read` on every file it copies, so unscoped in practice
 * (the caller passes PATH in; nothing here reads the environment).
 *
 * @module
 */

import { elfClosure, ElfError, ldSoConfDirs, readElf } from "./elf.ts";
import type { TarEntry } from "./tar.ts";

/** The unprivileged user of a Kit image (`kit`, home `/home/kit`). */
export const KIT_UID = 1000;
export const KIT_GID = 1000;

/** PATH inside a Kit image. */
export const IMAGE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/** Busybox applets linked in `/bin` (a `--bin` of the same name wins). */
export const BUSYBOX_APPLETS: readonly string[] = [
  "[",
  "ash",
  "awk",
  "basename",
  "cat",
  "chmod",
  "cmp",
  "cp",
  "cut",
  "date",
  "diff",
  "dirname",
  "du",
  "echo",
  "env",
  "expr",
  "false",
  "find",
  "grep",
  "head",
  "id",
  "kill",
  "ln",
  "ls",
  "mkdir",
  "mktemp",
  "mv",
  "printf",
  "ps",
  "pwd",
  "readlink",
  "realpath",
  "rm",
  "rmdir",
  "sed",
  "seq",
  "sh",
  "sleep",
  "sort",
  "stat",
  "tail",
  "tar",
  "tee",
  "test",
  "timeout",
  "touch",
  "tr",
  "true",
  "uname",
  "uniq",
  "wc",
  "which",
  "whoami",
  "xargs",
];

/** A `--file SRC:DST` copy: a host file or directory placed at `dst` in the image. */
export interface FileCopy {
  readonly src: string;
  readonly dst: string;
}

/** What to put in the image. */
export interface RootfsSpec {
  /** Programs: names looked up on `path`, or paths (with a `/`, relative to `cwd`). */
  readonly bins: readonly string[];
  readonly files: readonly FileCopy[];
  /** The host `deno` whose libraries the image carries. */
  readonly deno: string;
  /** The PATH to look programs (and busybox) up on. */
  readonly path: string;
  /** Where relative `--bin` and `--file` sources are resolved. */
  readonly cwd: string;
}

/** An input that cannot go into the image: a missing program, a clash, an unsafe path. */
export class RootfsError extends Error {
  override name = "RootfsError";
}

type Node =
  | { type: "dir"; mode: number; uid: number; gid: number }
  | { type: "file"; mode: number; uid: number; gid: number; data: Uint8Array; from: string }
  | { type: "symlink"; target: string };

const MAX_LINKS = 40;

/** Normalizes an absolute path: no `.`, `..` or empty components; "" is the root. */
function normalize(path: string): string {
  const out: string[] = [];
  for (const c of path.split("/")) {
    if (c === "" || c === ".") continue;
    if (c === "..") out.pop();
    else out.push(c);
  }
  return out.join("/");
}

function dirOf(rel: string): string {
  const i = rel.lastIndexOf("/");
  return i < 0 ? "" : rel.slice(0, i);
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** The image's file tree, keyed by relative path. */
class Tree {
  readonly nodes = new Map<string, Node>();

  /** Follows symlinks of the tree through every component of `rel`; creates missing dirs. */
  resolveDir(rel: string, hops = 0): string {
    let cur = "";
    const parts = rel.split("/").filter((c) => c !== "");
    for (let i = 0; i < parts.length; i++) {
      const next = cur === "" ? parts[i]! : `${cur}/${parts[i]}`;
      const node = this.nodes.get(next);
      if (!node) {
        this.nodes.set(next, { type: "dir", mode: 0o755, uid: 0, gid: 0 });
        cur = next;
      } else if (node.type === "dir") {
        cur = next;
      } else if (node.type === "symlink") {
        if (hops >= MAX_LINKS) throw new RootfsError(`too many symlinks at /${next}`);
        const target = node.target.startsWith("/")
          ? normalize(node.target)
          : normalize(`${cur}/${node.target}`);
        cur = this.resolveDir(target, hops + 1);
      } else {
        throw new RootfsError(`/${next} is a file in the image, not a directory`);
      }
    }
    return cur;
  }

  /** Adds `node` at `rel` (its parents resolved through the tree); an identical node is fine. */
  put(rel: string, node: Node, what: string): string {
    const parent = this.resolveDir(dirOf(rel));
    const name = rel.slice(rel.lastIndexOf("/") + 1);
    const at = parent === "" ? name : `${parent}/${name}`;
    const old = this.nodes.get(at);
    if (old && !sameNode(old, node)) {
      if (old.type === "dir" && node.type === "dir") {
        this.nodes.set(at, node);
        return at;
      }
      const from = old.type === "file" ? ` (from ${old.from})` : "";
      throw new RootfsError(`${what}: /${at} is already in the image${from}`);
    }
    this.nodes.set(at, node);
    return at;
  }

  has(rel: string): boolean {
    const parent = this.resolveDir(dirOf(rel));
    const name = rel.slice(rel.lastIndexOf("/") + 1);
    return this.nodes.has(parent === "" ? name : `${parent}/${name}`);
  }

  entries(): TarEntry[] {
    const out: TarEntry[] = [];
    for (const [path, n] of this.nodes) {
      if (n.type === "dir") out.push({ type: "dir", path, mode: n.mode, uid: n.uid, gid: n.gid });
      else if (n.type === "file") {
        out.push({ type: "file", path, mode: n.mode, uid: n.uid, gid: n.gid, data: n.data });
      } else out.push({ type: "symlink", path, mode: 0o777, uid: 0, gid: 0, target: n.target });
    }
    return out.sort((a, b) => compareBytes(a.path, b.path));
  }
}

function sameNode(a: Node, b: Node): boolean {
  if (a.type !== b.type) return false;
  if (a.type === "symlink" && b.type === "symlink") return a.target === b.target;
  if (a.type === "dir" && b.type === "dir") {
    return a.mode === b.mode && a.uid === b.uid && a.gid === b.gid;
  }
  if (a.type === "file" && b.type === "file") {
    return a.mode === b.mode && a.uid === b.uid && a.gid === b.gid && sameBytes(a.data, b.data);
  }
  return false;
}

const enc = new TextEncoder();

/** Byte order of the UTF-8 encodings, so the order does not depend on the locale. */
function compareBytes(a: string, b: string): number {
  const x = enc.encode(a);
  const y = enc.encode(b);
  const n = Math.min(x.length, y.length);
  for (let i = 0; i < n; i++) if (x[i] !== y[i]) return x[i]! - y[i]!;
  return x.length - y.length;
}

/** A regular file's permission bits as the image keeps them: rwx only, no set-id or sticky. */
function fileMode(mode: number | null): number {
  return (mode ?? 0o644) & 0o777;
}

/**
 * Copies host path `abs` into the tree at the same path, reproducing every
 * symlink met on the way (components and the final one) and following it.
 */
async function mirror(tree: Tree, abs: string, hops = 0): Promise<void> {
  if (hops > MAX_LINKS) throw new RootfsError(`too many symlinks resolving ${abs}`);
  const parts = normalize(abs).split("/").filter((c) => c !== "");
  let prefix = "";
  for (let i = 0; i < parts.length; i++) {
    const rel = prefix === "" ? parts[i]! : `${prefix}/${parts[i]}`;
    const host = `/${rel}`;
    let st: Deno.FileInfo;
    try {
      st = await Deno.lstat(host);
    } catch (error) {
      if (error instanceof Deno.errors.NotFound) throw new RootfsError(`not found: ${host}`);
      throw error;
    }
    if (st.isSymlink) {
      const target = await Deno.readLink(host);
      tree.put(rel, { type: "symlink", target }, host);
      const resolved = target.startsWith("/") ? target : `/${prefix}/${target}`;
      const rest = parts.slice(i + 1).join("/");
      return await mirror(tree, rest === "" ? resolved : `${resolved}/${rest}`, hops + 1);
    }
    const last = i === parts.length - 1;
    if (st.isDirectory) {
      if (!tree.has(rel)) tree.put(rel, { type: "dir", mode: 0o755, uid: 0, gid: 0 }, host);
    } else if (last && st.isFile) {
      const data = await Deno.readFile(host);
      tree.put(
        rel,
        { type: "file", mode: fileMode(st.mode), uid: 0, gid: 0, data, from: host },
        host,
      );
    } else {
      throw new RootfsError(`${host} is not a regular file, directory or symlink`);
    }
    prefix = rel;
  }
}

/** The first executable regular file named `name` on `path`. */
export async function findOnPath(name: string, path: string): Promise<string | null> {
  for (const dir of path.split(":")) {
    if (!dir.startsWith("/")) continue;
    const candidate = `${dir.replace(/\/+$/, "")}/${name}`;
    try {
      const st = await Deno.stat(candidate);
      if (st.isFile && ((st.mode ?? 0) & 0o111) !== 0) return candidate;
    } catch (error) {
      if (!(error instanceof Deno.errors.NotFound || error instanceof Deno.errors.NotADirectory)) {
        throw error;
      }
      // Not in this directory.
    }
  }
  return null;
}

/**
 * The host's busybox: on `path`, else in /bin or /usr/bin (apt's
 * `busybox-static` puts it there, and a caller's PATH may lack them).
 */
export async function findBusybox(path: string): Promise<string | null> {
  return (await findOnPath("busybox", path)) ?? (await findOnPath("busybox", "/bin:/usr/bin"));
}

/** The host path of `--bin` value `bin`. */
async function locate(bin: string, spec: RootfsSpec): Promise<string> {
  if (bin === "" || bin.includes("\0")) {
    throw new RootfsError(`--bin ${JSON.stringify(bin)}: not a program name`);
  }
  if (bin.includes("/")) {
    const abs = bin.startsWith("/") ? bin : `${spec.cwd}/${bin}`;
    try {
      const st = await Deno.stat(abs);
      if (st.isFile && ((st.mode ?? 0) & 0o111) !== 0) return normalizeAbs(abs);
    } catch (error) {
      if (!(error instanceof Deno.errors.NotFound)) throw error;
    }
    throw new RootfsError(`--bin ${JSON.stringify(bin)}: no executable file at ${abs}`);
  }
  const found = await findOnPath(bin, spec.path);
  if (!found) throw new RootfsError(`--bin ${JSON.stringify(bin)}: not found on PATH`);
  return found;
}

function normalizeAbs(path: string): string {
  return `/${normalize(path)}`;
}

/** The first line of a script: `#!INTERPRETER [ARG]`. */
async function shebang(path: string): Promise<string | null> {
  using file = await Deno.open(path);
  const buf = new Uint8Array(256);
  const n = (await file.read(buf)) ?? 0;
  const line = new TextDecoder().decode(buf.subarray(0, n)).split("\n")[0] ?? "";
  const m = /^#!\s*(\/\S+)/.exec(line);
  return m ? m[1]! : null;
}

/** A program and everything it needs to start: its loader and libraries, or its interpreter's. */
async function programFiles(
  path: string,
  confDirs: readonly string[],
  depth = 0,
): Promise<string[]> {
  const info = await readElf(path);
  if (info) {
    try {
      return await elfClosure(path, confDirs);
    } catch (error) {
      if (error instanceof ElfError) throw new RootfsError(error.message, { cause: error });
      throw error;
    }
  }
  const interp = await shebang(path);
  if (!interp || depth > 4) {
    throw new RootfsError(`${path} is neither an ELF program nor a #! script`);
  }
  return [path, ...(await programFiles(interp, confDirs, depth + 1))];
}

/** Parses `--file SRC:DST` (the last `:` splits, so SRC may contain colons; DST may not). */
export function parseFileCopy(spec: string): FileCopy {
  const at = spec.lastIndexOf(":");
  const src = at < 0 ? "" : spec.slice(0, at);
  const dst = at < 0 ? "" : spec.slice(at + 1);
  if (src === "" || dst === "") {
    throw new RootfsError(
      `--file ${JSON.stringify(spec)}: expected SRC:DST, e.g. ./app.conf:/etc/app.conf`,
    );
  }
  checkImagePath(dst, `--file ${JSON.stringify(spec)}`);
  return { src, dst };
}

function checkImagePath(dst: string, what: string): void {
  if (!dst.startsWith("/") || dst.includes("\0") || normalizeAbs(dst) === "/") {
    throw new RootfsError(
      `${what}: DST must be an absolute path below /, got ${JSON.stringify(dst)}`,
    );
  }
  if (dst.split("/").some((c) => c === "..")) {
    throw new RootfsError(`${what}: DST may not contain "..": ${JSON.stringify(dst)}`);
  }
}

/** Copies a host file, or a directory tree (symlinks inside kept as symlinks), to `dst`. */
async function copyInto(tree: Tree, src: string, dst: string, what: string): Promise<void> {
  let st: Deno.FileInfo;
  try {
    st = await Deno.stat(src);
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) {
      throw new RootfsError(`${what}: ${src} does not exist`);
    }
    throw error;
  }
  const rel = normalize(dst);
  if (st.isFile) {
    const data = await Deno.readFile(src);
    tree.put(rel, { type: "file", mode: fileMode(st.mode), uid: 0, gid: 0, data, from: src }, what);
    return;
  }
  if (!st.isDirectory) throw new RootfsError(`${what}: ${src} is not a regular file or directory`);
  tree.put(rel, { type: "dir", mode: 0o755, uid: 0, gid: 0 }, what);
  const names: string[] = [];
  for await (const e of Deno.readDir(src)) names.push(e.name);
  for (const name of names.sort(compareBytes)) {
    const child = `${src}/${name}`;
    const lst = await Deno.lstat(child);
    if (lst.isSymlink) {
      tree.put(`${rel}/${name}`, { type: "symlink", target: await Deno.readLink(child) }, what);
    } else if (lst.isFile || lst.isDirectory) {
      await copyInto(tree, child, `${dst}/${name}`, what);
    } else {
      throw new RootfsError(`${what}: ${child} is not a regular file, directory or symlink`);
    }
  }
}

const PASSWD = `root:x:0:0:root:/root:/bin/sh\nkit:x:${KIT_UID}:${KIT_GID}:kit:/home/kit:/bin/sh\n`;
const GROUP = `root:x:0:\nkit:x:${KIT_GID}:\n`;

/** Debian's merged-/usr links, reproduced when the host has them, before anything else lands. */
const TOP_LINKS = ["/bin", "/sbin", "/lib", "/lib64"];

/**
 * Assembles the image's root filesystem. Reads the host; writes nothing.
 *
 * @returns the entries sorted by path, parents first
 * @throws {RootfsError} when busybox, a `--bin` or a `--file` source is
 *   missing, a library cannot be found, or two inputs claim one path
 */
export async function assembleRootfs(spec: RootfsSpec): Promise<TarEntry[]> {
  const tree = new Tree();
  const confDirs = await ldSoConfDirs();

  // 1. Host paths, with the host's own layout (symlinks included).
  for (const top of TOP_LINKS) {
    try {
      if ((await Deno.lstat(top)).isSymlink) await mirror(tree, top);
    } catch (error) {
      if (!(error instanceof Deno.errors.NotFound)) throw error;
      // This host has no such directory; nothing to reproduce.
    }
  }
  const busybox = await findBusybox(spec.path);
  if (!busybox) {
    throw new RootfsError(
      "busybox is not installed: run `apt-get install -y busybox-static` (as root)",
    );
  }
  const hostFiles = new Set<string>();
  // busybox's own libraries, if the host's busybox is not the static one.
  for (const f of (await programFiles(busybox, confDirs)).slice(1)) hostFiles.add(f);
  for (const bin of spec.bins) {
    for (const f of await programFiles(await locate(bin, spec), confDirs)) hostFiles.add(f);
  }
  for (const f of (await programFiles(spec.deno, confDirs)).slice(1)) hostFiles.add(f);
  for (const f of [...hostFiles].sort(compareBytes)) await mirror(tree, f);

  // 2. busybox at /bin/busybox and its applets beside it, unless a --bin took the name.
  const bb = await Deno.stat(busybox);
  const bbAt = tree.put(
    "bin/busybox",
    {
      type: "file",
      mode: fileMode(bb.mode),
      uid: 0,
      gid: 0,
      data: await Deno.readFile(busybox),
      from: busybox,
    },
    "busybox",
  );
  const binDir = dirOf(bbAt);
  for (const applet of BUSYBOX_APPLETS) {
    const rel = `${binDir}/${applet}`;
    if (!tree.has(rel)) tree.put(rel, { type: "symlink", target: "busybox" }, `applet ${applet}`);
  }

  // 3. Users, homes and scratch space.
  const dir = (mode: number, uid = 0, gid = 0): Node => ({ type: "dir", mode, uid, gid });
  tree.put("etc", dir(0o755), "/etc");
  tree.put("etc/passwd", {
    type: "file",
    mode: 0o644,
    uid: 0,
    gid: 0,
    data: enc.encode(PASSWD),
    from: "marsh",
  }, "/etc/passwd");
  tree.put("etc/group", {
    type: "file",
    mode: 0o644,
    uid: 0,
    gid: 0,
    data: enc.encode(GROUP),
    from: "marsh",
  }, "/etc/group");
  tree.put("root", dir(0o700), "/root");
  tree.put("tmp", dir(0o1777), "/tmp");
  tree.put("home", dir(0o755), "/home");
  tree.put("home/kit", dir(0o755, KIT_UID, KIT_GID), "/home/kit");

  // 4. The caller's copies, last: they may not replace anything above.
  for (const { src, dst } of spec.files) {
    const what = `--file ${src}:${dst}`;
    checkImagePath(dst, what);
    await copyInto(tree, src.startsWith("/") ? src : `${spec.cwd}/${src}`, dst, what);
  }
  return tree.entries();
}
