import assert from "node:assert/strict";
import type { KitInfo } from "../protocol/daemon.ts";
import { CliError } from "./cli_error.ts";
import type { CliIo } from "./io.ts";
import {
  formatKits,
  type KitChecker,
  kitsAddCommand,
  type KitsAddOptions,
} from "./kits_command.ts";

const scratch = "/state/marsh";

function kit(name: string, image: string, over: Partial<KitInfo> = {}): KitInfo {
  return {
    name,
    image,
    image_id: `sha256:${"e".repeat(64)}`,
    entrypoint: null,
    network: "none",
    env: [],
    wall_s: 3600,
    home: `/s/kits/${name}/home`,
    created_unix_ms: 0,
    ...over,
  };
}

Deno.test(
  { name: "formatKits: one aligned line per Kit, or how to add one", permissions: {} },
  () => {
    assert.equal(
      formatKits([]),
      "no kits registered (add one with: marsh kits add NAME --image IMAGE)\n",
    );
    assert.equal(
      formatKits([
        kit("claude", "marsh-kit/claude:0123abcd4567", { network: "host", wall_s: 7200 }),
        kit("pi", "pi:1", { home: "/srv/pi" }),
      ]),
      "claude  marsh-kit/claude:0123abcd4567  network=host  wall=7200s  home=/s/kits/claude/home\n" +
        "pi      pi:1                           network=none  wall=3600s  home=/srv/pi\n",
    );
  },
);

function io(home: string, env: Record<string, string> = {}): CliIo & { lines: string[] } {
  const lines: string[] = [];
  return {
    lines,
    cwd: () => "/",
    env: () => ({ MARSH_HOME: home, ...env }),
    stdin: new ReadableStream(),
    stdinIsTerminal: false,
    stdoutIsTerminal: false,
    stderrIsTerminal: false,
    write: () => Promise.resolve(true),
    error: (line) => lines.push(line),
  };
}

const neverChecked: KitChecker = () => {
  throw new Error("the engine check must not run for a refused request");
};
const neverConnected = () => {
  throw new Error("the daemon must not be asked for a refused request");
};

Deno.test({
  name: "kits add: a bad field is refused (exit 2) before the engine or the daemon is asked",
  permissions: {},
}, async () => {
  const home = `${scratch}/home`;
  const base: KitsAddOptions = { name: "tools", image: "i:1", env: [], replace: false };
  const cases: [Partial<KitsAddOptions>, RegExp][] = [
    [{ name: "Tools" }, /^marsh kits add: invalid kit name "Tools"/],
    [{ name: "env" }, /^marsh kits add: invalid kit name "env": it would shadow env/],
    [{ image: "a b" }, /^marsh kits add: invalid --image "a b"/],
    [{ entrypoint: "a b" }, /^marsh kits add: invalid --entrypoint "a b"/],
    [{ network: "" }, /^marsh kits add: invalid --network ""/],
    [{ env: ["MARSH_X"] }, /^marsh kits add: --env MARSH_X is refused/],
    [{ wall: "0" }, /^marsh kits add: invalid --wall "0"/],
    [{ wall: "86401" }, /^marsh kits add: invalid --wall "86401"/],
    [{ home: "x" }, /^marsh kits add: invalid --home "x": give an absolute path/],
    [{ home: `${home}/journal` }, /inside marsh's control dir/],
  ];
  for (const [over, pattern] of cases) {
    await assert.rejects(
      kitsAddCommand({ ...base, ...over }, io(home), {
        check: neverChecked,
        connect: neverConnected,
        socket: { path: `${home}/marshd.sock`, home, branch: false },
      }),
      (e) => e instanceof CliError && e.code === 2 && pattern.test(e.message),
      JSON.stringify(over),
    );
  }
});

Deno.test({
  name: "kits add: a refused engine check ends with its status and asks the daemon nothing",
  permissions: {},
}, async () => {
  const seen: unknown[] = [];
  const code = await kitsAddCommand(
    { name: "tools", image: "i:1", env: ["A"], wall: "86400", home: "/srv/x", replace: false },
    io(`${scratch}/home2`),
    {
      check: (args) => {
        seen.push(args);
        return Promise.resolve({ code: 2 });
      },
      connect: neverConnected,
      socket: { path: `${scratch}/home2/marshd.sock`, home: `${scratch}/home2`, branch: false },
    },
  );
  assert.equal(code, 2);
  assert.deepEqual(seen, [{ image: "i:1", controlDir: `${scratch}/home2`, home: "/srv/x" }]);
});

Deno.test({
  name: "kits add from inside a shell branch is refused before anything else",
  permissions: {},
}, async () => {
  await assert.rejects(
    kitsAddCommand(
      { name: "tools", image: "i:1", env: [], replace: false },
      io(`${scratch}/home3`, { MARSH_SOCK: `${scratch}/b.sock` }),
      {
        check: neverChecked,
        connect: neverConnected,
        socket: { path: `${scratch}/b.sock`, home: "", branch: true },
      },
    ),
    (e) =>
      e instanceof CliError && e.code === 2 &&
      e.message === "marsh kits add: only the host may register Kit commands",
  );
});
