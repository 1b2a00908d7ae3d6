/**
 * `marsh kits add|ls|rm`: the Kit registry (issue 5 §2). A registered
 * NAME is a command a split's argv branch (and later any job) can start.
 *
 * `kits add` checks the request here, then runs `docker/kit_check_main.ts`
 * (the CLI has no network and the daemon has no Docker permission,
 * docs/architecture.md "Permissions") to find the image in the engine marsh uses and to check a
 * chosen `--home`, and only then asks the daemon to register the image id
 * that check resolved. Every failure before the daemon's reply registers
 * nothing.
 *
 * Needs what {@linkcode connectDaemon} needs, and `--allow-run` for the
 * pinned Deno.
 *
 * The Kit rules and the `docker/` modules are imported when `kits add`
 * runs: every `marsh` command registers these, and the others must not pay
 * for loading them (docs/guide.md, "How fast marsh starts").
 *
 * @module
 */

import type { Command } from "commander";
import type * as KitRules from "../model/kit_rules.ts";
import { KIT_NAME_WORDS, RESERVED_KIT_NAMES } from "../model/kit_name.ts";
import { DEFAULT_WALL_S, MAX_WALL_S } from "../model/limits.ts";
import type { KitInfo } from "../protocol/daemon.ts";
import { denoPath, entryCommand } from "../protocol/entrypoints.ts";
import { CliError } from "./cli_error.ts";
import {
  connectDaemon,
  type DaemonConnection,
  type DaemonSocket,
  daemonSocket,
  request,
} from "./daemon_connect.ts";
import type { EngineCommandsContext } from "./engine_command.ts";
import type { CliIo } from "./io.ts";

const enc = new TextEncoder();
const dec = new TextDecoder();

/** `marsh kits add` as typed. */
export interface KitsAddOptions {
  readonly name: string;
  readonly image: string;
  /** `--entrypoint`: a JSON array of strings or one word. */
  readonly entrypoint?: string;
  readonly network?: string;
  readonly env: readonly string[];
  /** `--wall` as typed. */
  readonly wall?: string;
  readonly home?: string;
  readonly replace: boolean;
}

/** What `kit_check_main.ts` found. */
export interface KitCheck {
  /** `sha256:…`, the engine's id for the image. */
  readonly imageId: string;
  /** The reference found: `--image` as given, or `marsh-kit/NAME:latest` for a Kit name. */
  readonly image: string;
  /** The real path of `--home`, or null when none was given. */
  readonly home: string | null;
}

/** Runs the engine check; `{ code }` when it refused (its messages already went to stderr). */
export type KitChecker = (
  args: { readonly image: string; readonly home?: string; readonly controlDir: string },
  io: CliIo,
) => Promise<KitCheck | { readonly code: number }>;

const WHO = "marsh kits add";

async function rule<T>(who: string, fn: (rules: typeof KitRules) => T): Promise<T> {
  const rules = await import("../model/kit_rules.ts");
  try {
    return fn(rules);
  } catch (error) {
    if (error instanceof rules.KitRuleError) {
      throw new CliError(`${who}: ${error.message}`, 2, { cause: error });
    }
    throw error;
  }
}

/**
 * `kit_check_main.ts` against the engine marsh uses (`DOCKER_HOST`, else
 * the private engine, else the default socket).
 *
 * @throws {CliError} when `DOCKER_HOST` is not a unix:// address
 */
