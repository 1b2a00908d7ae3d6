/**
 * Which files a host program needs to run: its ELF interpreter (the dynamic
 * loader) and the shared libraries named by `DT_NEEDED`, found the way the
 * glibc loader finds them (`DT_RPATH`, `DT_RUNPATH`, `/etc/ld.so.conf` and
 * its includes, then the default directories), transitively. Read from the
 * files themselves rather than from `ldd`, which runs the program's loader
 * and so would need `--allow-run`; `LD_LIBRARY_PATH` is deliberately
 * ignored so the result depends on the host's files only.
 *
 * Needs `--allow-read` on the program, the libraries and `/etc/ld.so.conf*`.
 *
 * @module
 */

const PT_DYNAMIC = 2;
const PT_INTERP = 3;
const PT_LOAD = 1;
const DT_NULL = 0;
const DT_NEEDED = 1;
const DT_STRTAB = 5;
const DT_STRSZ = 10;
const DT_RPATH = 15;
const DT_RUNPATH = 29;

/** What the dynamic loader reads from one ELF file. */
export interface ElfInfo {
  readonly bits: 32 | 64;
  readonly littleEndian: boolean;
  /** `e_machine`: the architecture; libraries must match it. */
  readonly machine: number;
  /** `PT_INTERP`: the loader's path, absent for static programs and for libraries. */
  readonly interpreter?: string;
  readonly needed: readonly string[];
  readonly rpath: readonly string[];
  readonly runpath: readonly string[];
}

/** A program or library that cannot be resolved. */
export class ElfError extends Error {
  override name = "ElfError";
}

const dec = new TextDecoder();

async function readAt(
  file: Deno.FsFile,
  offset: number,
  length: number,
  path: string,
): Promise<Uint8Array> {
  const buf = new Uint8Array(length);
  await file.seek(offset, Deno.SeekMode.Start);
  let got = 0;
  while (got < length) {
    const n = await file.read(buf.subarray(got));
    if (n === null) throw new ElfError(`truncated ELF file: ${path}`);
    got += n;
  }
  return buf;
}

/**
 * Reads the ELF header, program headers and dynamic section of `path`.
 *
 * @returns null when the file is not ELF (a script, say)
 * @throws {ElfError} on a malformed ELF file
 */
