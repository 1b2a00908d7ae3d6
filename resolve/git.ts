/**
 * Git, run for resolution planning (docs/resolution.md, "Git as the merge
 * engine") in a hardened, private repository: a scratch `GIT_DIR` made here
 * holds the only config Git reads (no system or global config, no hooks, no
 * fsmonitor, no filters, no replace objects), its own index, and
 * `info/attributes` that turn every content conversion off. Objects are
 * read from the object directories the caller names (the split's store, the
 * project's `.git/objects`) and written only into the one it names for
 * writing. No ref is ever written: nothing here changes the project's
 * repository.
 *
 * Needs `--allow-run=git`, `--allow-env=PATH` (read) and read/write on the
 * temp dir it is made in (the scratch repository) and on the object dirs.
 *
 * @module
 */

/** Object ids are 40 hex digits (SHA-1) or 64 (SHA-256). */
export type ObjectFormat = "sha1" | "sha256";

/** Where Git reads and writes objects. */
export interface ObjectDirs {
  /** Where new objects go (commits, merged blobs and trees, a source's blobs). */
  readonly write: string;
  /**
   * Object dirs only read. Git still freshens (sets the mtime of) an object
   * it finds there when it would have written it, so name only dirs marsh
   * owns, never the project's `.git/objects`.
   */
  readonly read?: readonly string[];
  readonly format?: ObjectFormat;
}

/** Git failed, or said something the planner cannot read. */
export class ResolveGitError extends Error {
  override name = "ResolveGitError";
}

/** What one Git run gave back. */
export interface GitOutput {
  readonly code: number;
  readonly stdout: Uint8Array;
  readonly stderr: string;
}

/** Fixed so that the throwaway commits of equal inputs are the same objects. */
const FIXED_DATE = "1700000000 +0000";

/**
 * Every content conversion off: the bytes hashed are the bytes on disk, as
 * in a snapshot's root id. `$GIT_DIR/info/attributes` outranks every
 * `.gitattributes`; `merge` is left alone so Git's own text merge and binary
 * detection decide.
 */
const ATTRIBUTES = "* -text -eol -filter -ident -working-tree-encoding\n";

/** `-c` settings on every run, over the scratch config, which already has them. */
const FLAGS = [
  "core.hooksPath=/dev/null",
  "core.fsmonitor=false",
  "core.untrackedCache=false",
  "core.splitIndex=false",
  "core.autocrlf=false",
  "core.safecrlf=false",
  "core.symlinks=true",
  "core.fileMode=true",
  "core.quotePath=false",
  "gc.auto=0",
  // What Git writes here (small trees, throwaway commits, merged blobs) is made again when lost;
  // the applier checks every staged file against its blob id (docs/resolution.md, "The steps").
  // Git 2.39 fsyncs each loose object: 1,000 new trees cost ~0.4 s more with it.
  "core.fsync=none",
  "maintenance.auto=false",
  "merge.renames=true",
  "merge.conflictStyle=merge",
  "diff.renames=true",
].flatMap((c) => ["-c", c]);

const enc = new TextEncoder();
const dec = new TextDecoder();

/**
 * One entry of `GIT_ALTERNATE_OBJECT_DIRECTORIES`: Git C-unquotes an entry
 * that starts with `"`, which lets a path hold `:`.
 *
 * @throws {ResolveGitError} for a path with a control character
 */
