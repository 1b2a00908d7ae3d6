/**
 * What the entrypoint registry (`protocol/entrypoints.ts`) generates into
 * files that cannot import it: the flag functions of the two shell launchers
 * (`./marsh`, `bin/marshd`; the CLI's start must not pay for a `deno run`
 * that prints flags, docs/guide.md, "How fast marsh starts") and the
 * permission table of docs/architecture.md. Each sits between a begin and an
 * end marker; `tools/registry_check_main.ts` rewrites or checks them.
 *
 * @module
 */

import {
  cliBundleFlags,
  cliFlags,
  daemonFlags,
  type EntryName,
  ENTRYPOINTS,
  type Grants,
} from "../protocol/entrypoints.ts";
import { BRANCH_SOCKET_SLOTS } from "../protocol/control_dir.ts";

/** The first line of a generated block (after the comment leader). */
export const BEGIN = "BEGIN generated from protocol/entrypoints.ts";
/** The last line of a generated block (after the comment leader). */
export const END = "END generated";

/** A generated block is missing, doubled or out of order. */
export class RegistryRenderError extends Error {
  /** The error's name. */
  override name = "RegistryRenderError";
}

// Stand-ins for the shell's positional parameters: no flag holds a NUL.
const param = (n: number) => `\0${n}\0`;

/** One flag as a bash word; the stand-ins become `$1`, `$2`, …. */
export function bashWord(flag: string): string {
  if (/^[A-Za-z0-9_,.=/:+-]+$/.test(flag)) return flag;
  const parts = flag.split(/\0(\d)\0/);
  let out = "";
  for (let i = 0; i < parts.length; i++) {
    out += i % 2 === 1 ? `$${parts[i]}` : parts[i]!.replace(/[\\"$`]/g, (c) => `\\${c}`);
  }
  return `"${out}"`;
}

/** A bash function that sets the array `flags` from its arguments. */
function bashFunction(name: string, args: string, flags: readonly string[]): string {
  return `# ${name} ${args}\n${name}() { flags=(${flags.map(bashWord).join(" ")}); }`;
}

/** The `./marsh` block: the CLI's flags (with and without a branch socket) and the bundler's. */
export function marshBlock(): string {
  return [
    bashFunction("flags_cli", "HOME", cliFlags(param(1))),
    bashFunction("flags_cli_branch", "HOME MARSH_SOCK", cliFlags(param(1), param(2))),
    bashFunction("flags_cli_bundle", "ROOT DIR DENO", cliBundleFlags(param(1), param(2), param(3))),
  ].join("\n");
}

/** The `bin/marshd` block: the daemon's flags. */
export function marshdBlock(): string {
  return bashFunction(
    "flags_daemon",
    "HOME DENO",
    daemonFlags(param(1), param(2), BRANCH_SOCKET_SLOTS),
  );
}

/** Sample arguments shown in the table: placeholders a reader recognises. */
export const TABLE_ARGS: {
  readonly [K in EntryName]: Parameters<typeof ENTRYPOINTS[K]["flags"]>[0];
} = {
  cli: { home: "<home>", branchSocket: "<MARSH_SOCK>" },
  "cli-bundle": { root: "<repo>", dir: "<bundle dir>", deno: "<deno>" },
  daemon: { home: "<home>", deno: "<deno>" },
  splitfs: {},
  // The paths these check must be absolute: "/<…>" is shown as "<…>".
  planner: { objects: "/<store objects>", tmp: "/<temp dir>" },
  worker: { home: "/<home>" },
  "kit-worker": { home: "/<home>", engine: "/<engine socket>" },
  engine: { home: "/<home>", execRoot: "/<exec root>", sockets: ["/<engine sockets>"] },
  "kit-build": { socket: "/<engine socket>" },
  "kit-check": { socket: "/<engine socket>", controlDir: "/<home>", home: "/<chosen home>" },
  "job-client": { socket: "/run/marsh/cap.sock" },
};

const GRANT_NAMES: { readonly [K in keyof Grants]: string } = {
  readProject: "read a project file",
  writeTmp: "write /tmp",
  ffiLibc: "FFI libc",
  ffiOther: "FFI other",
  runGit: "run git",
  net: "TCP",
  envHome: "read HOME",
  envOther: "read any variable",
};

/** Shortens the socket slot lists so the table stays readable. */
function shown(flag: string): string {
  return flag.replace(
    /(,unix:<home>\/(b|c)\/)00\.sock(,unix:<home>\/\2\/\d\d\.sock)+/g,
    "$100.sock,…",
  )
    .replaceAll("/<", "<")
    .replace(/--allow-ffi=[^ ]+/, "--allow-ffi=<LIBC_PATHS>");
}

/** The docs/architecture.md permission table, one row per entrypoint. */
export function permissionTable(): string {
  const rows: string[][] = [];
  for (const name of Object.keys(ENTRYPOINTS) as EntryName[]) {
    const entry = ENTRYPOINTS[name] as typeof ENTRYPOINTS[EntryName];
    const flags = (entry.flags as (a: unknown) => string[])(TABLE_ARGS[name]).map(shown);
    const grants = (Object.keys(GRANT_NAMES) as (keyof Grants)[]).filter((g) => entry.grants[g])
      .map((g) => GRANT_NAMES[g]);
    rows.push([
      `\`${name}\``,
      `\`${entry.module}\``,
      entry.startedBy.map((s) => `\`${s}\``).join(", "),
      `\`${flags.join(" ")}\``,
      grants.length === 0 ? "none" : grants.join(", "),
    ]);
  }
  const head = ["entrypoint", "module", "started by", "flags", "the probe finds granted"];
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) => `| ${cells.map((c, i) => c.padEnd(widths[i]!)).join(" | ")} |`;
  return [line(head), `| ${widths.map((w) => "-".repeat(w)).join(" | ")} |`, ...rows.map(line)]
    .join("\n");
}

/**
 * `text` with the block between `<leader> BEGIN…` and `<leader> END…`
 * replaced by `block`.
 *
 * @throws {RegistryRenderError} when the markers are not there exactly once, in order
 */
export function replaceBlock(text: string, leader: string, block: string): string {
  const lines = text.split("\n");
  const begin = lines.findIndex((l) => l.startsWith(`${leader} ${BEGIN}`));
  const end = lines.findIndex((l) => l.startsWith(`${leader} ${END}`));
  const count = (m: string) => lines.filter((l) => l.startsWith(`${leader} ${m}`)).length;
  if (begin < 0 || end < begin || count(BEGIN) !== 1 || count(END) !== 1) {
    throw new RegistryRenderError(
      `expected one "${leader} ${BEGIN}" line and, after it, one "${leader} ${END}" line`,
    );
  }
  return [...lines.slice(0, begin + 1), block, ...lines.slice(end)].join("\n");
}

/** The files the registry generates into: path (repo-relative), comment leader, block. */
export function generatedFiles(): { path: string; leader: string; block: string }[] {
  return [
    { path: "marsh", leader: "#", block: marshBlock() },
    { path: "bin/marshd", leader: "#", block: marshdBlock() },
    // Blank lines around the table, as `deno fmt` leaves them.
    { path: "docs/architecture.md", leader: "<!--", block: `\n${permissionTable()}\n` },
  ];
}
