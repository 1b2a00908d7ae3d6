/**
 * The entrypoint registry: every marsh process that runs on Deno, by name,
 * with its module, its exact Deno flags, what of the environment it may read
 * and what its spawner sets, and the one helper ({@linkcode entryCommand})
 * every spawn site uses. The launchers (`./marsh`, `bin/marshd`) carry a
 * block generated from here (`tools/registry_check_main.ts --write`), and
 * `deno task check` fails when they, or the permission table in
 * docs/architecture.md, disagree with it. Why each grant is there is in the
 * JSDoc of the function that builds it; what the flags do not contain is in
 * docs/architecture.md, "The threat model, honestly".
 *
 * The flags themselves are built in `entry_flags.ts`, re-exported here.
 * Both modules import only `control_dir.ts`: the CLI loads them on every
 * command (docs/guide.md, "How fast marsh starts"), and the daemon, the
 * worker and the engine helpers all build their children's flags here.
 *
 * @module
 */

import { BRANCH_SOCKET_SLOTS } from "./control_dir.ts";
import {
  cliBundleFlags,
  cliFlags,
  DAEMON_ENV,
  daemonFlags,
  engineFlags,
  jobClientFlags,
  kitBuildFlags,
  kitCheckFlags,
  kitWorkerFlags,
  plannerFlags,
  RUNTIME_ENV,
  splitfsFlags,
  WORKER_ENV,
  workerFlags,
} from "./entry_flags.ts";

export {
  cliBundleFlags,
  cliFlags,
  DAEMON_ENV,
  daemonFlags,
  engineFlags,
  FORCE_SUBREAPER_ENV,
  jobClientFlags,
  kitBuildFlags,
  kitCheckFlags,
  kitWorkerFlags,
  LIBC_PATHS,
  plannerFlags,
  RUNTIME_ENV,
  splitfsFlags,
  workerFlags,
} from "./entry_flags.ts";

const repo = new URL("../", import.meta.url).pathname;

/** The repository's Deno config, passed to every entry that runs from the sources. */
export const REPO_CONFIG = `${repo}deno.json`;

/** The Deno executable to start entrypoints with: the launcher's pinned one. */
export function denoPath(): string {
  return Deno.env.get("MARSH_DENO") ?? Deno.execPath();
}

/** What each entrypoint's flags are built from (the parameters of its function in `entry_flags.ts`). */
export interface EntryArgs {
  /** `./marsh`: the control dir, and `MARSH_SOCK` inside a shell branch. */
  readonly cli: { readonly home: string; readonly branchSocket?: string };
  /** `./marsh`'s bundler: the checkout, the bundle dir, the pinned Deno. */
  readonly "cli-bundle": { readonly root: string; readonly dir: string; readonly deno: string };
  /** The daemon: its control dir and the pinned Deno it starts its children with. */
  readonly daemon: { readonly home: string; readonly deno: string };
  /** The split-filesystem service: the same flags everywhere. */
  readonly splitfs: Record<string, never>;
  /** The git planner: the split's objects dir and the temp dir it may write. */
  readonly planner: { readonly objects: string; readonly tmp: string };
  /** The worker without an engine: the control dir. */
  readonly worker: { readonly home: string };
  /** The worker with an engine: the control dir and the engine's socket. */
  readonly "kit-worker": { readonly home: string; readonly engine: string };
  /** `marsh engine`: the control dir, the engine's exec root, the sockets it may ask. */
  readonly engine: {
    readonly home: string;
    readonly execRoot: string;
    readonly sockets: readonly string[];
  };
  /** `marsh kit build`: the engine's socket. */
  readonly "kit-build": { readonly socket: string };
  /** `marsh kits add`'s check: the engine's socket, the control dir, a chosen `--home`. */
  readonly "kit-check": {
    readonly socket: string;
    readonly controlDir: string;
    readonly home?: string;
  };
  /** The in-job client: its capability socket. */
  readonly "job-client": { readonly socket: string };
}

/** An entrypoint's name. */
export type EntryName = keyof EntryArgs;

/**
 * What a probe under an entrypoint's flags finds granted
 * (`tests/probes/capabilities.ts`; `tests/permissions_test.ts` runs it for
 * every entry): read a project file, write `/tmp`, `dlopen` libc or another
 * library, run `git`, listen on TCP, read `HOME`, read a variable no entrypoint names.
 */
