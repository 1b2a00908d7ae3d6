/**
 * The tests' own set-up: the host packages they need, installed with apt
 * when missing, so `./bin/deno task test` (README.md) passes on a bare
 * Debian machine with nothing but Node.js/npm (docs/engine.md, "Tests on a
 * bare machine"). {@linkcode ensureAptPackage} is the one way to do it;
 * {@linkcode ensureBusybox} (for `marsh kit build`) and `ensureDockerd`
 * (`tests/_engine.ts`) use it. It never skips: a package that is missing
 * and cannot be installed is a test failure with the command that fixes it.
 *
 * Needs `--allow-run` (`id`, `apt-get`), `--allow-read` and `--allow-write`
 * on {@linkcode APT_LOCK}, only when something is missing.
 *
 * @module
 */

import { findBusybox } from "../docker/rootfs.ts";

/** Serializes apt across test files and processes (flock): apt takes one install at a time. */
export const APT_LOCK = "/tmp/marsh-test-apt.lock";

const dec = new TextDecoder();

/** A Debian package the tests need, and how to tell that what they need from it is there. */
export interface AptPackage {
  /** The package apt installs (`docker.io`, `busybox-static`). */
  readonly pkg: string;
  /** What the tests need from it, for messages (`dockerd`, `busybox`). */
  readonly what: string;
  /** True when what the tests need is there (from this package or another). */
  readonly installed: () => Promise<boolean>;
  /** Another way out, appended to the message when it cannot be installed. */
  readonly otherwise?: string;
}

/** What {@linkcode ensureAptPackage} runs; tests replace these. */
export interface AptDeps {
  /** The `apt-get` to run (default: `apt-get` on PATH). */
  readonly aptGet?: string;
  /** Our uid (default: `id -u`). */
  readonly uid?: () => Promise<number>;
  /** The lock file (default {@linkcode APT_LOCK}). */
  readonly lock?: string;
}

interface Output {
  readonly code: number;
  readonly out: string;
}

async function run(cmd: string, args: readonly string[]): Promise<Output> {
  const r = await new Deno.Command(cmd, {
    args: [...args],
    env: { DEBIAN_FRONTEND: "noninteractive" },
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).output();
  return { code: r.code, out: `${dec.decode(r.stdout)}${dec.decode(r.stderr)}`.trim() };
}

async function idU(): Promise<number> {
  const r = await run("id", ["-u"]);
  if (r.code !== 0) throw new Error(`id -u failed: ${r.out}`);
  return Number(r.out);
}

/**
 * Makes sure `p` is there: nothing to do when `p.installed()` says so;
 * else, as root, `apt-get install -y PKG` (after `apt-get update` when the
 * package lists are missing or stale), under {@linkcode APT_LOCK}, and
 * `p.installed()` must then hold.
 *
 * @returns `"present"` when nothing was done, `"installed"` after apt ran
 * @throws {Error} when it is missing and we are not root, there is no
 *   apt-get, apt fails, or it is still missing afterwards; the message
 *   says what to run
 */
export async function ensureAptPackage(
  p: AptPackage,
  deps: AptDeps = {},
): Promise<"present" | "installed"> {
  if (await p.installed()) return "present";
  const manual = `install ${p.pkg} (\`apt-get install -y ${p.pkg}\` as root)${
    p.otherwise ? `, ${p.otherwise}` : ""
  }`;
  if ((await (deps.uid ?? idU)()) !== 0) {
    throw new Error(
      `the tests need ${p.what}, which is not installed, and they are not root, so they cannot install it: ${manual}`,
    );
  }
  const aptGet = deps.aptGet ?? "apt-get";
  using file = await Deno.open(deps.lock ?? APT_LOCK, {
    read: true,
    write: true,
    create: true,
    mode: 0o600,
  });
  await file.lock(true);
  try {
    // Another test process may have installed it while we waited.
    if (await p.installed()) return "present";
    const install = ["install", "-y", "-qq", p.pkg];
    let r: Output;
    try {
      r = await run(aptGet, install);
      // A fresh image has no package lists; stale ones name files the mirror no longer has.
      if (r.code !== 0) {
        const update = await run(aptGet, ["update", "-qq"]);
        if (update.code !== 0) {
          throw new Error(
            `the tests need ${p.what}: \`apt-get update\` failed, so ${p.pkg} cannot be installed (${update.out}); ${manual}`,
          );
        }
        r = await run(aptGet, install);
      }
    } catch (error) {
      if (error instanceof Deno.errors.NotFound) {
        throw new Error(
          `the tests need ${p.what}, which is not installed, and there is no apt-get (${aptGet}) to install ${p.pkg}: install ${p.what} with this system's package manager${
            p.otherwise ? `, ${p.otherwise}` : ""
          }`,
          { cause: error },
        );
      }
      throw error;
    }
    if (r.code !== 0) {
      throw new Error(
        `the tests need ${p.what}: \`apt-get install -y ${p.pkg}\` failed (${r.out}); ${manual}`,
      );
    }
    if (!(await p.installed())) {
      throw new Error(
        `apt-get installed ${p.pkg}, but ${p.what} is still missing: see \`dpkg -L ${p.pkg}\``,
      );
    }
    return "installed";
  } finally {
    await file.unlock();
  }
}

/** busybox, found where `marsh kit build` looks for it (`findBusybox`). */
export const BUSYBOX: AptPackage = {
  pkg: "busybox-static",
  what: "busybox (for `marsh kit build`)",
  installed: async () =>
    (await findBusybox(Deno.env.get("PATH") ?? "/usr/sbin:/usr/bin:/sbin:/bin")) !== null,
};

let busybox: Promise<unknown> | undefined;

/**
 * Makes sure `marsh kit build` finds busybox: installs `busybox-static`
 * when it is missing (once per process).
 *
 * @throws {Error} as {@linkcode ensureAptPackage} does
 */
export async function ensureBusybox(): Promise<void> {
  busybox ??= ensureAptPackage(BUSYBOX);
  await busybox;
}
