/**
 * Finds import cycles in marsh's own sources, between modules and between
 * top-level folders. A cycle hides the architecture: neither side can be read,
 * tested or moved without the other, and a back-edge for a shared constant or
 * error class means that constant belongs in a leaf module both can import.
 *
 * The graph is Deno's own ({@linkcode importGraph} asks `deno info --json`),
 * so it resolves specifiers exactly as the runtime does; the cycle search
 * ({@linkcode moduleCycles}, {@linkcode folderCycles}) is pure and works on
 * any {@linkcode ImportGraph}. `tools/import_cycles_main.ts` runs it as part of
 * `deno task check`.
 *
 * @module
 */

/**
 * A static import graph: each source file, as a `/`-separated path relative to
 * the project root, mapped to the project files it imports (static, dynamic
 * and type-only imports alike: each is a dependency a reader must follow).
 */
export type ImportGraph = ReadonlyMap<string, readonly string[]>;

/** One import, from a file to a file: the witness of a folder-level edge. */
export interface ImportEdge {
  readonly from: string;
  readonly to: string;
}

/** A cycle between modules, and the strongly connected knot it was taken from. */
export interface ModuleCycle {
  /** The files in import order; the last imports the first. */
  readonly files: readonly string[];
  /** Every file of the knot (sorted): one cycle is shown, all of these must be untied. */
  readonly knot: readonly string[];
  /** Every import between two files of the knot, sorted: the edges to cut are among them. */
  readonly imports: readonly ImportEdge[];
}

/** A cycle between top-level folders, with one import that makes each hop. */
export interface FolderCycle {
  /** The folders in import order; the last imports the first. */
  readonly folders: readonly string[];
  /** One import per hop: `hops[i]` goes from `folders[i]` to the next folder. */
  readonly hops: readonly ImportEdge[];
  /** Every folder of the knot (sorted). */
  readonly knot: readonly string[];
}

/**
 * The folder a file belongs to for {@linkcode folderCycles}: its top-level
 * folder (`splitfs/git/reader.ts` → `splitfs`), or `.` for a file at the root.
 * Subfolders are their folder's own layout, free to import each other; the
 * top-level folders are the capabilities whose dependencies must form a DAG.
 */
export function folderOf(file: string): string {
  const slash = file.indexOf("/");
  return slash < 0 ? "." : file.slice(0, slash);
}

/**
 * The module cycles of a graph: one shortest cycle for each strongly
 * connected set of files (a file importing itself counts), in a stable order.
 */
export function moduleCycles(graph: ImportGraph): ModuleCycle[] {
  return knots(graph).map((knot) => {
    const inside = new Set(knot);
    const imports = knot.flatMap((from) =>
      [...new Set(graph.get(from) ?? [])].filter((to) => inside.has(to)).sort().map((to) => ({
        from,
        to,
      }))
    );
    return { files: shortestCycle(graph, knot), knot, imports };
  });
}

/**
 * The folder cycles of a graph: top-level folders that import each other,
 * directly or through other folders, with the imports that make each hop.
 */
export function folderCycles(graph: ImportGraph): FolderCycle[] {
  const folders = new Map<string, string[]>();
  const witness = new Map<string, ImportEdge>();
  for (const [from, targets] of graph) {
    const a = folderOf(from);
    if (!folders.has(a)) folders.set(a, []);
    for (const to of targets) {
      const b = folderOf(to);
      if (a === b) continue;
      const key = `${a}\0${b}`;
      const edge = { from, to };
      const seen = witness.get(key);
      if (seen === undefined) {
        folders.get(a)!.push(b);
        witness.set(key, edge);
      } else if (compareEdges(edge, seen) < 0) {
        witness.set(key, edge);
      }
    }
  }
  return knots(folders).map((knot) => {
    const cycle = shortestCycle(folders, knot);
    const hops = cycle.map((a, i) => witness.get(`${a}\0${cycle[(i + 1) % cycle.length]}`)!);
    return { folders: cycle, hops, knot };
  });
}

