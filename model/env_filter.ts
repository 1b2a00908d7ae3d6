/**
 * Which exported variables a shell branch receives (docs/guide.md, "What a
 * shell branch sees"). The daemon filters the caller's environment
 * before it sends a launch; the worker filters again with the same rules so
 * a daemon fault cannot hand a branch a credential. This is the one
 * credential rule of marsh; a
 * Kit's `--env` names are an explicit choice and pass whatever they are.
 *
 * Every rule compares names case-insensitively and errs towards dropping:
 *
 * - prefixes `MARSH_`, `DOCKER_` (marsh's and the engine's own), `SBX_`,
 *   `AWS_`;
 * - credential-shaped names:
 *   - containing `KEY`, `SECRET`, `PASS`, `TOKEN`, `CREDENTIAL`, `COOKIE`,
 *     `JWT` or `SESSION` anywhere — a substring, as the spec's `*KEY*` glob
 *     says, so `MONKEY`, `KEYBOARD` and `COMPASS` are dropped too
 *     (`SESSION` also takes `BW_SESSION`, `OP_SESSION_<account>`: password
 *     manager sessions);
 *   - with a `_`-separated word holding `AUTH` (`X_AUTH`, `NPM_CONFIG__AUTH`,
 *     `HTTP_AUTHORIZATION`, `OAUTH_X`), except the words `AUTHOR` and
 *     `AUTHORS`: `GIT_AUTHOR_NAME` is everyday and stays;
 *   - with a word `DSN` or `PWD` (`SENTRY_DSN`, `MYSQL_PWD`), or containing
 *     `CONNECTION_STRING`: these carry passwords by design;
 *   - ending in `_PAT` (`GITHUB_PAT`; `PATH`, `PATTERN` and a bare `PAT` stay);
 * - a value holding a URL with a password, `scheme://user:pass@host`
 *   (`DATABASE_URL`, `HTTPS_PROXY`, `PIP_INDEX_URL`), whatever the name; a
 *   URL with a user and no password (`ssh://git@host/x`) stays;
 * - host-only: agents, displays, terminal multiplexers and sessions a branch
 *   without a terminal cannot use, such as `SSH_AUTH_SOCK` (a socket path,
 *   but to an agent holding your keys), `DISPLAY`, `XDG_RUNTIME_DIR`,
 *   `TMUX`, `STY`, `KRB5CCNAME`;
 * - placement-bound: `PWD` and `OLDPWD` name the caller's directories, not
 *   the fork (bash sets `PWD` from its cwd);
 * - shell state a fresh branch does not inherit (docs/guide.md): exported
 *   functions (`BASH_FUNC_*`), set options (`SHELLOPTS`, `BASHOPTS`) and
 *   start-up files (`BASH_ENV`, `ENV`);
 * - names that cannot be variables: empty, or containing `=` or NUL
 *   (`isEnvEntryName` of `model/env_name.ts`).
 *
 * @module
 */

import { isEnvEntryName, RESERVED_ENV_PREFIXES } from "./env_name.ts";

const PREFIXES = [...RESERVED_ENV_PREFIXES, "SBX_", "AWS_", "BASH_FUNC_"] as const;

/** Substrings of a credential's name. */
const CREDENTIAL_PARTS = [
  "KEY",
  "SECRET",
  "PASS",
  "TOKEN",
  "CREDENTIAL",
  "COOKIE",
  "JWT",
  "SESSION",
  "CONNECTION_STRING",
] as const;

/** Whole `_`-separated words of a credential's name. */
const CREDENTIAL_WORDS = new Set(["DSN", "PWD"]);

/** Words that hold `AUTH` and are not about authentication. */
const NOT_AUTH = new Set(["AUTHOR", "AUTHORS"]);

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

/** Whether a name is credential-shaped (see the module doc). */
function isCredentialName(upper: string): boolean {
  if (CREDENTIAL_PARTS.some((part) => upper.includes(part))) return true;
  if (upper.endsWith("_PAT")) return true;
  return upper.split("_").some((word) =>
    CREDENTIAL_WORDS.has(word) || (word.includes("AUTH") && !NOT_AUTH.has(word))
  );
}

/** A URL scheme's characters (RFC 3986), what may precede `://`: letters, digits, `+`, `.`, `-`. */
function isSchemeChar(c: number): boolean {
  return (c >= 0x61 && c <= 0x7a) || (c >= 0x41 && c <= 0x5a) || (c >= 0x30 && c <= 0x39) ||
    c === 0x2b || c === 0x2e || c === 0x2d;
}

/** What ends a URL's authority (`user:pass@host:port`): `/`, `?`, `#` or white space. */
const AUTHORITY_END = new Set(["/", "?", "#", " ", "\t", "\n", "\r", "\v", "\f"]);

/**
 * Whether `value` holds a URL with a password anywhere: `scheme://` then an
 * authority with a `:` before an `@` (`user:pass@host`, `:pass@host`; an
 * unencoded `@` in the password too). Linear in the value whatever its size:
 * an authority scan stops at the next `/`, so no character is scanned twice.
 */
export function hasUrlPassword(value: string): boolean {
  for (let at = value.indexOf("://"); at !== -1; at = value.indexOf("://", at + 3)) {
    if (at === 0 || !isSchemeChar(value.charCodeAt(at - 1))) continue;
    let colon = false;
    for (let i = at + 3; i < value.length; i++) {
      const c = value[i]!;
      if (AUTHORITY_END.has(c)) break;
      if (c === ":") colon = true;
      else if (c === "@" && colon) return true;
    }
  }
  return false;
}

/**
 * Whether a variable may reach a shell branch: by its name alone, or with
 * `value` also by what it holds (a URL with a password never passes).
 */
export function isForwardable(name: string, value?: string): boolean {
  if (!isEnvEntryName(name)) return false;
  const upper = name.toUpperCase();
  if (PREFIXES.some((p) => upper.startsWith(p))) return false;
  if (isCredentialName(upper)) return false;
  if (DROPPED.has(upper)) return false;
  return value === undefined || !hasUrlPassword(value);
}

/** The forwardable part of `env`, as a new object. */
export function filterEnv(env: Readonly<Record<string, string>>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(env)) {
    if (isForwardable(name, value)) out[name] = value;
  }
  return out;
}
