import assert from "node:assert/strict";
import { filterEnv, hasUrlPassword, isForwardable } from "./env_filter.ts";

const none = "none" as const;

function check(kept: string[], dropped: string[]): void {
  for (const name of kept) assert.ok(isForwardable(name), `${name} should be kept`);
  for (const name of dropped) assert.ok(!isForwardable(name), `${name} should be dropped`);
}

Deno.test({ name: "env: marsh, sandbox, Docker and AWS prefixes", permissions: none }, () => {
  check(
    ["MARSH", "MARSHAL_X", "SBX", "DOCKERFILE", "AWSOME", "XMARSH_Y"],
    [
      "MARSH_SOCK",
      "MARSH_HOME",
      "marsh_x",
      "SBX_RELAY",
      "DOCKER_HOST",
      "Docker_Config",
      "AWS_REGION",
      "aws_profile",
    ],
  );
});

Deno.test({ name: "env: credential-shaped names, as substrings", permissions: none }, () => {
  check(
    ["PATH", "HOME", "LANG", "KE", "PAS", "TOKE", "SECRE", "CREDENTIA", "COOKI"],
    [
      "KEY",
      "API_KEY",
      "apikey",
      "MONKEY", // contains KEY: dropped, as the spec's *KEY* says
      "KEYBOARD_LAYOUT",
      "SECRET",
      "my_secret_thing",
      "PASS",
      "PASSWORD",
      "PGPASSFILE",
      "COMPASS_DIR",
      "SSH_ASKPASS",
      "TOKEN",
      "GH_TOKEN",
      "CREDENTIALS_FILE",
      "GOOGLE_APPLICATION_CREDENTIALS",
      "COOKIE_JAR",
    ],
  );
});

Deno.test(
  { name: "env: JWT, SESSION and connection strings, as substrings", permissions: none },
  () => {
    check(
      ["JW", "JWKS_URI", "SESSIO", "CONNECTION", "CONNECTION_STR", "STRING"],
      [
        "JWT",
        "APP_JWT",
        "jwt_secret_file",
        "SESSION",
        "BW_SESSION", // Bitwarden CLI's unlocked vault
        "OP_SESSION_myaccount", // 1Password CLI's session token
        "SESSION_COOKIE_NAME",
        "XDG_SESSION_TYPE", // host-only anyway
        "DESKTOP_SESSION",
        "AZURE_STORAGE_CONNECTION_STRING",
        "db_connection_string",
      ],
    );
  },
);

Deno.test({ name: "env: AUTH in a word, but not AUTHOR or AUTHORS", permissions: none }, () => {
  check(
    [
      "GIT_AUTHOR_NAME",
      "GIT_AUTHOR_EMAIL",
      "GIT_AUTHOR_DATE",
      "AUTHOR",
      "AUTHORS_FILE",
      "git_author_name",
      "AUTO",
      "AUT_H",
    ],
    [
      "AUTH",
      "X_AUTH",
      "GITHUB_AUTH",
      "AUTH_HEADER",
      "NPM_CONFIG__AUTH", // npm's base64 user:password
      "npm_config__auth",
      "HTTP_AUTHORIZATION",
      "OAUTH_CLIENT_ID",
      "GOOGLE_OAUTH_X",
      "BASICAUTH",
      "PROXY_AUTHN",
      "X_AUTHZ",
      "SSH_AUTH_SOCK", // host-only too: the agent holds your keys
      "XAUTHORITY",
    ],
  );
});

Deno.test({ name: "env: DSN and PWD are whole words", permissions: none }, () => {
  check(
    ["DSNAME", "ODSN_X", "PWDX", "XPWD", "CWD"],
    [
      "DSN",
      "SENTRY_DSN",
      "database_dsn",
      "DSN_URL",
      "MYSQL_PWD",
      "DB_PWD",
      "PWD_FILE",
      "PWD",
      "OLDPWD",
    ],
  );
});

Deno.test({ name: "env: everyday variables pass", permissions: none }, () => {
  check(
    [
      "PATH",
      "HOME",
      "LANG",
      "LC_ALL",
      "TERM",
      "COLORTERM",
      "USER",
      "LOGNAME",
      "SHELL",
      "EDITOR",
      "PAGER",
      "TZ",
      "TMPDIR",
      "HOSTNAME",
      "SHLVL",
      "EMAIL",
      "GOPATH",
      "CARGO_HOME",
      "JAVA_HOME",
      "NODE_ENV",
      "PYTHONPATH",
      "VIRTUAL_ENV",
      "XDG_CONFIG_HOME",
      "XDG_DATA_HOME",
      "HTTP_PROXY",
      "NO_PROXY",
      "GIT_COMMITTER_NAME",
      "GIT_COMMITTER_EMAIL",
      "DATABASE_URL",
    ],
    [],
  );
});

