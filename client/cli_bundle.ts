/**
 * The host CLI bundled into one JS file, so that `./marsh` starts without
 * resolving and loading main.ts's module graph file by file (docs/guide.md,
 * "How fast marsh starts"). The launcher runs the bundle while it is fresh
 * and the sources otherwise; this module builds it and writes the state
 * file the launcher checks.
 *
 * The state file, `current` in the bundle dir, is three parts:
 *
 *     <the Deno path>
 *     <the bundle's directory name, or "-" when bundling these sources failed>
 *     <`sha256sum` of every file the bundle is made from, absolute paths>
 *
 * so the launcher's check is one `sha256sum` over the listed files compared
 * with the stored lines: a changed, added or removed import changes a listed
 * file, so the list itself never goes stale unnoticed. The sums are taken
 * before bundling: a file edited meanwhile reads as changed on the next run.
 *
 * In a bundle `import.meta.url` is the bundle's own URL. The CLI uses it only
 * as `new URL("../", import.meta.url)` in modules one folder below the repo,
 * to find the repo; the bundle gets that URL written in, and any other use
 * refuses to bundle (the launcher then runs the sources).
 *
 * Needs read on the repo and on `dir`, write on `dir`, and `--allow-run`
 * for `deno`.
 *
 * @module
 */

import { denoToolCommand, entryModule } from "../protocol/entrypoints.ts";

const repo = new URL("../", import.meta.url).pathname;

/** The entry the bundle is made from. */
export const CLI_ENTRY = entryModule("cli");

/**
 * What commander's Node imports become in the bundle, a second entry of the
 * same `deno bundle` (so it lands at `client/commander_node.js` in the
 * bundle dir).
 */
const COMMANDER_NODE = "client/commander_node.ts";

/** The state file's name in the bundle dir. */
export const STATE_NAME = "current";

/** The bundle's file name when bundling failed for these sums. */
export const FAILED = "-";

/**
 * Files the bundle depends on besides main.ts's module graph: the import map
 * and lock (npm versions), the pinned Deno and the launcher, and this builder.
 */
const EXTRA_INPUTS = [
  "deno.json",
  "deno.lock",
  "bin/deno",
  "marsh",
  "client/cli_bundle.ts",
  "client/cli_bundle_main.ts",
  COMMANDER_NODE,
];

/** The one use of `import.meta.url` a bundle can keep (see the module doc). */
const REPO_URL_USE = 'new URL("../", import.meta.url)';

/** Bundling is impossible or failed; the message says why. */
export class CliBundleError extends Error {
  override name = "CliBundleError";
}

/** What the launcher's check compares: the Deno, the bundle's name, the sums. */
export interface BundleState {
  readonly deno: string;
  /** A directory in the bundle dir holding `main.js` and its chunks, or {@linkcode FAILED}. */
  readonly bundle: string;
  /** `sha256sum`'s lines for the inputs, each `<hex>  <absolute path>`. */
  readonly sums: string;
}

const dec = new TextDecoder();