/** The strongly connected sets of nodes that contain a cycle, each sorted, in a stable order. */
function knots(graph: ImportGraph): string[][] {
  // Tarjan's algorithm, iterative so a deep import chain cannot overflow the stack.
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const onStack = new Set<string>();
  const stack: string[] = [];
  const found: string[][] = [];
  const successors = (node: string) => [...new Set(graph.get(node) ?? [])].sort();
  for (const root of [...graph.keys()].sort()) {
    if (index.has(root)) continue;
    const frames: { node: string; next: string[] }[] = [];
    const enter = (node: string) => {
      index.set(node, index.size);
      low.set(node, index.get(node)!);
      stack.push(node);
      onStack.add(node);
      frames.push({ node, next: successors(node) });
    };
    enter(root);
    while (frames.length > 0) {
      const frame = frames[frames.length - 1]!;
      const child = frame.next.shift();
      if (child !== undefined) {
        if (!index.has(child)) enter(child);
        else if (onStack.has(child)) {
          low.set(frame.node, Math.min(low.get(frame.node)!, index.get(child)!));
        }
        continue;
      }
      frames.pop();
      const parent = frames[frames.length - 1];
      if (parent !== undefined) {
        low.set(parent.node, Math.min(low.get(parent.node)!, low.get(frame.node)!));
      }
      if (low.get(frame.node) !== index.get(frame.node)) continue;
      const knot: string[] = [];
      for (;;) {
        const node = stack.pop()!;
        onStack.delete(node);
        knot.push(node);
        if (node === frame.node) break;
      }
      const selfImport = (graph.get(frame.node) ?? []).includes(frame.node);
      if (knot.length > 1 || selfImport) found.push(knot.sort());
    }
  }
  return found.sort((a, b) => a[0]!.localeCompare(b[0]!));
}

/** A shortest cycle through the knot's first node, staying inside the knot. */
function shortestCycle(graph: ImportGraph, knot: readonly string[]): string[] {
  const start = knot[0]!;
  const inside = new Set(knot);
  const cameFrom = new Map<string, string>();
  const queue = [start];
  for (let i = 0; i < queue.length; i++) {
    const node = queue[i]!;
    for (const next of [...new Set(graph.get(node) ?? [])].sort()) {
      if (next === start) {
        const path = [node];
        while (path[0] !== start) path.unshift(cameFrom.get(path[0]!)!);
        return path;
      }
      if (!inside.has(next) || cameFrom.has(next)) continue;
      cameFrom.set(next, node);
      queue.push(next);
    }
  }
  throw new Error(`Not a cycle: ${knot.join(", ")}`);
}

function compareEdges(a: ImportEdge, b: ImportEdge): number {
  return a.from.localeCompare(b.from) || a.to.localeCompare(b.to);
}

/** Directories never walked: tools' caches and dependencies, not marsh's sources. */
const SKIPPED_DIRS = new Set(["node_modules"]);

/**
 * The project's non-test TypeScript files (`*.ts` but not `*_test.ts`) under
 * `root`, as sorted `/`-separated relative paths. Hidden directories (`.git`,
 * `.deno`) and `node_modules` are skipped; test helpers (`_testing.ts`,
 * `tests/_acceptance.ts`) are included, since they too must not tie folders
 * into a knot.
 *
 * Needs read permission on `root`.
 */
export async function sourceFiles(root: string): Promise<string[]> {
  const files: string[] = [];
  const walk = async (dir: string, prefix: string) => {
    for await (const entry of Deno.readDir(dir)) {
      const rel = prefix + entry.name;
      if (entry.isDirectory) {
        if (entry.name.startsWith(".") || SKIPPED_DIRS.has(entry.name)) continue;
        await walk(`${dir}/${entry.name}`, `${rel}/`);
      } else if (entry.isFile && entry.name.endsWith(".ts") && !entry.name.endsWith("_test.ts")) {
        files.push(rel);
      }
    }
  };
  await walk(root, "");
  return files.sort();
}

/**
 * Reads the project-local part of `deno info --json`'s output: every module
 * under `rootUrl` with the modules under `rootUrl` it imports. npm, JSR,
 * remote and `data:` modules are not the project's and are left out.
 *
 * @throws {Error} when a project module could not be loaded (Deno's message is kept)
 */
export function graphFromDenoInfo(info: unknown, rootUrl: string): Map<string, string[]> {
  const base = rootUrl.endsWith("/") ? rootUrl : `${rootUrl}/`;
  const local = (specifier: unknown) =>
    typeof specifier === "string" && specifier.startsWith(base)
      ? decodeURIComponent(specifier.slice(base.length))
      : null;
  const modules = (info as { modules?: unknown }).modules;
  if (!Array.isArray(modules)) throw new Error("deno info --json printed no module list");
  const graph = new Map<string, string[]>();
  for (const module of modules as Record<string, unknown>[]) {
    const from = local(module.specifier);
    if (from === null) continue;
    if (typeof module.error === "string") {
      throw new Error(`Cannot load ${from}: ${module.error}`);
    }
    const targets = graph.get(from) ?? [];
    graph.set(from, targets);
    const dependencies = Array.isArray(module.dependencies) ? module.dependencies : [];
    for (
      const dependency of dependencies as Record<string, { specifier?: unknown } | undefined>[]
    ) {
      for (const resolved of [dependency.code, dependency.type]) {
        const to = local(resolved?.specifier);
        if (to !== null && !targets.includes(to)) targets.push(to);
      }
    }
  }
  return graph;
}

