/**
 * `marsh engine start|stop|status` and `marsh kit build`. The CLI has no
 * network permission, so the work that reaches a Docker socket runs in a
 * child entrypoint with its own flags (`protocol/entrypoints.ts`): this module
 * checks the request, spawns the child, and relays its output.
 *
 * Needs `--allow-run` (the pinned Deno), `--allow-env`, and read on the
 * control dir (to see whether the private engine runs).
 *
 * The `docker/` modules are imported when a command runs, not with this
 * module: every `marsh` command registers these, and the others must not
 * pay for loading them (docs/guide.md, "How fast marsh starts").
 *
 * @module
 */

import type { Command } from "commander";
import { KIT_NAME_WORDS } from "../model/kit_name.ts";
import { ControlDirError, controlDirPath } from "../protocol/control_dir.ts";
import { denoPath, entryCommand, type EntrySpawn } from "../protocol/entrypoints.ts";
import { CliError } from "./cli_error.ts";
import type { CliIo } from "./io.ts";

/** What `marsh engine …` is asked to do. */
export type EngineAction = "start" | "stop" | "status";

/** Parsed `marsh kit build` options. */
export interface KitBuildOptions {
  readonly name: string;
  readonly fromHost: boolean;
  readonly bins: readonly string[];
  readonly files: readonly string[];
}

function homeOf(io: CliIo, who: string): string {
  const env = io.env();
  try {
    return controlDirPath({ get: (k) => env[k] });
  } catch (error) {
    if (error instanceof ControlDirError) throw new CliError(`${who}: ${error.message}`);
    throw error;
  }
}

/** Copies a child's stdout to `io.write` and its stderr, line by line, to `io.error`. */
async function relay(child: Deno.ChildProcess, io: CliIo): Promise<number> {
  const copyOut = (async () => {
    let open = true;
    for await (const chunk of child.stdout) {
      if (open) open = await io.write(chunk);
    }
  })();
  const copyErr = (async () => {
    let pending = "";
    for await (const text of child.stderr.pipeThrough(new TextDecoderStream())) {
      pending += text;
      let nl: number;
      while ((nl = pending.indexOf("\n")) >= 0) {
        io.error(pending.slice(0, nl));
        pending = pending.slice(nl + 1);
      }
    }
    if (pending !== "") io.error(pending);
  })();
  const [status] = await Promise.all([child.status, copyOut, copyErr]);
  return status.code;
}

/** How both engine entrypoints are started: in the caller's cwd, output piped to {@linkcode relay}. */
function relayed(home: string, args: readonly string[], io: CliIo): EntrySpawn {
  const deno = denoPath();
  return {
    deno,
    args,
    cwd: io.cwd(),
    env: { MARSH_HOME: home, MARSH_DENO: deno },
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  };
}

/**
 * `marsh engine start|stop|status [--json]`: runs `docker/engine_main.ts`
 * for the control dir's private engine.
 *
 * @returns the child's exit status (status: 1 when no engine answers)
 * @throws {CliError} when the control dir cannot be located
 */
export async function engineCommand(
  action: EngineAction,
  opts: { readonly json: boolean },
  io: CliIo,
): Promise<number> {
  const who = `marsh engine ${action}`;
  const home = homeOf(io, who);
  const env = io.env();
  const args: string[] = [action];
  if (opts.json) args.push("--json");
  if (io.stderrIsTerminal) args.push("--progress");
  const [{ engineSockets }, { enginePaths }] = await Promise.all([
    import("../docker/flags.ts"),
    import("../docker/engine_socket.ts"),
  ]);
  const sockets = engineSockets(home, { get: (k) => env[k] });
  const flagArgs = { home, execRoot: enginePaths(home).execRoot, sockets };
  return await relay(entryCommand("engine", flagArgs, relayed(home, args, io)).spawn(), io);
}

/**
 * `marsh kit build NAME --from-host [--bin PROG]... [--file SRC:DST]...`:
 * checks the request here (nothing is built when it is wrong), then runs
 * `docker/kit_build_main.ts` against the engine marsh uses.
 *
 * @returns the child's exit status
 * @throws {CliError} (status 2) on a bad name, a missing `--from-host`, a
 *   malformed `--file`, or a `DOCKER_HOST` that is not unix://
 */