/** [value, holds a URL with a password]. */
const URL_VALUES: readonly (readonly [string, boolean])[] = [
  ["postgres://user:pass@db/app", true],
  ["postgresql://u:p@localhost:5432/db?sslmode=disable", true],
  ["http://u:@proxy:3128", true], // an empty password is still one
  ["redis://:secret@cache:6379/0", true], // a password without a user
  ["https://x-access-token:ghs_abc@github.com/o/r.git", true],
  ["mysql://root:p@ss@db/x", true], // an unencoded @ in the password
  ["jdbc:postgresql://u:p@h/db", true], // the URL inside another scheme
  ["A=1 amqp://guest:guest@rabbit", true], // anywhere in the value
  ["first\nsmtp://me:pw@mail", true],
  ["HTTP://U:P@H", true],
  ["postgres://localhost/db", false],
  ["postgres://db:5432/app", false], // a port is not a password
  ["ssh://git@github.com/o/r", false], // a user without a password
  ["https://ghp_abc@github.com/o/r", false], // a token as the user: name it TOKEN
  ["https://example.com/a:b@c", false], // after the authority
  ["https://host?x=a:b@c", false],
  ["https://host#a:b@c", false],
  ["https://[::1]:8080/", false],
  ["user:pass@host", false], // no scheme
  ["://u:p@h", false],
  [" ://u:p@h", false],
  ["mailto:me@example.com", false],
  ["C:\\Users\\me", false],
  ["", false],
  ["a://".repeat(1 << 18), false], // linear however many `://` there are
  [`${"x".repeat(1 << 20)}://u:p@h`, true],
];

Deno.test({ name: "env: values holding a URL with a password", permissions: none }, () => {
  for (const [value, secret] of URL_VALUES) {
    const shown = value.length > 80 ? `${value.slice(0, 40)}... (${value.length})` : value;
    assert.equal(hasUrlPassword(value), secret, shown);
    assert.equal(isForwardable("DATABASE_URL", value), !secret, shown);
    assert.equal(isForwardable("SOME_SETTING", value), !secret, shown);
  }
  // A name already dropped stays dropped whatever its value.
  assert.equal(isForwardable("GH_TOKEN", "plain"), false);
});

Deno.test({ name: "env: *_PAT is a suffix with its underscore", permissions: none }, () => {
  check(
    ["PAT", "PATH", "PATTERN", "MY_PATH", "XPAT", "PAT_X", "_PATH"],
    ["MY_PAT", "GITHUB_PAT", "gitlab_pat", "_PAT"],
  );
});

Deno.test({ name: "env: host-only and placement-bound names", permissions: none }, () => {
  check(
    ["TERM", "COLORTERM", "SSH_HOME", "XDG_CONFIG_HOME", "DISPLAYS", "TMUX_TMPDIR_X", "PWDX"],
    [
      "SSH_AUTH_SOCK",
      "SSH_AGENT_PID",
      "SSH_TTY",
      "DISPLAY",
      "WAYLAND_DISPLAY",
      "XAUTHORITY",
      "DBUS_SESSION_BUS_ADDRESS",
      "XDG_RUNTIME_DIR",
      "TERM_SESSION_ID",
      "TMUX",
      "TMUX_PANE",
      "STY",
      "KRB5CCNAME",
      "PWD",
      "OLDPWD",
      "display",
    ],
  );
});

Deno.test({ name: "env: shell state a fresh branch does not inherit", permissions: none }, () => {
  check(
    ["BASH", "BASHX", "ENVIRONMENT", "SHELL"],
    ["BASH_FUNC_f%%", "BASH_FUNC_x()", "SHELLOPTS", "BASHOPTS", "BASH_ENV", "ENV"],
  );
});

Deno.test({ name: "env: names that cannot be variables", permissions: none }, () => {
  check([], ["", "A=B", "A\0B", "="]);
});

Deno.test({ name: "env: filterEnv keeps values and order of the kept", permissions: none }, () => {
  const env = {
    PATH: "/usr/bin",
    GITHUB_TOKEN: "ghp_x",
    PATTERN: "*.ts",
    MARSH_SOCK: "/s",
    HOME: "/home/u",
    MY_PAT: "p",
    DATABASE_URL: "postgres://app:hunter2@db/app",
    CACHE_URL: "redis://cache:6379/0",
  };
  const out = filterEnv(env);
  assert.deepEqual(out, {
    PATH: "/usr/bin",
    PATTERN: "*.ts",
    HOME: "/home/u",
    CACHE_URL: "redis://cache:6379/0",
  });
  assert.deepEqual(Object.keys(out), ["PATH", "PATTERN", "HOME", "CACHE_URL"]);
  assert.equal(env.GITHUB_TOKEN, "ghp_x", "the input is not changed");
});
