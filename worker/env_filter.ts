/**
 * Which exported variables a shell branch receives (spec 000 §13,
 * "Environment filtering"). The daemon filters the caller's environment
 * before it sends a launch; the worker filters again with the same rules so
 * a daemon fault cannot hand a branch a credential.
 *
 * Every rule compares names case-insensitively and errs towards dropping:
 *
 * - prefixes `MARSH_`, `SBX_`, `DOCKER_`, `AWS_`;
 * - credential-shaped: the name contains `KEY`, `SECRET`, `PASS`, `TOKEN`,
 *   `CREDENTIAL` or `COOKIE` anywhere — a substring, as the spec's `*KEY*`
 *   glob says, so `MONKEY`, `KEYBOARD` and `COMPASS` are dropped too — or
 *   ends in `_PAT` (`GITHUB_PAT`; `PATH`, `PATTERN` and a bare `PAT` stay);
 * - host-only: agents, displays, terminal multiplexers and sessions a branch
 *   without a terminal cannot use, such as `SSH_AUTH_SOCK`, `DISPLAY`,
 *   `XDG_RUNTIME_DIR`, `TMUX`, `STY`, `KRB5CCNAME`;
 * - placement-bound: `PWD` and `OLDPWD` name the caller's directories, not
 *   the fork (bash sets `PWD` from its cwd);
 * - shell state that spec 000 §2 says a branch does not inherit: exported
 *   functions (`BASH_FUNC_*`), set options (`SHELLOPTS`, `BASHOPTS`) and
 *   start-up files (`BASH_ENV`, `ENV`);
 * - names that cannot be variables: empty, or containing `=` or NUL.
 *
 * @module
 */

const PREFIXES = ["MARSH_", "SBX_", "DOCKER_", "AWS_", "BASH_FUNC_"] as const;

const CREDENTIAL_PARTS = ["KEY", "SECRET", "PASS", "TOKEN", "CREDENTIAL", "COOKIE"] as const;

const DROPPED = new Set([
  // Host-only: agents, displays, terminals and sessions of the caller.
  "SSH_AUTH_SOCK",
  "SSH_AGENT_PID",
  "SSH_CONNECTION",
  "SSH_CLIENT",
  "SSH_TTY",
  "GPG_AGENT_INFO",
  "KRB5CCNAME",
  "DISPLAY",
  "WAYLAND_DISPLAY",
  "XAUTHORITY",
  "WINDOWID",
  "DBUS_SESSION_BUS_ADDRESS",
  "XDG_RUNTIME_DIR",
  "XDG_SESSION_ID",
  "TERM_SESSION_ID",
  "TMUX",
  "TMUX_PANE",
  "STY",
  // Placement-bound.
  "PWD",
  "OLDPWD",
  // Shell state a fresh branch does not inherit.
  "SHELLOPTS",
  "BASHOPTS",
  "BASH_ENV",
  "ENV",
]);

/** Whether a variable may reach a shell branch. */
export function isForwardable(name: string): boolean {
  if (name === "" || name.includes("=") || name.includes("\0")) return false;
  const upper = name.toUpperCase();
  if (PREFIXES.some((p) => upper.startsWith(p))) return false;
  if (CREDENTIAL_PARTS.some((part) => upper.includes(part))) return false;
  if (upper.endsWith("_PAT")) return false;
  return !DROPPED.has(upper);
}

/** The forwardable part of `env`, as a new object. */
export function filterEnv(env: Readonly<Record<string, string>>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(env)) {
    if (isForwardable(name)) out[name] = value;
  }
  return out;
}
