/**
 * `marsh op [--session NAME] [--on-cancel seal|discard] -- CMD ARGS...`:
 * runs one command as one checkpoint of a session (docs/guide.md
 * "Checkpoint sessions"). The CLI makes three FIFOs in
 * `<control dir>/io/<random>/` (`mkfifo -m 600`), sends the request naming
 * them, opens all three at once and pumps its own stdin, stdout and stderr
 * through them; then prints the checkpoint line on stderr and exits with the
 * command's status. Ctrl-C (or the CLI going away) cancels the command:
 * drained, then sealed or discarded as `--on-cancel` says.
 *
 * Needs what `connectDaemon` needs, and `--allow-run=mkfifo`.
 *
 * @module
 */

import type { OnCancel } from "../protocol/daemon_session.ts";
import { CliError } from "./cli_error.ts";
import {
  connectDaemon,
  type DaemonConnection,
  DaemonConnectionError,
  daemonSocket,
} from "./daemon_connect.ts";
import type { CliIo, Signals } from "./io.ts";

/** `marsh op --help`'s text after the options. */
export const OP_HELP = `
CMD runs with ARGS exactly as given (no shell, no re-quoting; use
\`bash -c '...'\` for a shell line) in a private overlay of the session's head,
at the place of your current directory in it: run from the project or from
inside the session's view. Its stdin, stdout and stderr are yours (through
FIFOs: it gets no terminal), its environment your exported one, filtered as
a shell branch's is (no MARSH_*, DOCKER_*, credential-shaped names); when it
and every process it started have ended, what it changed becomes one new
checkpoint (none changed: a checkpoint with the same root), and the view
shows it. The checkpoint line goes to stderr:
  marsh: checkpoint <id> (<n> paths changed)

A command that fails still checkpoints what it changed. A reader of its
output that goes away does not stop it (the rest is dropped). Ctrl-C cancels it:
its processes are stopped and drained, then what it changed is sealed
(--on-cancel=seal, the default) or dropped (--on-cancel=discard).

The session: --session NAME, else $MARSH_SESSION, else the view you are in,
else the project's one open session.

Exit status: the command's (128+N for signal N, 130 when cancelled); 1 the
session is busy with another operation or moved meanwhile (nothing
published); 2 usage (no \`--\`, unknown session: nothing ran); 125 marsh could
not run or checkpoint it (the message says what).

Examples:
  marsh op -- make test
  marsh op -- bash -c 'sed -i s/foo/bar/ src/*.c && make'
  marsh op --session fix -- rm -r build
`;

/** The FIFO dir and its three FIFOs. */
interface Fifos {
  readonly dir: string;
  readonly in: string;
  readonly out: string;
  readonly err: string;
}

async function makeFifos(home: string): Promise<Fifos> {
  const parent = `${home}/io`;
  Deno.mkdirSync(parent, { recursive: true, mode: 0o700 });
  const id = [...crypto.getRandomValues(new Uint8Array(9))]
    .map((b) => b.toString(16).padStart(2, "0")).join("");
  const dir = `${Deno.realPathSync(parent)}/${id}`;
  Deno.mkdirSync(dir, { mode: 0o700 });
  const f = { dir, in: `${dir}/in`, out: `${dir}/out`, err: `${dir}/err` };
  const r = await new Deno.Command("mkfifo", {
    args: ["-m", "600", f.in, f.out, f.err],
    stdout: "null",
    stderr: "piped",
  }).output();
  if (!r.success) {
    Deno.removeSync(dir, { recursive: true });
    throw new CliError(
      `marsh op: cannot make its FIFOs in ${dir}: ${new TextDecoder().decode(r.stderr).trim()}`,
      125,
    );
  }
  return f;
}

/** Copies a stream to a writer until its end; a writer that has gone ends it quietly. */
async function pump(
  from: ReadableStream<Uint8Array>,
  to: (bytes: Uint8Array) => Promise<boolean>,
): Promise<void> {
  for await (const chunk of from) if (!(await to(chunk))) break;
}

async function writeAll(w: { write(p: Uint8Array): Promise<number> }, b: Uint8Array) {
  let off = 0;
  while (off < b.length) off += await w.write(b.subarray(off));
}

/**
 * Runs the operation and returns the exit status.
 *
 * @throws {CliError} for a usage error or a refusal (the daemon's status and message)
 */