export async function readElf(path: string): Promise<ElfInfo | null> {
  using file = await Deno.open(path);
  const size = (await file.stat()).size;
  if (size < 52) return null;
  const ident = await readAt(file, 0, 64 <= size ? 64 : 52, path);
  if (ident[0] !== 0x7f || ident[1] !== 0x45 || ident[2] !== 0x4c || ident[3] !== 0x46) return null;
  const bits = ident[4] === 2 ? 64 : ident[4] === 1 ? 32 : 0;
  if (bits === 0) throw new ElfError(`unknown ELF class in ${path}`);
  const le = ident[5] === 1;
  const hv = new DataView(ident.buffer);
  const word = (v: DataView, off: number): number =>
    bits === 64 ? Number(v.getBigUint64(off, le)) : v.getUint32(off, le);
  const machine = hv.getUint16(18, le);
  const phoff = bits === 64 ? word(hv, 32) : hv.getUint32(28, le);
  const phentsize = hv.getUint16(bits === 64 ? 54 : 42, le);
  const phnum = hv.getUint16(bits === 64 ? 56 : 44, le);
  if (phnum === 0) return { bits, littleEndian: le, machine, needed: [], rpath: [], runpath: [] };
  const ph = new DataView((await readAt(file, phoff, phentsize * phnum, path)).buffer);
  const loads: { vaddr: number; offset: number; filesz: number }[] = [];
  let interp: { offset: number; size: number } | undefined;
  let dynamic: { offset: number; size: number } | undefined;
  for (let i = 0; i < phnum; i++) {
    const b = i * phentsize;
    const type = ph.getUint32(b, le);
    const seg = bits === 64
      ? { offset: word(ph, b + 8), vaddr: word(ph, b + 16), filesz: word(ph, b + 32) }
      : {
        offset: ph.getUint32(b + 4, le),
        vaddr: ph.getUint32(b + 8, le),
        filesz: ph.getUint32(b + 16, le),
      };
    if (type === PT_LOAD) loads.push(seg);
    else if (type === PT_INTERP) interp = { offset: seg.offset, size: seg.filesz };
    else if (type === PT_DYNAMIC) dynamic = { offset: seg.offset, size: seg.filesz };
  }
  let interpreter: string | undefined;
  if (interp) {
    const raw = await readAt(file, interp.offset, interp.size, path);
    const nul = raw.indexOf(0);
    interpreter = dec.decode(nul < 0 ? raw : raw.subarray(0, nul));
  }
  const base = {
    bits,
    littleEndian: le,
    machine,
    ...(interpreter ? { interpreter } : {}),
  } as const;
  if (!dynamic) return { ...base, needed: [], rpath: [], runpath: [] };

  const dyn = new DataView((await readAt(file, dynamic.offset, dynamic.size, path)).buffer);
  const entSize = bits === 64 ? 16 : 8;
  const neededOff: number[] = [];
  const rpathOff: number[] = [];
  const runpathOff: number[] = [];
  let strtab = -1;
  let strsz = 0;
  for (let b = 0; b + entSize <= dyn.byteLength; b += entSize) {
    const tag = bits === 64 ? Number(dyn.getBigInt64(b, le)) : dyn.getInt32(b, le);
    const val = bits === 64 ? Number(dyn.getBigUint64(b + 8, le)) : dyn.getUint32(b + 4, le);
    if (tag === DT_NULL) break;
    if (tag === DT_NEEDED) neededOff.push(val);
    else if (tag === DT_RPATH) rpathOff.push(val);
    else if (tag === DT_RUNPATH) runpathOff.push(val);
    else if (tag === DT_STRTAB) strtab = val;
    else if (tag === DT_STRSZ) strsz = val;
  }
  if (neededOff.length + rpathOff.length + runpathOff.length === 0) {
    return { ...base, needed: [], rpath: [], runpath: [] };
  }
  // DT_STRTAB is a virtual address: find the loaded segment that holds it.
  const seg = loads.find((s) => strtab >= s.vaddr && strtab < s.vaddr + s.filesz);
  if (!seg || strsz <= 0) throw new ElfError(`cannot locate the dynamic string table of ${path}`);
  const strings = await readAt(file, seg.offset + (strtab - seg.vaddr), strsz, path);
  const str = (off: number): string => {
    if (off >= strings.length) throw new ElfError(`string offset out of range in ${path}`);
    const end = strings.indexOf(0, off);
    return dec.decode(strings.subarray(off, end < 0 ? strings.length : end));
  };
  const list = (offs: number[]) => offs.flatMap((o) => str(o).split(":")).filter((p) => p !== "");
  return { ...base, needed: neededOff.map(str), rpath: list(rpathOff), runpath: list(runpathOff) };
}