/**
 * Linux refuses a single argument over 128 KiB; the roots are passed in
 * batches well under it.
 */
const MAX_ROOT_URL = 100_000;

/**
 * The import graph of `files` (relative to `root`), from `deno info --json`
 * run with `root` as its working directory (so `root`'s `deno.json` import map
 * applies). The files are the roots of one `data:` module that imports them
 * all, so a single `deno info` sees the whole tree; npm and remote modules are
 * not fetched (`--no-npm`, `--no-remote`): only the project's own edges count.
 *
 * Needs run permission on `deno` (the Deno executable to ask).
 *
 * @throws {Error} when `deno info` fails or a project module cannot be loaded
 */
export async function importGraph(
  root: string,
  files: readonly string[],
  deno: string,
): Promise<Map<string, string[]>> {
  const rootUrl = new URL(`file://${await absolute(root)}/`).href;
  const graph = new Map<string, string[]>();
  for (const batch of batches(files.map((file) => new URL(file, rootUrl).href))) {
    const source = batch.map((url) => `import ${JSON.stringify(url)};\n`).join("");
    const url = `data:application/typescript;base64,${base64(source)}`;
    const output = await new Deno.Command(deno, {
      args: ["info", "--json", "--no-npm", "--no-remote", url],
      cwd: root,
      stdin: "null",
    }).output();
    if (!output.success) {
      const stderr = new TextDecoder().decode(output.stderr).trim();
      throw new Error(`deno info failed (exit ${output.code}): ${stderr}`);
    }
    const info = JSON.parse(new TextDecoder().decode(output.stdout));
    for (const [from, targets] of graphFromDenoInfo(info, rootUrl)) graph.set(from, targets);
  }
  return graph;
}

function batches(urls: readonly string[]): string[][] {
  const out: string[][] = [];
  let size = Infinity;
  for (const url of urls) {
    // A base64 root is 4/3 of its source; each import line adds about 12 bytes.
    const cost = ((url.length + 12) * 4) / 3;
    if (size + cost > MAX_ROOT_URL) {
      out.push([]);
      size = 0;
    }
    out[out.length - 1]!.push(url);
    size += cost;
  }
  return out;
}

function base64(text: string): string {
  let binary = "";
  for (const byte of new TextEncoder().encode(text)) binary += String.fromCharCode(byte);
  return btoa(binary);
}

async function absolute(path: string): Promise<string> {
  return path.startsWith("/") ? path : await Deno.realPath(path);
}

/**
 * The report printed when cycles are found: each module cycle's files in
 * import order, each folder cycle with the import that makes each hop, and
 * how to untie them. Empty when there is no cycle.
 */
export function formatCycles(
  modules: readonly ModuleCycle[],
  folders: readonly FolderCycle[],
): string {
  if (modules.length === 0 && folders.length === 0) return "";
  const lines: string[] = [];
  for (const cycle of modules) {
    lines.push(`Module cycle: ${[...cycle.files, cycle.files[0]].join(" → ")}`);
    if (cycle.knot.length > cycle.files.length) {
      lines.push(`  one cycle of a knot of ${cycle.knot.length} files, whose imports are:`);
      for (const edge of cycle.imports) lines.push(`  ${edge.from} imports ${edge.to}`);
    }
  }
  for (const cycle of folders) {
    lines.push(`Folder cycle: ${[...cycle.folders, cycle.folders[0]].join(" → ")}`);
    for (const hop of cycle.hops) lines.push(`  ${hop.from} imports ${hop.to}`);
    if (cycle.knot.length > cycle.folders.length) {
      lines.push(`  one cycle of a knot of ${cycle.knot.length} folders: ${cycle.knot.join(", ")}`);
    }
  }
  lines.push(
    `${modules.length} module cycle(s), ${folders.length} folder cycle(s): move what both sides ` +
      "share (a constant, an error class, a type) into a leaf module they can both import",
  );
  return lines.join("\n");
}
