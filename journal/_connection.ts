/**
 * The journal's connection core: the SQLite handle, its statement cache,
 * transactions (nested ones as savepoints) and the wrapping of SQLite's
 * errors into {@linkcode JournalError}. The record modules (`_splits.ts`,
 * `_branches.ts`, `_kit_jobs.ts`, `_recovery.ts`) run their SQL through it.
 *
 * @module
 */

import type { DatabaseSync, SQLInputValue, SQLOutputValue, StatementSync } from "node:sqlite";
import { JournalError } from "./errors.ts";

/** Named parameters of a statement. */
export type Params = Record<string, SQLInputValue>;
/** One result row. */
export type Row = Record<string, SQLOutputValue>;

/**
 * An open SQLite handle with the helpers every journal operation uses.
 * Only `Journal` creates one; after `close()` every call throws
 * `Deno.errors.BadResource`.
 */
export class Connection {
  #db: DatabaseSync | null;
  readonly #path: string;
  #depth = 0;
  #commits = 0;
  readonly #statements = new Map<string, StatementSync>();

  /** Wraps an open handle on the journal file at `path`. */
  constructor(db: DatabaseSync, path: string) {
    this.#db = db;
    this.#path = path;
  }

  /** Whether `close()` has run. */
  get closed(): boolean {
    return this.#db === null;
  }

  /** Outermost transactions committed since the handle was opened. */
  get commits(): number {
    return this.#commits;
  }

  /** Closes the handle. Calling it again does nothing. */
  close(): void {
    const db = this.#db;
    if (db === null) return;
    this.#db = null;
    this.#statements.clear();
    db.close();
  }

  /**
   * Runs `fn`, whose outermost transaction commits without waiting for its
   * fsync (`synchronous=NORMAL` for it; WAL): a killed process keeps it, a
   * power loss may lose it, and the next commit with the default
   * `synchronous=FULL` makes it durable with itself (the WAL is written in
   * order). For records that no reader relies on surviving a power loss.
   */
  unsynced<T>(fn: () => T): T {
    const db = this.#handle();
    if (this.#depth > 0) return fn();
    db.exec("PRAGMA synchronous = NORMAL");
    try {
      return fn();
    } finally {
      db.exec("PRAGMA synchronous = FULL");
    }
  }

  /**
   * Runs `fn` in a transaction that commits when it returns and rolls back
   * when it throws; nested calls become savepoints. `fn` must be synchronous.
   */
  tx<T>(mode: "DEFERRED" | "IMMEDIATE", fn: () => T): T {
    const db = this.#handle();
    const nested = this.#depth > 0;
    const savepoint = `sp${this.#depth}`;
    try {
      db.exec(nested ? `SAVEPOINT ${savepoint}` : `BEGIN ${mode}`);
    } catch (error) {
      throw wrap(error, "begin a transaction");
    }
    this.#depth++;
    let result: T;
    try {
      result = fn();
      if (isThenable(result)) {
        throw new TypeError(
          "Journal transactions are synchronous: the callback returned a promise",
        );
      }
    } catch (error) {
      this.#depth--;
      this.#rollback(db, nested, savepoint, error);
      throw error;
    }
    this.#depth--;
    try {
      db.exec(nested ? `RELEASE ${savepoint}` : "COMMIT");
      if (!nested) this.#commits++;
    } catch (error) {
      this.#rollback(db, nested, savepoint, error);
      throw wrap(error, "commit a transaction");
    }
    return result;
  }

  #rollback(db: DatabaseSync, nested: boolean, savepoint: string, reason: unknown): void {
    try {
      if (nested) db.exec(`ROLLBACK TO ${savepoint}; RELEASE ${savepoint}`);
      else if (db.isTransaction) db.exec("ROLLBACK");
    } catch (error) {
      throw new JournalError(`Journal could not roll back after: ${String(reason)}`, {
        cause: error,
      });
    }
  }

  /** Runs `fn` in an immediate transaction; SQLite's errors name `what`. */
  write<T>(what: string, fn: () => T): T {
    try {
      return this.tx("IMMEDIATE", fn);
    } catch (error) {
      throw wrap(error, what);
    }
  }