export async function kitBuildCommand(opts: KitBuildOptions, io: CliIo): Promise<number> {
  const who = "marsh kit build";
  const [{ checkKitName, KitBuildError }, { parseFileCopy, RootfsError }] = await Promise.all([
    import("../docker/kit_build.ts"),
    import("../docker/rootfs.ts"),
  ]);
  try {
    checkKitName(opts.name);
    if (!opts.fromHost) {
      throw new KitBuildError(
        "--from-host is required: images are assembled from this host's files, the only source today " +
          "(marsh kit build NAME --from-host [--bin PROG]... [--file SRC:DST]...)",
      );
    }
    for (const f of opts.files) parseFileCopy(f);
  } catch (error) {
    if (error instanceof KitBuildError || error instanceof RootfsError) {
      throw new CliError(`${who}: ${error.message}`);
    }
    throw error;
  }
  const home = homeOf(io, who);
  const env = io.env();
  const { EngineError, engineSocket } = await import("../docker/engine_socket.ts");
  let socket: string;
  try {
    socket = engineSocket({ get: (k) => env[k] }, home).path;
  } catch (error) {
    if (error instanceof EngineError) throw new CliError(`${who}: ${error.message}`);
    throw error;
  }
  const args = [`--socket=${socket}`];
  if (io.stderrIsTerminal) args.push("--progress");
  for (const b of opts.bins) args.push(`--bin=${b}`);
  for (const f of opts.files) args.push(`--file=${f}`);
  args.push("--", opts.name);
  return await relay(entryCommand("kit-build", { socket }, relayed(home, args, io)).spawn(), io);
}

const ENGINE_HELP = `
A private Docker engine for machines without one: dockerd with vfs storage,
no iptables and no bridge (so Kit containers run with --network none), its
own socket, data root, pidfile and log under <control dir>/engine/, and its
exec root in /run/marsh-engine-<hash>. It needs root and dockerd
(\`apt-get install -y docker.io\`).

marsh talks to DOCKER_HOST (unix:// only) when it is set, else to this engine
when it runs, else to /var/run/docker.sock.

Examples:
  marsh engine start
  marsh engine status --json | jq .reachable
  marsh engine stop
`;

const KIT_BUILD_HELP = `
Builds a Kit image without any registry: a root filesystem of this host's
files (busybox with its applets, each --bin program with every shared
library it needs, the libraries the host deno needs, each --file copy, and
/etc/passwd, /etc/group, /tmp and /home/kit), imported into the engine as
marsh-kit/NAME:<12 hex of the tar's sha256>, and tagged marsh-kit/NAME:latest
too, so \`marsh kits add KIT --image NAME\` finds it. Prints the image id, and
the next command on stderr. The same inputs give the same tag: building again
imports nothing.

NAME: ${KIT_NAME_WORDS}.
--file SRC:DST copies a host file or directory to the absolute path DST.

Examples:
  marsh kit build fixture --from-host --bin git
  marsh kit build tools --from-host --bin git --bin jq --file ./tools.conf:/etc/tools.conf
`;

/** What {@linkcode registerEngineCommands} needs from `main.ts`. */
export interface EngineCommandsContext {
  readonly io: CliIo;
  /** Records the process's exit status. */
  readonly setStatus: (code: number) => void;
  /** `main.ts`'s commander configuration (error output naming the command's help). */
  readonly userErrors: (cmd: Command, path: string) => Command;
}

/** Adds `marsh engine start|stop|status` and `marsh kit build` to `program`. */
export function registerEngineCommands(program: Command, ctx: EngineCommandsContext): void {
  const { io, setStatus, userErrors } = ctx;
  const engine = userErrors(program.command("engine"), "marsh engine")
    .description("Start, stop or inspect a private Docker engine for Kit containers.")
    .addHelpText("after", ENGINE_HELP);
  const actions: [EngineAction, string][] = [
    ["start", "Start the private engine unless it runs, and wait until it answers."],
    ["stop", "Stop the private engine (SIGTERM, then SIGKILL after 30 s)."],
    ["status", "Say which engine marsh uses and whether it answers; exit 1 when it does not."],
  ];
  for (const [action, description] of actions) {
    userErrors(engine.command(action), `marsh engine ${action}`)
      .description(description)
      .option("--json", "print one JSON object")
      .action(async (opts: { json?: boolean }) => {
        setStatus(await engineCommand(action, { json: opts.json === true }, io));
      });
  }

  const kit = userErrors(program.command("kit"), "marsh kit")
    .description("Manage Kit images.");
  userErrors(kit.command("build"), "marsh kit build")
    .description("Build a Kit image from this host's files and print its image id.")
    .argument("<NAME>", "the kit's name")
    .option("--from-host", "assemble the image from this host's files (required)")
    .option(
      "--bin <PROG>",
      "a program (on PATH, or a path) to include with its libraries (repeatable)",
      (v: string, prev: string[] | undefined) => [...(prev ?? []), v],
    )
    .option(
      "--file <SRC:DST>",
      "a host file or directory to copy to DST in the image (repeatable)",
      (v: string, prev: string[] | undefined) => [...(prev ?? []), v],
    )
    .addHelpText("after", KIT_BUILD_HELP)
    .action(async (name: string, opts: { fromHost?: boolean; bin?: string[]; file?: string[] }) => {
      setStatus(
        await kitBuildCommand(
          { name, fromHost: opts.fromHost === true, bins: opts.bin ?? [], files: opts.file ?? [] },
          io,
        ),
      );
    });
}
