/**
 * `marsh status [--json]` and `marsh daemon start|stop|status`. Status
 * never starts a daemon: "not running" is an answer, not a failure.
 *
 * Needs what {@linkcode connectDaemon} needs.
 *
 * @module
 */

import type { StatusReply } from "../protocol/daemon.ts";
import { LOG_NAME } from "../protocol/control_dir.ts";
import { CliError } from "./cli_error.ts";
import {
  type DaemonConnection,
  type DaemonSocket,
  daemonSocket,
  ensureDaemon,
  request,
  tryConnect,
  waitUntilGone,
} from "./daemon_connect.ts";
import type { CliIo } from "./io.ts";
import { processesText } from "../model/job_lineage.ts";

const enc = new TextEncoder();

async function askStatus(conn: DaemonConnection, who: string, io: CliIo): Promise<StatusReply> {
  return await request(conn, { v: 1, t: "status" }, ["status"], who, io.error);
}

async function print(io: CliIo, text: string): Promise<void> {
  await io.write(enc.encode(text));
}

function since(ms: number): string {
  const d = new Date(ms);
  return Number.isNaN(d.getTime()) ? "" : `, since ${d.toISOString()}`;
}

/**
 * `marsh status`: the daemon, its split counts and its processes (jobs
 * running, launches refused, slots held: docs/rules.md "Lineage"). Exit 0 whether or not a
 * daemon runs.
 *
 * @throws {CliError} when the control dir or socket is unsafe, or the daemon fails
 */
export async function statusCommand(
  opts: { readonly json: boolean },
  io: CliIo,
  sock: DaemonSocket = daemonSocket(),
): Promise<number> {
  await using conn = await tryConnect(sock);
  if (!conn) {
    await print(
      io,
      opts.json
        ? `${JSON.stringify({ daemon: null })}\n`
        : `daemon: not running\ncontrol dir: ${sock.home}\n`,
    );
    return 0;
  }
  const reply = await askStatus(conn, "marsh status", io);
  if (opts.json) {
    const { v: _v, t: _t, ...rest } = reply;
    await print(io, `${JSON.stringify(rest)}\n`);
    return 0;
  }
  const { daemon, splits, forks, view, processes } = reply;
  await print(
    io,
    `daemon: running (pid ${daemon.pid}${since(daemon.started_unix_ms)})\n` +
      `control dir: ${daemon.home}\n` +
      `splits: ${splits.active} active, ${splits.awaiting} awaiting, ${splits.kept} kept\n` +
      (forks ? `forks: ${forks.strategy} (${forks.reason})\n` : "") +
      (view ? `shell branches: ${view.view} view (${view.reason})\n` : "") +
      (processes ? `${processesText(processes)}\n` : ""),
  );
  return 0;
}

/**
 * `marsh daemon status`: exit 0 when a daemon answers, 1 when none does.
 *
 * @throws {CliError} when the control dir or socket is unsafe
 */
export async function daemonStatusCommand(
  io: CliIo,
  sock: DaemonSocket = daemonSocket(),
): Promise<number> {
  await using conn = await tryConnect(sock);
  if (!conn) {
    await print(io, "marshd: not running\n");
    return 1;
  }
  const { daemon } = await askStatus(conn, "marsh daemon status", io);
  await print(
    io,
    `marshd: running (pid ${daemon.pid}${
      since(daemon.started_unix_ms)
    }), control dir ${daemon.home}\n`,
  );
  return 0;
}

/**
 * `marsh daemon start`: starts the daemon unless one answers.
 *
 * @throws {CliError} (status 2) when it does not start
 */
export async function daemonStartCommand(
  io: CliIo,
  sock: DaemonSocket = daemonSocket(),
): Promise<number> {
  const { conn, started } = await ensureDaemon(sock);
  await using _conn = conn;
  const { daemon } = await askStatus(conn, "marsh daemon start", io);
  await print(
    io,
    started
      ? `marshd started (pid ${daemon.pid})\n`
      : `marshd already running (pid ${daemon.pid})\n`,
  );
  return 0;
}

/**
 * `marsh daemon stop`: asks the daemon to stop and waits (up to 10 s) until
 * its socket no longer answers.
 *
 * @throws {CliError} (status 1) when it still answers after that
 */
export async function daemonStopCommand(
  io: CliIo,
  sock: DaemonSocket = daemonSocket(),
): Promise<number> {
  {
    await using conn = await tryConnect(sock);
    if (!conn) {
      await print(io, "marshd: not running\n");
      return 0;
    }
    const reply = await request(
      conn,
      { v: 1, t: "daemon.stop" },
      ["ok"],
      "marsh daemon stop",
      io.error,
    );
    if (reply.message) io.error(reply.message);
  }
  if (!(await waitUntilGone(sock))) {
    throw new CliError(
      `marsh daemon stop: marshd still answers after 10 s; see ${sock.home}/${LOG_NAME}`,
      1,
    );
  }
  await print(io, "marshd stopped\n");
  return 0;
}
