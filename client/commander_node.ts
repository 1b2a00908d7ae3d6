/**
 * What commander takes from Node's built-in modules, written on Deno's own
 * APIs, for the bundled CLI (docs/guide.md, "How fast marsh starts").
 * Importing `node:process` starts Deno's Node compatibility layer, about 20
 * ms, most of an empty `deno run`; `node:events`, `node:path` and
 * `node:util` add a few more. The bundler (`client/cli_bundle.ts`) points
 * commander's imports of them here; the sources (`MARSH_CLI_BUNDLE=0`, the
 * tests) keep Node's.
 *
 * Only what commander reaches with marsh's configuration works the same:
 * marsh parses `{ from: "user" }` words, overrides exit and output
 * (`exitOverride`, `configureOutput`), and has no executable subcommands.
 * Help goes uncoloured (no `hasColors`: commander then strips escapes, and
 * marsh's help has none). What executable subcommands would need
 * (`node:child_process`, `node:fs`, `node:path`, `process.on`) throws,
 * naming it, rather than doing something else.
 * `client/commander_node_test.ts` holds each piece against Node's.
 *
 * @module
 */

const enc = new TextEncoder();

/** An object every property of which throws: a Node module marsh's CLI never reaches. */
function unreachable(name: string): Record<string, never> {
  return new Proxy({}, {
    get() {
      throw new Error(`marsh's bundled CLI has no executable subcommands (${name})`);
    },
  });
}

/** `node:child_process`: commander runs executable subcommands with it. */
export const childProcess: Record<string, never> = unreachable("node:child_process");
/** `node:fs`: commander finds executable subcommands' files with it. */
export const fs: Record<string, never> = unreachable("node:fs");
/** `node:path`: commander names executable subcommands' files with it. */
export const path: Record<string, never> = unreachable("node:path");

type Listener = (...args: unknown[]) => unknown;

/**
 * Node's `EventEmitter` as far as commander's `Command` uses it: `on`,
 * `emit` and `listenerCount`; listeners run in order with `this` the
 * emitter, over a copy of the list taken when `emit` starts.
 */
export class EventEmitter {
  readonly #listeners = new Map<string | symbol, Listener[]>();

  /** Adds `listener` for `event`, after those already there. */
  on(event: string | symbol, listener: Listener): this {
    const list = this.#listeners.get(event);
    if (list === undefined) this.#listeners.set(event, [listener]);
    else list.push(listener);
    return this;
  }

  /** Calls `event`'s listeners with `args`; false when it has none. */
  emit(event: string | symbol, ...args: unknown[]): boolean {
    const list = this.#listeners.get(event);
    if (list === undefined || list.length === 0) {
      if (event === "error") throw args[0] instanceof Error ? args[0] : new Error(String(args[0]));
      return false;
    }
    for (const listener of [...list]) listener.apply(this, args);
    return true;
  }

  /** How many listeners `event` has. */
  listenerCount(event: string | symbol): number {
    return this.#listeners.get(event)?.length ?? 0;
  }
}

/**
 * Node's `util.stripVTControlCharacters`: removes ANSI escape sequences
 * (CSI, OSC and the two-character ones), with Node's pattern.
 */
export function stripVTControlCharacters(str: string): string {
  if (typeof str !== "string") {
    throw new TypeError(`The "str" argument must be of type string`);
  }
  return str.replace(ANSI, "");
}

const ANSI = new RegExp(
  "[\\u001B\\u009B][[\\]()#;?]*" +
    "(?:(?:(?:(?:;[-a-zA-Z\\d\\/\\#&.:=?%@~_]+)*" +
    "|[a-zA-Z\\d]+(?:;[-a-zA-Z\\d\\/\\#&.:=?%@~_]*)*)?" +
    "(?:\\u0007|\\u001B\\u005C|\\u009C))" +
    "|(?:(?:\\d{1,4}(?:;\\d{0,4})*)?" +
    "[\\dA-PR-TZcf-nq-uy=><~]))",
  "g",
);

interface Stream {
  write(text: string): boolean;
  readonly isTTY: boolean;
  readonly columns: number | undefined;
}

function stream(file: typeof Deno.stdout | typeof Deno.stderr): Stream {
  return {
    write(text) {
      const bytes = enc.encode(text);
      let off = 0;
      while (off < bytes.length) off += file.writeSync(bytes.subarray(off));
      return true;
    },
    get isTTY() {
      return file.isTerminal();
    },
    get columns() {
      return file.isTerminal() ? Deno.consoleSize().columns : undefined;
    },
  };
}

/** `process.env` the way Node's compatibility layer has it: Deno's environment, live. */
const env = new Proxy({} as Record<string, string | undefined>, {
  get: (_, key) => typeof key === "string" ? Deno.env.get(key) : undefined,
  has: (_, key) => typeof key === "string" && Deno.env.has(key),
  set(_, key, value) {
    if (typeof key !== "string") return false;
    Deno.env.set(key, String(value));
    return true;
  },
  deleteProperty(_, key) {
    if (typeof key === "string") Deno.env.delete(key);
    return true;
  },
  ownKeys: () => Object.keys(Deno.env.toObject()),
  getOwnPropertyDescriptor(_, key) {
    const value = typeof key === "string" ? Deno.env.get(key) : undefined;
    return value === undefined
      ? undefined
      : { value, writable: true, enumerable: true, configurable: true };
  },
});

/**
 * Node's `process` as far as commander reaches it: the streams (`write`,
 * `isTTY`, `columns`), `env`, `exit`, `exitCode`, `argv`, `execArgv`,
 * `execPath`, `platform` and `versions`. `on` (signals, for executable
 * subcommands) throws.
 */
export const process = {
  stdout: stream(Deno.stdout),
  stderr: stream(Deno.stderr),
  env,
  exitCode: undefined as number | undefined,
  exit(code?: number): never {
    Deno.exit(code ?? process.exitCode ?? 0);
  },
  get argv(): string[] {
    return [Deno.execPath(), new URL(Deno.mainModule).pathname, ...Deno.args];
  },
  execArgv: [] as string[],
  get execPath(): string {
    return Deno.execPath();
  },
  platform: Deno.build.os,
  versions: {} as Record<string, string>,
  on(): never {
    throw new Error("marsh's bundled CLI has no executable subcommands (process.on)");
  },
};