async function run(
  deno: string,
  tool: "info" | "bundle",
  args: string[],
): Promise<Deno.CommandOutput> {
  try {
    return await denoToolCommand(deno, tool, args, {
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).output();
  } catch (cause) {
    throw new CliBundleError(`cannot run ${deno}: ${message(cause)}`, { cause });
  }
}

function failed(deno: string, what: string, out: Deno.CommandOutput): CliBundleError {
  const stderr = dec.decode(out.stderr).trim();
  return new CliBundleError(
    `${deno} ${what} failed (exit ${out.code})${stderr ? `: ${stderr}` : ""}`,
  );
}

/** What a bundle is made from, as absolute paths. */
export interface BundleInputs {
  /** The local modules of main.ts's graph (what `import()` loads on demand included). */
  readonly modules: readonly string[];
  /** The modules and the other inputs, sorted: what the state file sums. */
  readonly files: readonly string[];
}

/**
 * main.ts's local modules and every file the bundle depends on.
 *
 * @throws {CliBundleError} when `deno info` fails, or a path `sha256sum`
 *   would escape (a backslash or a newline)
 */
export async function bundleInputs(deno: string): Promise<BundleInputs> {
  const out = await run(deno, "info", ["--json", CLI_ENTRY]);
  if (!out.success) throw failed(deno, `info ${CLI_ENTRY}`, out);
  const info = JSON.parse(dec.decode(out.stdout)) as {
    modules: { specifier: string; error?: string }[];
  };
  // A module that cannot be loaded (an `import()` of a missing file) is
  // deno bundle's to report; only files that exist can be summed.
  const modules = info.modules.filter((m) => m.specifier.startsWith("file://") && !m.error)
    .map((m) => new URL(m.specifier).pathname);
  const files = [...new Set([...modules, ...EXTRA_INPUTS.map((f) => `${repo}${f}`)])].sort();
  for (const f of files) {
    if (/[\\\n]/.test(f)) {
      throw new CliBundleError(`cannot bundle a file whose path has a backslash or newline: ${f}`);
    }
  }
  return { modules, files };
}

/** `sha256sum FILES...`'s output for `files`. */
export async function sha256sums(files: readonly string[]): Promise<string> {
  const lines: string[] = [];
  for (const f of files) {
    const digest = await crypto.subtle.digest("SHA-256", await Deno.readFile(f));
    const hex = Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
    lines.push(`${hex}  ${f}\n`);
  }
  return lines.join("");
}

/**
 * Refuses sources whose `import.meta` the bundle would change: `main` other
 * than in main.ts (every module of a bundle is the main module), `url` other
 * than as {@linkcode REPO_URL_USE} one folder below the repo, or any other
 * property.
 *
 * @throws {CliBundleError} naming the file
 */
export async function checkImportMeta(modules: readonly string[]): Promise<void> {
  const at = REPO_URL_USE.indexOf("import.meta");
  for (const f of modules) {
    const text = await Deno.readTextFile(f);
    const rel = f.startsWith(repo) ? f.slice(repo.length) : f;
    for (const m of text.matchAll(/import\.meta\.(\w+)/g)) {
      const ok = m[1] === "main"
        ? rel === "main.ts"
        : m[1] === "url" && /^[^/]+\/[^/]+$/.test(rel) &&
          text.slice(m.index - at, m.index - at + REPO_URL_USE.length) === REPO_URL_USE;
      if (!ok) {
        throw new CliBundleError(
          `${rel} uses import.meta.${m[1]} in a way a bundle would change; only main.ts may use ` +
            `import.meta.main, and only modules one folder deep ${REPO_URL_USE}`,
        );
      }
    }
  }
}

/** Parses the state file; null when it is not one. */
export function parseState(text: string): BundleState | null {
  const a = text.indexOf("\n");
  const b = text.indexOf("\n", a + 1);
  if (a <= 0 || b <= a + 1) return null;
  return { deno: text.slice(0, a), bundle: text.slice(a + 1, b), sums: text.slice(b + 1) };
}

/** The state file's text (the launcher reads it as three parts, see the module doc). */
export function formatState(s: BundleState): string {
  return `${s.deno}\n${s.bundle}\n${s.sums}`;
}

async function writeAtomic(path: string, data: string | Uint8Array): Promise<void> {
  const tmp = `${path}.tmp-${Deno.pid}`;
  try {
    if (typeof data === "string") await Deno.writeTextFile(tmp, data, { mode: 0o600 });
    else await Deno.writeFile(tmp, data, { mode: 0o600 });
    await Deno.rename(tmp, path);
  } finally {
    await Deno.remove(tmp).catch((error) => {
      if (!(error instanceof Deno.errors.NotFound)) throw error;
      // Renamed into place.
    });
  }
}

/**
 * How long a superseded bundle stays: a launcher may have read the state
 * file just before, and a running CLI loads its chunks on demand.
 */
const STALE_MS = 10 * 60_000;
/** The marker a superseded bundle gets; its mtime is when it was superseded. */
const SUPERSEDED = "superseded";

/**
 * Marks every bundle but `keep` superseded (once) and removes those marked
 * longer than STALE_MS ago. The marker, not the bundle's own mtime, dates
 * it: a bundle built long ago may have been current a moment ago. Exported
 * for its test.
 */
export async function removeStale(dir: string, keep: string): Promise<void> {
  await Deno.remove(`${dir}/${keep}/${SUPERSEDED}`).catch((error) => {
    if (!(error instanceof Deno.errors.NotFound)) throw error;
    // Never superseded, or current again.
  });
  for await (const e of Deno.readDir(dir)) {
    if (!/^cli-[0-9a-f]+$/.test(e.name) || e.name === keep) continue;
    const path = `${dir}/${e.name}`;
    let since: number;
    try {
      since = (await Deno.stat(`${path}/${SUPERSEDED}`)).mtime?.getTime() ?? 0;
    } catch (error) {
      if (!(error instanceof Deno.errors.NotFound)) throw error;
      // Superseded now: it goes after STALE_MS.
      await Deno.writeTextFile(`${path}/${SUPERSEDED}`, "").catch((e2) => {
        if (!(e2 instanceof Deno.errors.NotFound)) throw e2;
        // Another builder removed it.
      });
      continue;
    }
    if (Date.now() - since < STALE_MS) continue;
    await Deno.remove(path, { recursive: true }).catch((error) => {
      if (!(error instanceof Deno.errors.NotFound)) throw error;
      // Another builder removed it.
    });
  }
}

/**
 * Bundles main.ts into `dir` (a directory that exists, the caller's own) and
 * records it in the state file; a bundle of the same sources already there
 * is kept. When bundling fails the state file records these sums as failed,
 * so the launcher does not try again until a source changes.
 *
 * @param deno the Deno the launcher runs (the state names it: another Deno rebuilds)
 * @returns the bundle's path
 * @throws {CliBundleError} when the sources cannot be bundled
 */
export async function buildCliBundle(deno: string, dir: string): Promise<string> {
  const { modules, files } = await bundleInputs(deno);
  const sums = await sha256sums(files);
  const name = `cli-${await shortHash(`${deno}\n${sums}`)}`;
  const out = `${dir}/${name}`;
  try {
    await checkImportMeta(modules);
    if (!(await exists(`${out}/main.js`))) await bundle(deno, out);
  } catch (error) {
    if (error instanceof CliBundleError) {
      await writeAtomic(`${dir}/${STATE_NAME}`, formatState({ deno, bundle: FAILED, sums }));
    }
    throw error;
  }
  await writeAtomic(`${dir}/${STATE_NAME}`, formatState({ deno, bundle: name, sums }));
  await removeStale(dir, name);
  return `${out}/main.js`;
}

/**
 * Bundles into a temp dir beside `out` and renames it to `out`. Code
 * splitting keeps what `import()` loads on demand in chunks of its own, with
 * the built-in modules they import (`node:crypto` for the engine's paths), so
 * the other commands do not load them.
 */
async function bundle(deno: string, out: string): Promise<void> {
  const tmp = `${out}.tmp-${Deno.pid}`;
  try {
    const result = await run(deno, "bundle", [
      "--code-splitting",
      `--outdir=${tmp}`,
      CLI_ENTRY,
      `${repo}${COMMANDER_NODE}`,
    ]);
    if (!result.success) throw failed(deno, `bundle ${CLI_ENTRY}`, result);
    // Every module sits one folder below the repo (checkImportMeta), so one
    // URL there stands for all of them.
    const here = `new URL("../", ${
      JSON.stringify(new URL("client/cli.js", `file://${repo}`).href)
    })`;
    for await (const e of Deno.readDir(tmp)) {
      if (!e.name.endsWith(".js")) continue;
      const fixed = (await Deno.readTextFile(`${tmp}/${e.name}`)).replaceAll(REPO_URL_USE, here);
      // Comment lines aside (commander's JSDoc mentions import.meta.filename).
      const left = fixed.split("\n").find((line) =>
        /import\.meta\.(?!main\b)\w+/.test(line) && !/^\s*(\*|\/\/|\/\*)/.test(line)
      );
      if (left !== undefined) {
        throw new CliBundleError(`the bundle keeps import.meta in \`${left.trim()}\``);
      }
      await Deno.writeTextFile(
        `${tmp}/${e.name}`,
        e.name === "main.js" ? useCommanderNode(fixed) : fixed,
      );
    }
    if (!(await exists(`${tmp}/main.js`))) {
      throw new CliBundleError(`${deno} bundle wrote no main.js`);
    }
    try {
      await Deno.rename(tmp, out);
    } catch (error) {
      // Another launcher's builder put the same sources' bundle there first.
      if (!(await exists(`${out}/main.js`))) throw error;
    }
  } finally {
    await Deno.remove(tmp, { recursive: true }).catch((error) => {
      if (!(error instanceof Deno.errors.NotFound)) throw error;
      // Renamed into place, or never written.
    });
  }
}