export async function opCommand(
  opts: {
    readonly argv: readonly string[];
    readonly session?: string;
    readonly onCancel: OnCancel;
  },
  io: CliIo,
  signals: Signals,
  connect: () => Promise<DaemonConnection> = connectDaemon,
): Promise<number> {
  const env = io.env();
  const session = opts.session ?? (env.MARSH_SESSION || null);
  const home = daemonSocket().home;
  if (home === "") throw new CliError("marsh op: run it on the host, not inside a branch");
  await using conn = await connect();
  const f = await makeFifos(home);
  try {
    await conn.send({
      v: 1,
      t: "op.run",
      cwd: io.cwd(),
      session,
      argv: [...opts.argv],
      io: f.dir,
      onCancel: opts.onCancel,
      env,
    });
    // All three at once: the worker opens its ends in any order.
    const pending = new Map<string, Promise<Deno.FsFile>>();
    const openOne = (path: string, o: Deno.OpenOptions) => {
      const p = Deno.open(path, o);
      pending.set(path, p);
      void p.then(() => pending.delete(path), () => pending.delete(path));
      return p;
    };
    const opened = Promise.all([
      openOne(f.in, { write: true }),
      openOne(f.out, { read: true }),
      openOne(f.err, { read: true }),
    ]);
    let streams: Promise<void> | null = null;
    void opened.then(([inp, out, err]) => {
      void pump(io.stdin, async (b) => {
        try {
          await writeAll(inp, b);
          return true;
        } catch (error) {
          if (error instanceof Deno.errors.BrokenPipe) return false;
          throw error;
        }
      }).catch(() => {}).finally(() => {
        try {
          inp.close();
        } catch {
          // Closed already at the end.
        }
      });
      streams = Promise.all([
        pump(out.readable, (b) => io.write(b)),
        pump(err.readable, async (b) => {
          try {
            await writeAll(Deno.stderr, b);
            return true;
          } catch (error) {
            if (error instanceof Deno.errors.BrokenPipe) return false;
            throw error;
          }
        }),
      ]).then(() => {});
    }, () => {});
    const reply = await signals.trapInterrupts(
      () => void conn.send({ v: 1, t: "op.cancel" }).catch(() => {}),
      () => awaitDone(conn, (line) => io.error(line)),
    );
    if (reply.kind === "error") {
      await unblock(f, pending);
      throw new CliError(reply.message, reply.code);
    }
    // The worker closed its ends at the drain: the output is complete.
    await opened.then(() => streams, () => {});
    io.error(reply.message);
    return reply.status;
  } finally {
    Deno.removeSync(f.dir, { recursive: true });
  }
}

type Done =
  | { readonly kind: "done"; readonly status: number; readonly message: string }
  | { readonly kind: "error"; readonly code: number; readonly message: string };

async function awaitDone(conn: DaemonConnection, note: (line: string) => void): Promise<Done> {
  try {
    for await (const reply of conn) {
      if (reply.t === "op.lingering") {
        note(reply.message);
        continue;
      }
      if (reply.t === "op.done") {
        return { kind: "done", status: reply.status, message: reply.message };
      }
      if (reply.t === "error") {
        return { kind: "error", code: reply.code, message: `marsh op: ${reply.message}` };
      }
    }
    return {
      kind: "error",
      code: 125,
      message: "marsh op: the daemon closed the connection without a reply",
    };
  } catch (cause) {
    if (!(cause instanceof DaemonConnectionError)) throw cause;
    return { kind: "error", code: 125, message: `marsh op: ${cause.message}` };
  }
}

/**
 * The op ended before the worker opened some FIFOs (it never launched):
 * open the other end of each FIFO still pending here, so that its open
 * returns, and close everything.
 */
async function unblock(f: Fifos, pending: Map<string, Promise<Deno.FsFile>>): Promise<void> {
  const counterpart: Record<string, Deno.OpenOptions> = {
    [f.in]: { read: true },
    [f.out]: { write: true },
    [f.err]: { write: true },
  };
  const handles: Promise<Deno.FsFile | null>[] = [];
  for (const [path, open] of pending) {
    handles.push(open.catch(() => null));
    handles.push(Deno.open(path, counterpart[path]).catch(() => null));
  }
  for (const h of await Promise.all(handles)) {
    try {
      h?.close();
    } catch {
      // Closed by its pump already.
    }
  }
}
