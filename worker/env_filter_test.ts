import assert from "node:assert/strict";
import { filterEnv, isForwardable } from "./env_filter.ts";

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
  };
  const out = filterEnv(env);
  assert.deepEqual(out, { PATH: "/usr/bin", PATTERN: "*.ts", HOME: "/home/u" });
  assert.deepEqual(Object.keys(out), ["PATH", "PATTERN", "HOME"]);
  assert.equal(env.GITHUB_TOKEN, "ghp_x", "the input is not changed");
});