export interface Grants {
  /** Read a file of the project (the repository's README.md). */
  readonly readProject: boolean;
  /** Write `/tmp/marsh-probe-write`. */
  readonly writeTmp: boolean;
  /** `dlopen` libc. */
  readonly ffiLibc: boolean;
  /** `dlopen` libm. */
  readonly ffiOther: boolean;
  /** Run `git --version`. */
  readonly runGit: boolean;
  /** Listen on a TCP port. */
  readonly net: boolean;
  /** Read `HOME`. */
  readonly envHome: boolean;
  /** Read a variable no entrypoint names. */
  readonly envOther: boolean;
}

/** One entrypoint. */
export interface Entrypoint<A> {
  /** The module it runs, relative to the repository. */
  readonly module: string;
  /** Who starts it: another entrypoint, or a launcher script. */
  readonly startedBy: readonly (EntryName | "./marsh" | "bin/marshd" | "the link script")[];
  /** Its Deno flags: permissions and run options (`--quiet`, `--no-prompt`, config). */
  flags(args: A): string[];
  /**
   * `repo`: run with `--config=<repo>/deno.json` from the sources; `none`:
   * the flags say `--no-config` (a bundle).
   */
  readonly config: "repo" | "none";
  /**
   * The variables its spawner sets for it; {@linkcode entryCommand} refuses
   * any other.
   */
  readonly sets: readonly string[];
  /**
   * The variables {@linkcode entryCommand} copies into its environment from
   * the spawner's, when set; nothing else of it is passed. `all`: the whole
   * environment is inherited (the engine helpers: dockerd and docker-modem
   * read `DOCKER_*` and the proxies).
   */
  readonly passes: readonly string[] | "all";
  /** What its flags grant, as the probe sees it. */
  readonly grants: Grants;
}

const NONE: Grants = {
  readProject: false,
  writeTmp: false,
  ffiLibc: false,
  ffiOther: false,
  runGit: false,
  net: false,
  envHome: false,
  envOther: false,
};

/** Every marsh entrypoint that runs on Deno. */
export const ENTRYPOINTS: { readonly [K in EntryName]: Entrypoint<EntryArgs[K]> } = {
  cli: {
    module: "main.ts",
    startedBy: ["./marsh"],
    flags: (a) => cliFlags(a.home, a.branchSocket),
    config: "repo",
    sets: [],
    passes: "all",
    grants: { ...NONE, runGit: true, envHome: true, envOther: true },
  },
  "cli-bundle": {
    module: "client/cli_bundle_main.ts",
    startedBy: ["./marsh"],
    flags: (a) => cliBundleFlags(a.root, a.dir, a.deno),
    config: "repo",
    sets: [],
    passes: "all",
    grants: { ...NONE, readProject: true },
  },
  daemon: {
    module: "daemon/main.ts",
    startedBy: ["cli", "bin/marshd"],
    flags: (a) => daemonFlags(a.home, a.deno, BRANCH_SOCKET_SLOTS),
    config: "repo",
    sets: ["MARSH_HOME"],
    passes: DAEMON_ENV,
    grants: { ...NONE, envHome: true },
  },
  splitfs: {
    module: "splitfs/main.ts",
    startedBy: ["daemon", "cli"],
    flags: () => splitfsFlags(),
    config: "repo",
    sets: [],
    passes: RUNTIME_ENV,
    grants: { ...NONE, ffiLibc: true },
  },
  planner: {
    module: "resolve/main.ts",
    startedBy: ["daemon"],
    flags: (a) => plannerFlags(a.objects, a.tmp),
    config: "repo",
    sets: [],
    passes: RUNTIME_ENV,
    grants: { ...NONE, runGit: true },
  },
  worker: {
    module: "worker/main.ts",
    startedBy: ["daemon"],
    flags: (a) => workerFlags(a.home),
    config: "repo",
    sets: ["MARSH_HOME"],
    passes: [...RUNTIME_ENV, ...WORKER_ENV],
    grants: NONE,
  },
  "kit-worker": {
    module: "worker/main.ts",
    startedBy: ["daemon"],
    flags: (a) => kitWorkerFlags(a.home, a.engine),
    config: "repo",
    sets: ["MARSH_HOME"],
    passes: [...RUNTIME_ENV, ...WORKER_ENV],
    grants: { ...NONE, envHome: true, envOther: true },
  },
  engine: {
    module: "docker/engine_main.ts",
    startedBy: ["cli"],
    flags: (a) => engineFlags(a.home, a.execRoot, a.sockets),
    config: "repo",
    sets: ["MARSH_HOME", "MARSH_DENO"],
    passes: "all",
    grants: { ...NONE, runGit: true, envHome: true, envOther: true },
  },
  "kit-build": {
    module: "docker/kit_build_main.ts",
    startedBy: ["cli"],
    flags: (a) => kitBuildFlags(a.socket),
    config: "repo",
    sets: ["MARSH_HOME", "MARSH_DENO"],
    passes: "all",
    grants: { ...NONE, readProject: true, envHome: true, envOther: true },
  },
  "kit-check": {
    module: "docker/kit_check_main.ts",
    startedBy: ["cli"],
    flags: (a) => kitCheckFlags(a.socket, a.controlDir, a.home),
    config: "repo",
    sets: ["MARSH_HOME", "MARSH_DENO"],
    passes: "all",
    grants: { ...NONE, envHome: true, envOther: true },
  },
  "job-client": {
    module: "job/main.ts",
    startedBy: ["the link script"],
    flags: (a) => jobClientFlags(a.socket),
    config: "none",
    sets: [],
    passes: "all",
    grants: { ...NONE, readProject: true, runGit: true, envHome: true, envOther: true },
  },
};