/** Directories named by `/etc/ld.so.conf` and the files it includes, in order. */
export async function ldSoConfDirs(conf = "/etc/ld.so.conf", depth = 0): Promise<string[]> {
  let text: string;
  try {
    text = await Deno.readTextFile(conf);
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return [];
    throw error;
  }
  const dirs: string[] = [];
  for (const raw of text.split("\n")) {
    const line = raw.replace(/#.*/, "").trim();
    if (line === "") continue;
    const inc = /^include\s+(.+)$/.exec(line);
    if (!inc) {
      dirs.push(...line.split(/[:,\s]+/).filter((d) => d.startsWith("/")));
      continue;
    }
    if (depth >= 8) continue;
    for (const pattern of inc[1]!.trim().split(/\s+/)) {
      const abs = pattern.startsWith("/")
        ? pattern
        : `${conf.slice(0, conf.lastIndexOf("/"))}/${pattern}`;
      for (const file of await globOneLevel(abs)) {
        dirs.push(...(await ldSoConfDirs(file, depth + 1)));
      }
    }
  }
  return dirs;
}

/** `dir/*.conf`-style patterns: a wildcard in the last component only, sorted like glob(3). */
async function globOneLevel(pattern: string): Promise<string[]> {
  const slash = pattern.lastIndexOf("/");
  const dir = pattern.slice(0, slash) || "/";
  const last = pattern.slice(slash + 1);
  if (!/[*?[]/.test(last)) return [pattern];
  const re = new RegExp(
    `^${last.replace(/[.+^${}()|\\]/g, "\\$&").replace(/\*/g, ".*").replace(/\?/g, ".")}$`,
  );
  const found: string[] = [];
  try {
    for await (const e of Deno.readDir(dir)) if (re.test(e.name)) found.push(`${dir}/${e.name}`);
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return [];
    throw error;
  }
  return found.sort();
}

function defaultDirs(bits: 32 | 64): string[] {
  return bits === 64 ? ["/lib64", "/usr/lib64", "/lib", "/usr/lib"] : ["/lib", "/usr/lib"];
}

function expandOrigin(dir: string, origin: string): string {
  return dir.replace(/\$(ORIGIN|\{ORIGIN\})/g, origin);
}

async function isCompatible(path: string, like: ElfInfo): Promise<boolean> {
  try {
    const st = await Deno.stat(path);
    if (!st.isFile) return false;
    const info = await readElf(path);
    return info !== null && info.bits === like.bits && info.machine === like.machine &&
      info.littleEndian === like.littleEndian;
  } catch (error) {
    if (error instanceof Deno.errors.NotFound || error instanceof Deno.errors.PermissionDenied) {
      return false;
    }
    throw error;
  }
}

/**
 * The loader and every shared library `program` needs, transitively,
 * resolved as the glibc loader would (without `LD_LIBRARY_PATH` and
 * `ld.so.cache`: the cache is built from the same directories).
 *
 * @param confDirs the `/etc/ld.so.conf` directories (read once by the caller)
 * @returns the host paths (as the loader names them; they may be symlinks), program first
 * @throws {ElfError} naming the library that is not found
 */
export async function elfClosure(program: string, confDirs: readonly string[]): Promise<string[]> {
  const top = await readElf(program);
  if (!top) throw new ElfError(`not an ELF program: ${program}`);
  const files = [program];
  if (top.interpreter) files.push(top.interpreter);
  const seen = new Set(files);
  const queue: { path: string; info: ElfInfo; rpaths: readonly string[] }[] = [
    { path: program, info: top, rpaths: [] },
  ];
  while (queue.length > 0) {
    const { path, info, rpaths } = queue.shift()!;
    const origin = path.slice(0, path.lastIndexOf("/")) || "/";
    // DT_RPATH is searched only when there is no DT_RUNPATH, and it is inherited by what it loads.
    const ownRpath = info.runpath.length === 0
      ? info.rpath.map((d) => expandOrigin(d, origin))
      : [];
    const inherited = [...ownRpath, ...rpaths];
    const runpath = info.runpath.map((d) => expandOrigin(d, origin));
    for (const name of info.needed) {
      let found: string | undefined;
      if (name.includes("/")) {
        found = name.startsWith("/") ? name : `${origin}/${name}`;
      } else {
        const dirs = [...inherited, ...runpath, ...confDirs, ...defaultDirs(top.bits)];
        for (const dir of dirs) {
          const candidate = `${dir.replace(/\/+$/, "")}/${name}`;
          if (await isCompatible(candidate, top)) {
            found = candidate;
            break;
          }
        }
      }
      if (!found) throw new ElfError(`${path} needs ${name}, which is not found on this host`);
      if (seen.has(found)) continue;
      seen.add(found);
      files.push(found);
      const libInfo = await readElf(found);
      if (!libInfo) throw new ElfError(`${path} needs ${found}, which is not an ELF file`);
      queue.push({ path: found, info: libInfo, rpaths: inherited });
    }
  }
  return files;
}