/** Node's modules commander imports, and what `client/commander_node.ts` calls each. */
const COMMANDER_NODE_IMPORTS: Readonly<Record<string, string>> = {
  "node:child_process": "childProcess",
  "node:events": "EventEmitter",
  "node:fs": "fs",
  "node:path": "path",
  "node:process": "process",
  "node:util": "stripVTControlCharacters",
};

/**
 * Points commander's imports of Node's built-in modules at
 * `client/commander_node.ts`: loading them (`node:process` above all) was
 * most of the CLI's start (docs/guide.md, "How fast marsh starts"). Only the
 * import lines within commander's own modules (the bundle's `// <path>`
 * comment before them names a `/commander/` file) and of the expected shape
 * change; anything else keeps Node's module.
 */
export function useCommanderNode(text: string): string {
  let inCommander = false;
  return text.split("\n").map((line) => {
    const from = /^\/\/ (\S+\.(?:[cm]?js|tsx?))$/.exec(line);
    if (from) inCommander = from[1]!.includes("/commander/");
    if (!inCommander) return line;
    const m = /^import (?:(\w+)|\{ (\w+)(?: as (\w+))? \}) from "(node:[a-z_]+)";$/.exec(line);
    const name = m ? COMMANDER_NODE_IMPORTS[m[4]!] : undefined;
    if (!m || name === undefined) return line;
    // `import x from` takes the default; commander_node.ts names each instead.
    if (m[1] !== undefined) {
      return `import { ${name} as ${m[1]} } from "./client/commander_node.js";`;
    }
    if (m[2] !== name) return line;
    return `import { ${name} as ${m[3] ?? name} } from "./client/commander_node.js";`;
  }).join("\n");
}

async function shortHash(text: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return Array.from(new Uint8Array(digest).slice(0, 8), (b) => b.toString(16).padStart(2, "0"))
    .join("");
}

async function exists(path: string): Promise<boolean> {
  try {
    await Deno.lstat(path);
    return true;
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return false;
    throw error;
  }
}

function message(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