/** An entrypoint's module as an absolute path. */
export function entryModule(name: EntryName): string {
  return `${repo}${ENTRYPOINTS[name].module}`;
}

/**
 * `deno run` arguments for entrypoint `name`: its flags, its config, its
 * module, then `args`.
 */
export function entryArgv<K extends EntryName>(
  name: K,
  flagArgs: EntryArgs[K],
  args: readonly string[] = [],
): string[] {
  const entry: Entrypoint<EntryArgs[K]> = ENTRYPOINTS[name];
  return [
    "run",
    ...entry.flags(flagArgs),
    ...(entry.config === "repo" ? [`--config=${REPO_CONFIG}`] : []),
    entryModule(name),
    ...args,
  ];
}

/** How to spawn an entrypoint: `Deno.CommandOptions` less what the registry decides. */
export interface EntrySpawn extends Omit<Deno.CommandOptions, "args" | "env" | "clearEnv"> {
  /** The entry's own arguments, after its module. */
  readonly args?: readonly string[];
  /** Variables to set; each must be one the entry's `sets` names. */
  readonly env?: Readonly<Record<string, string>>;
  /** A program and its arguments to run `deno run …` under (`unshare …`). */
  readonly wrapper?: readonly string[];
  /** The Deno to run (default {@linkcode denoPath}). */
  readonly deno?: string;
}

/**
 * The one way marsh starts one of its Deno entrypoints: `deno run <flags>
 * <config> <module> <args>`, optionally under a wrapper program.
 *
 * @throws {TypeError} when `env` sets a variable the entry does not name in `sets`
 */
export function entryCommand<K extends EntryName>(
  name: K,
  flagArgs: EntryArgs[K],
  options: EntrySpawn = {},
): Deno.Command {
  const { args, env, wrapper, deno, ...rest } = options;
  const entry: Entrypoint<EntryArgs[K]> = ENTRYPOINTS[name];
  for (const k of Object.keys(env ?? {})) {
    if (!entry.sets.includes(k)) throw new TypeError(`entrypoint ${name} is not given ${k}`);
  }
  const argv = [deno ?? denoPath(), ...entryArgv(name, flagArgs, args)];
  const full = wrapper === undefined ? argv : [...wrapper, "--", ...argv];
  const passed: Record<string, string> = {};
  if (entry.passes !== "all") {
    for (const k of entry.passes) {
      const v = Deno.env.get(k);
      if (v !== undefined) passed[k] = v;
    }
  }
  return new Deno.Command(full[0]!, {
    ...rest,
    args: full.slice(1),
    clearEnv: entry.passes !== "all",
    env: { ...passed, ...env },
  });
}

/**
 * A Deno tool run on the repository's sources (`deno info`, `deno bundle`),
 * with the repository's config and no update check.
 */
export function denoToolCommand(
  deno: string,
  tool: "info" | "bundle",
  args: readonly string[],
  options: Omit<Deno.CommandOptions, "args" | "env" | "clearEnv"> = {},
): Deno.Command {
  return new Deno.Command(deno, {
    ...options,
    args: [tool, ...(tool === "bundle" ? ["--quiet"] : []), `--config=${REPO_CONFIG}`, ...args],
    env: { DENO_NO_UPDATE_CHECK: "1" },
  });
}