  /** Runs `fn` outside any new transaction; SQLite's errors name `what`. */
  read<T>(what: string, fn: () => T): T {
    this.#handle();
    try {
      return fn();
    } catch (error) {
      throw wrap(error, what);
    }
  }

  #handle(): DatabaseSync {
    if (this.#db === null) {
      throw new Deno.errors.BadResource(`Journal is closed: "${this.#path}"`);
    }
    return this.#db;
  }

  #statement(sql: string): StatementSync {
    let st = this.#statements.get(sql);
    if (st === undefined) {
      st = this.#handle().prepare(sql);
      this.#statements.set(sql, st);
    }
    return st;
  }

  /** The first row of `sql`, or undefined. */
  get(sql: string, params: Params = {}): Row | undefined {
    return this.#statement(sql).get(params);
  }

  /** Every row of `sql`. */
  all(sql: string, params: Params = {}): Row[] {
    return this.#statement(sql).all(params);
  }

  /** Runs `sql` and returns how many rows it changed. */
  run(sql: string, params: Params = {}): number {
    return Number(this.#statement(sql).run(params).changes);
  }

  /** Inserts one row of `cols` into `table`. */
  insert(table: string, cols: Params): void {
    const names = Object.keys(cols);
    this.run(
      `INSERT INTO ${table} (${names.join(", ")}) VALUES (${names.map((n) => `:${n}`).join(", ")})`,
      cols,
    );
  }

  /** Returns whether a row matched `where` (an empty `cols` changes nothing but still looks). */
  update(table: string, cols: Params, where: string, key: Params): boolean {
    const names = Object.keys(cols);
    if (names.length === 0) {
      return this.get(`SELECT 1 AS x FROM ${table} WHERE ${where}`, key) !== undefined;
    }
    const set = names.map((n) => `${n} = :${n}`).join(", ");
    return this.run(`UPDATE ${table} SET ${set} WHERE ${where}`, { ...cols, ...key }) > 0;
  }
}

/** Refuses a patch key outside `allowed` with a `TypeError`. */
export function mutable<P extends object>(patch: P, allowed: readonly string[], what: string): P {
  for (const key of Object.keys(patch)) {
    if (!allowed.includes(key)) {
      throw new TypeError(`Not a mutable ${what} field: "${key}"`);
    }
  }
  return patch;
}

/**
 * Refuses an empty `from`, a state `known` does not know, or a move the
 * transition table (`model/split_state.ts`, `model/branch_state.ts`) does
 * not allow, with a `TypeError`.
 */
export function checkStates<S extends string>(
  from: readonly S[],
  to: S,
  known: (x: unknown) => boolean,
  what: string,
  mayMove: (from: S, to: S) => boolean,
): void {
  if (from.length === 0) {
    throw new TypeError(`A ${what} transition needs at least one "from" state`);
  }
  for (const s of [...from, to]) {
    if (!known(s)) throw new TypeError(`Unknown ${what} state: ${JSON.stringify(s)}`);
  }
  for (const s of from) {
    if (!mayMove(s, to)) {
      throw new TypeError(
        `A ${what} cannot move from ${JSON.stringify(s)} to ${JSON.stringify(to)}`,
      );
    }
  }
}

/** The error for an unknown split. */
export function splitNotFound(id: string): Deno.errors.NotFound {
  return new Deno.errors.NotFound(`Split not found: "${id}"`);
}

/** The error for an unknown branch. */
export function branchNotFound(splitId: string, label: string): Deno.errors.NotFound {
  return new Deno.errors.NotFound(`Branch not found: "${splitId}/${label}"`);
}

function isThenable(x: unknown): boolean {
  return typeof x === "object" && x !== null &&
    typeof (x as { then?: unknown }).then === "function";
}

/** SQLite's own errors become a {@linkcode JournalError}; everything else passes through. */
export function wrap(error: unknown, what: string): unknown {
  if (error instanceof JournalError) return error;
  const code = (error as { code?: unknown } | null)?.code;
  if (error instanceof Error && (code === "ERR_SQLITE_ERROR" || code === "ERR_INVALID_STATE")) {
    return new JournalError(`Journal could not ${what}: ${error.message}`, { cause: error });
  }
  return error;
}