function alternateEntry(path: string): string {
  // deno-lint-ignore no-control-regex
  if (/[\x00-\x1f\x7f]/.test(path)) {
    throw new ResolveGitError(`object directory ${JSON.stringify(path)} has a control character`);
  }
  return /[:"\\]/.test(path) ? `"${path.replaceAll("\\", "\\\\").replaceAll('"', '\\"')}"` : path;
}

/**
 * A private scratch repository to run Git in; owns its temp dir. Use with
 * `await using`.
 */
export class ScratchGit implements AsyncDisposable {
  readonly #dir: string;
  readonly #objects: ObjectDirs;
  #closed = false;

  private constructor(dir: string, objects: ObjectDirs) {
    this.#dir = dir;
    this.#objects = objects;
  }

  /**
   * Makes the scratch repository. `ignoreCase` is the project's
   * `core.ignoreCase` (it changes how excludes match). `tmpDir` is where it
   * is made (default: the system temp dir); the git planner entrypoint is
   * given one it may write (docs/resolution.md, "Where Git runs").
   *
   * @throws {ResolveGitError} when the write object dir is not a directory
   */
  static async create(
    objects: ObjectDirs,
    ignoreCase = false,
    tmpDir?: string,
  ): Promise<ScratchGit> {
    for (const d of [objects.write, ...(objects.read ?? [])]) {
      const st = await Deno.stat(d).catch((error: unknown) => {
        throw new ResolveGitError(`object directory ${d} cannot be read: ${error}`, {
          cause: error,
        });
      });
      if (!st.isDirectory) throw new ResolveGitError(`object directory ${d} is not a directory`);
      alternateEntry(d);
    }
    const dir = await Deno.makeTempDir({ prefix: "marsh-resolve-", dir: tmpDir });
    try {
      const sha256 = objects.format === "sha256";
      for (const sub of ["refs", "objects", "info", "home"]) await Deno.mkdir(`${dir}/${sub}`);
      await Deno.writeTextFile(`${dir}/HEAD`, "ref: refs/heads/main\n");
      await Deno.writeTextFile(
        `${dir}/config`,
        [
          "[core]",
          `\trepositoryformatversion = ${sha256 ? 1 : 0}`,
          "\tbare = false",
          `\tignoreCase = ${ignoreCase}`,
          ...(sha256 ? ["[extensions]", "\tobjectFormat = sha256"] : []),
          "",
        ].join("\n"),
      );
      await Deno.writeTextFile(`${dir}/info/attributes`, ATTRIBUTES);
      await Deno.writeFile(`${dir}/info/exclude`, new Uint8Array());
    } catch (error) {
      await Deno.remove(dir, { recursive: true });
      throw error;
    }
    return new ScratchGit(dir, objects);
  }

  /** The scratch `GIT_DIR`. */
  get dir(): string {
    return this.#dir;
  }

  /** The object dirs Git runs with. */
  get objects(): ObjectDirs {
    return this.#objects;
  }

  /** Replaces the scratch `info/exclude` (the project's exclude rules, for `git add`). */
  async setExclude(bytes: Uint8Array): Promise<void> {
    await Deno.writeFile(`${this.#dir}/info/exclude`, bytes);
  }

  #env(workTree: string | undefined): Record<string, string> {
    const home = `${this.#dir}/home`;
    const env: Record<string, string> = {
      PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin",
      HOME: home,
      XDG_CONFIG_HOME: `${home}/.config`,
      GIT_DIR: this.#dir,
      GIT_INDEX_FILE: `${this.#dir}/index`,
      GIT_OBJECT_DIRECTORY: this.#objects.write,
      GIT_CONFIG_NOSYSTEM: "1",
      GIT_CONFIG_GLOBAL: "/dev/null",
      GIT_ATTR_NOSYSTEM: "1",
      GIT_NO_REPLACE_OBJECTS: "1",
      GIT_LITERAL_PATHSPECS: "1",
      GIT_OPTIONAL_LOCKS: "0",
      GIT_TERMINAL_PROMPT: "0",
      GIT_AUTHOR_NAME: "marsh",
      GIT_AUTHOR_EMAIL: "marsh@localhost",
      GIT_COMMITTER_NAME: "marsh",
      GIT_COMMITTER_EMAIL: "marsh@localhost",
      GIT_AUTHOR_DATE: FIXED_DATE,
      GIT_COMMITTER_DATE: FIXED_DATE,
      LC_ALL: "C",
      TZ: "UTC",
    };
    const read = this.#objects.read ?? [];
    if (read.length > 0) env.GIT_ALTERNATE_OBJECT_DIRECTORIES = read.map(alternateEntry).join(":");
    if (workTree !== undefined) env.GIT_WORK_TREE = workTree;
    return env;
  }

  /**
   * Runs `git <hardening> ...args` and returns what it said, whatever its
   * exit status. `workTree` is set only for commands that read one.
   */
  async run(
    args: readonly string[],
    opts: { workTree?: string; stdin?: Uint8Array } = {},
  ): Promise<GitOutput> {
    if (this.#closed) throw new ResolveGitError("the scratch repository is closed");
    const child = new Deno.Command("git", {
      args: [...FLAGS, ...args],
      cwd: opts.workTree ?? this.#dir,
      clearEnv: true,
      env: this.#env(opts.workTree),
      stdin: opts.stdin === undefined ? "null" : "piped",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    // Written while stdout is read: a large batch would otherwise fill both pipes.
    let writeError: unknown = null;
    const writing = opts.stdin === undefined ? Promise.resolve() : (async () => {
      const w = child.stdin.getWriter();
      try {
        await w.write(opts.stdin);
        await w.close();
      } catch (error) {
        writeError = error;
      }
    })();
    const [out] = await Promise.all([child.output(), writing]);
    const stderr = dec.decode(out.stderr).trim();
    // Git that stopped reading says why in its status; one that did not must have had it all.
    if (writeError !== null && out.code === 0) {
      throw new ResolveGitError(
        `git ${args[0] ?? ""}: its input could not be written: ${writeError}`,
        {
          cause: writeError,
        },
      );
    }
    return { code: out.code, stdout: out.stdout, stderr };
  }

  /**
   * Runs Git and returns stdout.
   *
   * @throws {ResolveGitError} unless it exits 0; the message names the command and carries stderr
   */
  async ok(
    args: readonly string[],
    opts: { workTree?: string; stdin?: Uint8Array } = {},
  ): Promise<Uint8Array> {
    const out = await this.run(args, opts);
    if (out.code !== 0) throw failed(args, out);
    return out.stdout;
  }

  /** Like {@linkcode ok}, stdout as one trimmed line. */
  async line(args: readonly string[], opts: { workTree?: string } = {}): Promise<string> {
    return dec.decode(await this.ok(args, opts)).trim();
  }

  /** Removes the scratch repository (never the object dirs). Idempotent. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await Deno.remove(this.#dir, { recursive: true });
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}

/** The error for a Git run that failed. */
export function failed(args: readonly string[], out: GitOutput): ResolveGitError {
  return new ResolveGitError(
    `git ${args[0] ?? ""} failed (exit ${out.code}): ${out.stderr || "(no stderr)"}`,
  );
}

/** Bytes of text, for stdin. */
export function textBytes(s: string): Uint8Array {
  return enc.encode(s);
}
