/**
 * A shell branch's links (docs/rules.md "Links"): a directory first on the
 * branch's `PATH` with one stub per registered name, each running `marsh
 * run NAME "$@"` through the branch's own marsh, so that `-b fix='tools sh
 * -c "..."'` runs `tools` as a confined Kit job whose parent is
 * `split:<id>/<label>` and whose writes land in the branch's fork. No stub
 * for `marsh`, `bash` or `sh`: the branch's own stay.
 *
 * The dir lies in the attempt's directory in the control dir, which a
 * branch sees read-only at its own path in either view.
 *
 * @module
 */

import { isLinkName } from "../model/kit_name.ts";

/** The launcher the stubs run: this checkout's `marsh` (the branch's own CLI). */
export const MARSH_LAUNCHER = new URL("../marsh", import.meta.url).pathname;

function quoted(s: string): string {
  return `'${s.replaceAll("'", "'\\''")}'`;
}

/**
 * The stub for `name`: the kernel gives its path, so the name is the
 * stub's, never an argv0. It names the daemon's pinned Deno: the branch's
 * environment has no `MARSH_*`, and the launcher must not go looking.
 */
export function branchStub(name: string, deno: string, launcher = MARSH_LAUNCHER): string {
  if (!isLinkName(name) || name === "marsh") throw new TypeError(`not a link name: ${name}`);
  return `#!/bin/sh\nMARSH_DENO=${quoted(deno)} exec ${quoted(launcher)} run ${name} "$@"\n`;
}

/**
 * Writes `<dir>/bin` (which must not exist) with a stub per registered name
 * and returns `env` with that dir first on its `PATH`.
 */
export function withBranchLinks(
  dir: string,
  registered: readonly string[],
  deno: string,
  env: Readonly<Record<string, string>>,
): Record<string, string> {
  const bin = `${dir}/bin`;
  Deno.mkdirSync(bin, { mode: 0o755 });
  for (const name of new Set(registered)) {
    if (!isLinkName(name) || name === "marsh") continue;
    Deno.writeTextFileSync(`${bin}/${name}`, branchStub(name, deno), {
      createNew: true,
      mode: 0o755,
    });
    Deno.chmodSync(`${bin}/${name}`, 0o755);
  }
  const path = env.PATH ?? "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
  return { ...env, PATH: `${bin}:${path}` };
}

/**
 * The `marsh run` jobs each shell branch started and that still run: a
 * branch's capture waits for them (its fork is theirs to write until their
 * containers are gone).
 */
export class BranchRuns {
  readonly #live = new Map<string, Set<Promise<void>>>();

  /** Tracks a run of branch `split/label` until `done` settles. */
  track(split: string, label: string, done: Promise<void>): void {
    const key = `${split}/${label}`;
    const set = this.#live.get(key) ?? new Set();
    set.add(done);
    this.#live.set(key, set);
    void done.finally(() => {
      set.delete(done);
      if (set.size === 0 && this.#live.get(key) === set) this.#live.delete(key);
    });
  }

  /** Resolves once every run the branch started has ended (its container verified gone). */
  async settled(split: string, label: string): Promise<void> {
    const set = this.#live.get(`${split}/${label}`);
    if (set !== undefined) await Promise.allSettled([...set]);
  }
}
