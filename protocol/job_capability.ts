/**
 * The job capability dir, `/run/marsh/` in every Kit container (docs/rules.md
 * "The job capability"): what is in it, where, and the two scripts that make registered names and
 * `marsh` work from any shell in the job.
 *
 * | path | what | made by |
 * |---|---|---|
 * | `/run/marsh/` | the attempt's cap dir, bound read-only | daemon |
 * | `cap.sock` | the attempt's socket: its connections carry the job's authority | daemon (a slot socket bound over a placeholder) |
 * | `job.json` | {@linkcode JobJson} | worker (it alone knows the image's `PATH`) |
 * | `context.md` | the job's agent context | daemon |
 * | `link` | {@linkcode linkScript}: entry and image-tool cases, else the client | daemon |
 * | `bin/NAME` | {@linkcode stubScript} for `marsh` and every registered name | daemon |
 * | `deno` | the host's Deno executable, bound read-only | worker |
 * | `marsh.js` | the bundled in-job client (`job/main.ts`), bound read-only | worker |
 *
 * @module
 */

import { jobClientFlags } from "./entrypoints.ts";
import { isLinkName } from "../model/kit_name.ts";
import type { JobLimits } from "../model/job_context.ts";

/** Where the cap dir is bound in every Kit container. */
export const CAP_TARGET = "/run/marsh";
export const CAP_SOCKET = `${CAP_TARGET}/cap.sock`;
export const JOB_JSON = `${CAP_TARGET}/job.json`;
export const CONTEXT_MD = `${CAP_TARGET}/context.md`;
export const LINK_SCRIPT = `${CAP_TARGET}/link`;
export const BIN_DIR = `${CAP_TARGET}/bin`;
export const JOB_DENO = `${CAP_TARGET}/deno`;
export const JOB_CLIENT = `${CAP_TARGET}/marsh.js`;

/** Names inside the cap dir, for the host side that writes it. */
export const CAP_FILES = {
  socket: "cap.sock",
  jobJson: "job.json",
  context: "context.md",
  link: "link",
  bin: "bin",
  deno: "deno",
  client: "marsh.js",
} as const;

/**
 * Open connections one attempt may hold on its socket, idle ones included (docs/rules.md
 * "The job capability").
 */
export const MAX_JOB_CONNECTIONS = 8;
/** The refusal frame's message for the next one (docs/rules.md "The job capability"). */
export const TOO_MANY_CONNECTIONS = "too many concurrent daemon requests in this job";

/** `MARSH_JOB`: the job id, in every Kit container's environment. */
export const JOB_ENV = "MARSH_JOB";
/** `MARSH_ENTRY=1`: the marker the entrypoint's link consumes (docs/rules.md "Links"). */
export const ENTRY_ENV = "MARSH_ENTRY";

/**
 * `/run/marsh/job.json` (docs/rules.md "The job capability"; `env` and `forwarded`: "Environment
 * forwarding").
 */
export interface JobJson {
  readonly version: 1;
  readonly job: string;
  /** The job's own command name (its Kit). */
  readonly name: string;
  /** The names this job may start. */
  readonly spawn: readonly string[];
  /** Every registered name (each has a link). */
  readonly registered: readonly string[];
  readonly socket: typeof CAP_SOCKET;
  /** The starting `PATH`: `/run/marsh/bin:` and the image's. */
  readonly path: string;
  readonly limits: JobLimits;
  /** Per starting variable, the HMAC-SHA256 hex of `NAME=VALUE` under the daemon's key; `""` for those Docker or marsh set. */
  readonly env: Readonly<Record<string, string>>;
  /** The names the job received, sorted. */
  readonly forwarded: readonly string[];
}

/**
 * `job.json` as the daemon sends it in a launch: the worker adds `path`,
 * `env` and `forwarded`, which only the image's config and the container's
 * starting environment tell.
 */
export type JobJsonBase = Omit<JobJson, "path" | "env" | "forwarded">;

/** The container's `PATH`: the links first, then the image's (`imagePath` from its config). */
export function jobPath(imagePath: string | null): string {
  return `${BIN_DIR}:${
    imagePath ?? "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
  }`;
}

/**
 * The flags the in-job client runs with: the `job-client` entrypoint of
 * `entrypoints.ts` on {@linkcode CAP_SOCKET} (which says why each grant).
 */
export const JOB_CLIENT_FLAGS: readonly string[] = jobClientFlags(CAP_SOCKET);

/**
 * `bin/NAME`: a two-line `#!/bin/sh` stub. The kernel gives the stub's path,
 * so the name comes from the stub, never from a caller's argv0.
 */
export function stubScript(name: string): string {
  if (!isLinkName(name)) throw new TypeError(`not a link name: ${name}`);
  return `#!/bin/sh\nexec ${LINK_SCRIPT} --link=${name} "$@"\n`;
}

/**
 * `/run/marsh/link`, for a job whose own command is `own` (docs/rules.md "Links"):
 *
 * 1. entry case: `NAME` is `own`, `MARSH_ENTRY=1` and the parent is
 *    docker-init (pid 1): unset the marker and exec the image's `NAME`;
 * 2. image-tool case: `NAME` is another name the image has on its `PATH`
 *    (searched without `/run/marsh/bin`): exec it;
 * 3. otherwise the in-job client, which speaks to `cap.sock`.
 *
 * `marsh` always goes to the client. A real `exec` keeps the pid, the
 * signals and the exit status the image's program's own.
 */
export function linkScript(own: string): string {
  if (!isLinkName(own)) throw new TypeError(`not a link name: ${own}`);
  return `#!/bin/sh
# marsh job link (docs/rules.md "Links"); generated per attempt.
own='${own}'
name="\${1#--link=}"
shift
image_has() {
  (
    IFS=:
    for d in $PATH; do
      case "$d" in ''|${BIN_DIR}|${BIN_DIR}/) continue ;; esac
      if [ -f "$d/$1" ] && [ -x "$d/$1" ]; then printf '%s\\n' "$d/$1"; exit 0; fi
    done
    exit 1
  )
}
if [ "$name" != marsh ]; then
  if [ "$name" = "$own" ]; then
    if [ "\${${ENTRY_ENV}:-}" = 1 ] && [ "$PPID" = 1 ]; then
      unset ${ENTRY_ENV}
      if p=$(image_has "$name"); then exec "$p" "$@"; fi
      printf 'marsh: %s: not found on the image'"'"'s PATH\\n' "$name" >&2
      exit 127
    fi
  elif p=$(image_has "$name"); then
    exec "$p" "$@"
  fi
fi
export DENO_NO_UPDATE_CHECK=1
exec ${JOB_DENO} run ${JOB_CLIENT_FLAGS.join(" ")} ${JOB_CLIENT} --link="$name" "$@"
`;
}
