/**
 * The Kit registry (issue 5 §2): `marsh kits add|ls|rm`, host authority
 * only. Registrations live in the journal; each Kit's home directory is
 * made here, under the control dir, unless the caller chose one.
 *
 * The daemon has no Docker permission (docs/architecture.md "Permissions"): the CLI checks the
 * image in the engine and sends the id it resolved, and checks that a
 * chosen `--home` exists (the daemon may read only its control dir).
 *
 * Needs read and write on the control dir.
 *
 * @module
 */

import type { Journal } from "../journal/journal.ts";
import {
  checkKitHome,
  checkKitRecord,
  defaultKitHome,
  type KitRecord,
  KitRuleError,
} from "../model/kit_rules.ts";
import type { KitInfo, KitsAddRequest } from "../protocol/daemon.ts";
import type { Authority } from "./conn.ts";
import type { Log } from "./log.ts";
import { RequestError } from "./request_error.ts";

/** The hint every "which Kits are there" message ends with. */
export const ADD_HINT = "add one with: marsh kits add NAME --image IMAGE";

/** What the registry needs from the daemon. */
export interface KitRegistryDeps {
  readonly journal: Pick<Journal, "addKit" | "getKit" | "listKits" | "removeKit">;
  /** The control dir. */
  readonly home: string;
  readonly log?: Log;
  readonly now?: () => number;
}

/** A registration as the protocol carries it. */
export function kitInfo(k: KitRecord): KitInfo {
  return {
    name: k.name,
    image: k.image,
    image_id: k.imageId,
    entrypoint: k.entrypoint === null ? null : [...k.entrypoint],
    network: k.network,
    env: [...k.env],
    wall_s: k.wallS,
    home: k.home,
    created_unix_ms: k.createdMs,
  };
}

/** `registered: a, b` or `no Kit commands are registered`. */
export function registeredNames(kits: readonly { readonly name: string }[]): string {
  return kits.length === 0
    ? "no Kit commands are registered"
    : `registered: ${kits.map((k) => k.name).join(", ")}`;
}

function hostOnly(auth: Authority, what: string): void {
  if (auth.kind !== "host") throw new RequestError(2, `only the host may ${what} Kit commands`);
}

/** Answers `kits.add`, `kits.list` and `kits.rm`. */
export class KitRegistry {
  readonly #d: KitRegistryDeps;

  constructor(deps: KitRegistryDeps) {
    this.#d = deps;
  }

  /**
   * Registers a Kit: checks every field, makes the default home (0700)
   * when none was chosen, then journals the registration.
   *
   * @throws {RequestError} (2) for a branch caller, a field that breaks
   *   its rule, or a registered name without `replace`
   */
  add(auth: Authority, req: KitsAddRequest): { kit: KitInfo; replaced: boolean } {
    hostOnly(auth, "register");
    const { journal, home } = this.#d;
    const rec: KitRecord = {
      name: req.name,
      image: req.image,
      imageId: req.imageId,
      entrypoint: req.entrypoint,
      network: req.network,
      env: req.env,
      wallS: req.wallS,
      home: req.home ?? defaultKitHome(home, req.name),
      createdMs: (this.#d.now ?? Date.now)(),
    };
    try {
      checkKitRecord(rec);
      if (req.home !== null) checkKitHome(req.home, home);
    } catch (error) {
      if (error instanceof KitRuleError) throw new RequestError(2, error.message);
      throw error;
    }
    if (!req.replace && journal.getKit(rec.name) !== null) {
      throw new RequestError(2, alreadyRegistered(rec.name));
    }
    if (req.home === null) this.#makeHome(rec.name);
    let old: KitRecord | null;
    try {
      old = journal.addKit(rec, { replace: req.replace });
    } catch (error) {
      // Another add of the same name won the race since the check above.
      if (error instanceof Deno.errors.AlreadyExists) {
        throw new RequestError(2, alreadyRegistered(rec.name));
      }
      throw error;
    }
    this.#d.log?.info(
      `kit ${rec.name}: ${old ? "replaced" : "registered"} (${rec.image} ${rec.imageId})`,
    );
    return { kit: kitInfo(rec), replaced: old !== null };
  }

  /** Every registered Kit, by name. @throws {RequestError} (2) for a branch caller */
  list(auth: Authority): KitInfo[] {
    hostOnly(auth, "list");
    return this.#d.journal.listKits().map(kitInfo);
  }

  /**
   * Forgets a registration; its home directory stays.
   *
   * @throws {RequestError} (2) for a branch caller, or an unknown name (with the registered ones)
   */
  remove(auth: Authority, name: string): KitInfo {
    hostOnly(auth, "remove");
    const old = this.#d.journal.removeKit(name);
    if (old === null) {
      throw new RequestError(
        2,
        `no kit ${JSON.stringify(name)}; ${registeredNames(this.#d.journal.listKits())}`,
      );
    }
    this.#d.log?.info(`kit ${name}: removed (home kept at ${old.home})`);
    return kitInfo(old);
  }

  /**
   * `<control dir>/kits/<name>/home`, each level made 0700, never through
   * a symlink (only the daemon writes the control dir, but it checks).
   */
  #makeHome(name: string): void {
    const kits = `${this.#d.home}/kits`;
    for (const dir of [kits, `${kits}/${name}`, `${kits}/${name}/home`]) {
      let made = false;
      try {
        Deno.mkdirSync(dir, { mode: 0o700 });
        made = true;
      } catch (error) {
        if (!(error instanceof Deno.errors.AlreadyExists)) throw error;
      }
      const st = Deno.lstatSync(dir);
      if (!st.isDirectory) {
        throw new RequestError(
          2,
          `cannot make the kit's home: ${dir} is ${
            st.isSymlink ? "a symlink" : "not a directory"
          }; remove it and add the kit again`,
        );
      }
      // The umask may have taken bits off; an existing home keeps the mode it has.
      if (made && st.mode !== null && (st.mode & 0o777) !== 0o700) Deno.chmodSync(dir, 0o700);
    }
  }
}

function alreadyRegistered(name: string): string {
  return `kit ${
    JSON.stringify(name)
  } is already registered; replace it with: marsh kits add ${name} --replace --image IMAGE, or remove it with: marsh kits rm ${name}`;
}
