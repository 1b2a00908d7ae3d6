/**
 * The `marsh engine start|stop|status` process, run by the CLI with
 * `engineFlags()` (`flags.ts`): the CLI has no network, this process may
 * reach the engine sockets, start dockerd and signal it.
 *
 *     engine_main.ts start|stop|status [--json] [--progress]
 *
 * The control dir is `$MARSH_HOME` (the CLI sets it). Exit status: 0 done
 * (and, for status, the engine answers); 1 status: no engine answers, or a
 * stop that failed; 2 the engine cannot be started (the message says why
 * and what to do).
 *
 * @module
 */

import { parseArgs } from "node:util";
import { ControlDirError, controlDirPath } from "../protocol/control_dir.ts";
import { DockerApiError } from "./docker_api.ts";
import { EngineError, engineStatus, startEngine, stopEngine } from "./private_engine.ts";

const enc = new TextEncoder();

function out(text: string): void {
  const bytes = enc.encode(text);
  let off = 0;
  while (off < bytes.length) off += Deno.stdout.writeSync(bytes.subarray(off));
}

const SOURCE_TEXT = {
  "DOCKER_HOST": "from DOCKER_HOST",
  "private": "the private engine",
  "default": "the default socket",
} as const;

async function start(home: string, json: boolean, progress: boolean): Promise<number> {
  const r = await startEngine(home, {
    ...(progress
      ? { onProgress: (line: string) => console.error(`marsh engine start: ${line}`) }
      : {}),
  });
  if (json) {
    out(`${
      JSON.stringify({
        started: r.started,
        pid: r.pid,
        socket: r.socket,
        version: r.version.version,
        api_version: r.version.apiVersion,
      })
    }\n`);
  } else {
    out(
      `${
        r.started ? "engine started" : "engine already running"
      } (pid ${r.pid}, dockerd ${r.version.version})\n` +
        `socket: ${r.socket}\n`,
    );
  }
  if (Deno.env.get("DOCKER_HOST")) {
    console.error(
      "marsh engine start: note: DOCKER_HOST is set, so marsh uses that engine, not this one",
    );
  }
  return 0;
}

async function stop(home: string, json: boolean): Promise<number> {
  const r = await stopEngine(home);
  for (const note of r.notes) console.error(`marsh engine stop: ${note}`);
  if (json) out(`${JSON.stringify({ stopped: r.stopped, pid: r.pid, killed: r.killed })}\n`);
  else if (!r.stopped) out("engine: not running (nothing to stop)\n");
  else {out(
      `engine stopped (pid ${r.pid}${r.killed ? ", killed after SIGTERM was not enough" : ""})\n`,
    );}
  return 0;
}

async function status(home: string, json: boolean): Promise<number> {
  const s = await engineStatus(home, Deno.env);
  if (json) {
    out(`${
      JSON.stringify({
        reachable: s.reachable,
        socket: s.socket.path,
        source: s.socket.source,
        version: s.version?.version ?? null,
        api_version: s.version?.apiVersion ?? null,
        error: s.error,
        private: {
          running: s.private.running,
          pid: s.private.pid,
          socket: s.private.socket,
          log: s.private.log,
          data_root: s.private.dataRoot,
          exec_root: s.private.execRoot,
        },
      })
    }\n`);
  } else {
    out(
      (s.version
        ? `engine: reachable (dockerd ${s.version.version}, API ${s.version.apiVersion})\n`
        : `engine: not reachable: ${s.error}\n`) +
        `socket: ${s.socket.path} (${SOURCE_TEXT[s.socket.source]})\n` +
        (s.private.running
          ? `private engine: running (pid ${s.private.pid}), log ${s.private.log}\n`
          : "private engine: not running (start it with `marsh engine start`)\n"),
    );
  }
  return s.reachable ? 0 : 1;
}

if (import.meta.main) {
  const { values, positionals } = parseArgs({
    args: Deno.args,
    options: {
      json: { type: "boolean", default: false },
      progress: { type: "boolean", default: false },
    },
    allowPositionals: true,
    strict: true,
  });
  const action = positionals[0];
  const who = `marsh engine ${action ?? ""}`.trimEnd();
  let code: number;
  try {
    const home = controlDirPath();
    if (action === "start") code = await start(home, values.json, values.progress);
    else if (action === "stop") code = await stop(home, values.json);
    else if (action === "status") code = await status(home, values.json);
    else {
      console.error(`${who}: expected start, stop or status`);
      code = 2;
    }
  } catch (error) {
    if (error instanceof EngineError) {
      console.error(`${who}: ${error.message}`);
      code = error.code;
    } else if (error instanceof DockerApiError) {
      console.error(`${who}: the engine failed: ${error.message}`);
      code = 1;
    } else if (error instanceof ControlDirError) {
      console.error(`${who}: ${error.message}`);
      code = 2;
    } else {
      throw error;
    }
  }
  Deno.exit(code);
}