export const engineKitCheck: KitChecker = async (args, io) => {
  const env = io.env();
  const { EngineError, engineSocket } = await import("../docker/engine_socket.ts");
  let socket: string;
  try {
    socket = engineSocket({ get: (k) => env[k] }, args.controlDir).path;
  } catch (error) {
    if (error instanceof EngineError) throw new CliError(`${WHO}: ${error.message}`, error.code);
    throw error;
  }
  const deno = denoPath();
  const childArgs = [`--socket=${socket}`, `--control-dir=${args.controlDir}`];
  if (args.home !== undefined) childArgs.push(`--home=${args.home}`);
  childArgs.push("--", args.image);
  const flagArgs = {
    socket,
    controlDir: args.controlDir,
    ...(args.home === undefined ? {} : { home: args.home }),
  };
  const out = await entryCommand("kit-check", flagArgs, {
    deno,
    args: childArgs,
    cwd: "/",
    env: { MARSH_HOME: args.controlDir, MARSH_DENO: deno },
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).output();
  for (const line of dec.decode(out.stderr).split("\n")) if (line !== "") io.error(line);
  if (out.code !== 0) return { code: out.code };
  let parsed: unknown;
  try {
    parsed = JSON.parse(dec.decode(out.stdout));
  } catch (cause) {
    throw new CliError(`${WHO}: the engine check printed no result`, 125, { cause });
  }
  const r = parsed as { image_id?: unknown; image?: unknown; home?: unknown };
  if (
    typeof r.image_id !== "string" || typeof r.image !== "string" ||
    (r.home !== null && typeof r.home !== "string")
  ) {
    throw new CliError(`${WHO}: the engine check printed no result`, 125);
  }
  return { imageId: r.image_id, image: r.image, home: r.home };
};

/**
 * `marsh kits add NAME --image IMAGE [...]`: checks, finds the image,
 * registers.
 *
 * @returns 0, or the engine check's status when it refused
 * @throws {CliError} (2) for a field that breaks its rule, a branch
 *   caller, or the daemon's refusal
 */
export async function kitsAddCommand(
  opts: KitsAddOptions,
  io: CliIo,
  deps: {
    readonly connect?: () => Promise<DaemonConnection>;
    readonly check?: KitChecker;
    /** Default: {@linkcode daemonSocket} of `io.env()`. */
    readonly socket?: DaemonSocket;
  } = {},
): Promise<number> {
  const env = io.env();
  const sock = deps.socket ?? daemonSocket({ get: (k) => env[k] });
  // The daemon refuses a branch too; saying so first spares a check that cannot matter.
  if (sock.branch) throw new CliError(`${WHO}: only the host may register Kit commands`);
  const fields = await rule(WHO, (k) => {
    k.checkKitName(opts.name);
    k.checkKitImage(opts.image);
    const entrypoint = opts.entrypoint === undefined ? null : k.parseKitEntrypoint(opts.entrypoint);
    const network = opts.network ?? k.DEFAULT_KIT_NETWORK;
    k.checkKitNetwork(network);
    k.checkKitEnv(opts.env);
    const wallS = opts.wall === undefined ? DEFAULT_WALL_S : k.parseKitWall(opts.wall);
    if (opts.home !== undefined) k.checkKitHome(opts.home, sock.home);
    return { entrypoint, network, wallS };
  });
  const checked = await (deps.check ?? engineKitCheck)(
    {
      image: opts.image,
      controlDir: sock.home,
      ...(opts.home !== undefined ? { home: opts.home } : {}),
    },
    io,
  );
  if ("code" in checked) return checked.code;
  await using conn = await (deps.connect ?? (() => connectDaemon(sock)))();
  const reply = await request(
    conn,
    {
      v: 1,
      t: "kits.add",
      name: opts.name,
      image: checked.image,
      imageId: checked.imageId,
      entrypoint: fields.entrypoint,
      network: fields.network,
      env: [...opts.env],
      wallS: fields.wallS,
      home: checked.home,
      replace: opts.replace,
    },
    ["kits.added"],
    WHO,
    io.error,
  );
  const k = reply.kit;
  await io.write(
    enc.encode(
      `kit ${k.name} ${reply.replaced ? "replaced" : "registered"}: ${k.image} (${
        shortId(k.image_id)
      }), network=${k.network}, wall=${k.wall_s}s, home ${k.home}\n`,
    ),
  );
  return 0;
}

/**
 * `marsh kits ls [--json]`.
 *
 * @throws {CliError} with the daemon's refusal (a branch caller)
 */
export async function kitsListCommand(
  opts: { readonly json: boolean },
  io: CliIo,
  connect: () => Promise<DaemonConnection> = connectDaemon,
): Promise<number> {
  await using conn = await connect();
  const reply = await request(conn, { v: 1, t: "kits.list" }, ["kits"], "marsh kits ls", io.error);
  await io.write(
    enc.encode(opts.json ? `${JSON.stringify({ kits: reply.kits })}\n` : formatKits(reply.kits)),
  );
  return 0;
}

/**
 * `marsh kits rm NAME`: forgets the registration, keeps its home.
 *
 * @throws {CliError} (2) for an unknown name (the message lists the registered ones)
 */
export async function kitsRmCommand(
  name: string,
  io: CliIo,
  connect: () => Promise<DaemonConnection> = connectDaemon,
): Promise<number> {
  await using conn = await connect();
  const reply = await request(
    conn,
    { v: 1, t: "kits.rm", name },
    ["kits.removed"],
    "marsh kits rm",
    io.error,
  );
  await io.write(enc.encode(`kit ${reply.kit.name} removed; home kept at ${reply.kit.home}\n`));
  return 0;
}

/** `sha256:` and the first 12 hex digits. */
function shortId(id: string): string {
  return id.startsWith("sha256:") ? id.slice(0, 19) : id;
}

/** The text listing: one line per Kit, `NAME  IMAGE  network=…  wall=…s  home=…`, aligned. */
export function formatKits(kits: readonly KitInfo[]): string {
  if (kits.length === 0) {
    return "no kits registered (add one with: marsh kits add NAME --image IMAGE)\n";
  }
  const nameW = Math.max(...kits.map((k) => k.name.length));
  const imageW = Math.max(...kits.map((k) => k.image.length));
  return kits.map((k) =>
    `${k.name.padEnd(nameW)}  ${
      k.image.padEnd(imageW)
    }  network=${k.network}  wall=${k.wall_s}s  home=${k.home}\n`
  ).join("");
}

const KITS_HELP = `
A Kit is a command name bound to a Docker image. A registered NAME is a
command a split's argv branch (::: LABEL NAME ARGS...) can start, confined in
a container that sees only its fork, plus the Kit's home directory mounted
read-write at the image user's home (so agents keep settings between jobs).

Examples:
  marsh kit build tools --from-host --bin git
  marsh kits add tools --image tools
  marsh kits add tools --image marsh-kit/tools:0123abcd4567
  marsh kits ls
  marsh kits ls --json | jq '.kits[].name'
  marsh kits rm tools
`;

const KITS_ADD_HELP = `
IMAGE must be in the engine marsh uses (DOCKER_HOST, else the private engine,
else /var/run/docker.sock); its id is recorded. A bare Kit name (probe-img)
also finds the last \`marsh kit build\` of that name (marsh-kit/probe-img:latest).
Nothing is registered when the image is missing or no engine answers.

NAME: ${KIT_NAME_WORDS}; not
${RESERVED_KIT_NAMES.slice(0, -1).join(", ")} or ${RESERVED_KIT_NAMES.at(-1)}.
--entrypoint replaces the image's entrypoint: one word, or a JSON array.
--network: none (default: no network at all), host, or an engine network.
--env NAME passes your variable NAME into the Kit's containers (names only;
  not MARSH_* or DOCKER_*).
--wall: the longest a job may run, 1 to ${MAX_WALL_S} seconds (default ${DEFAULT_WALL_S}).
--home DIR: an existing absolute directory, not inside a project's .marsh;
  default <control dir>/kits/NAME/home, made 0700.

Examples:
  marsh kits add claude --image marsh-kit/claude:0123abcd4567 --env ANTHROPIC_API_KEY --network host
  marsh kits add codex --image codex:1.2 --entrypoint '["codex","--full-auto"]' --wall 7200
  marsh kits add tools --image marsh-kit/tools:0123abcd4567 --home /srv/kit-homes/tools
  marsh kits add tools --replace --image marsh-kit/tools:89ab01234567
`;

/**
 * Adds `marsh kits add|ls|rm` to `program` (main.ts:
 * `registerKitsCommands(program, { io, setStatus, userErrors })`).
 */
export function registerKitsCommands(program: Command, ctx: EngineCommandsContext): void {
  const { io, setStatus, userErrors } = ctx;
  const collect = (v: string, prev: string[] | undefined) => [...(prev ?? []), v];
  const kits = userErrors(program.command("kits"), "marsh kits")
    .description("Register, list and remove Kit commands (names argv branches can start).")
    .addHelpText("after", KITS_HELP);

  userErrors(kits.command("add"), "marsh kits add")
    .description("Register NAME as a Kit command running IMAGE.")
    .argument("<NAME>", "the command name")
    .requiredOption("--image <IMAGE>", "the image (a reference or an id) in the engine")
    .option(
      "--entrypoint <ENTRYPOINT>",
      'the command to run: one word, or a JSON array (\'["a","b"]\')',
    )
    .option("--network <NETWORK>", "none (default), host, or an engine network's name")
    .option("--env <NAME>", "pass your variable NAME into the Kit (repeatable)", collect)
    .option(
      "--wall <SECONDS>",
      `the longest a job may run, 1-${MAX_WALL_S} (default ${DEFAULT_WALL_S})`,
    )
    .option("--home <DIR>", "the Kit's home directory (default <control dir>/kits/NAME/home)")
    .option("--replace", "replace a registration of the same name")
    .addHelpText("after", KITS_ADD_HELP)
    .action(async (
      name: string,
      opts: {
        image: string;
        entrypoint?: string;
        network?: string;
        env?: string[];
        wall?: string;
        home?: string;
        replace?: boolean;
      },
    ) => {
      setStatus(
        await kitsAddCommand(
          {
            name,
            image: opts.image,
            env: opts.env ?? [],
            replace: opts.replace === true,
            ...(opts.entrypoint !== undefined ? { entrypoint: opts.entrypoint } : {}),
            ...(opts.network !== undefined ? { network: opts.network } : {}),
            ...(opts.wall !== undefined ? { wall: opts.wall } : {}),
            ...(opts.home !== undefined ? { home: opts.home } : {}),
          },
          io,
        ),
      );
    });

  userErrors(kits.command("ls"), "marsh kits ls")
    .description("List the registered Kit commands.")
    .option(
      "--json",
      'print {"kits":[{name,image,image_id,entrypoint,network,env,wall_s,home,created_unix_ms}]}',
    )
    .addHelpText(
      "after",
      "\nOne line per Kit: NAME  IMAGE  network=…  wall=…s  home=…\n\n" +
        "Examples:\n  marsh kits ls\n  marsh kits ls --json | jq '.kits[] | {name, image_id}'\n",
    )
    .action(async (opts: { json?: boolean }) => {
      setStatus(await kitsListCommand({ json: opts.json === true }, io));
    });

  userErrors(kits.command("rm"), "marsh kits rm")
    .description("Forget a Kit command; its home directory is kept.")
    .argument("<NAME>", "the command name")
    .addHelpText("after", "\nExample:\n  marsh kits rm tools\n")
    .action(async (name: string) => setStatus(await kitsRmCommand(name, io)));
}
