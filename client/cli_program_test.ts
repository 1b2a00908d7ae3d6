/**
 * The shared command line, in process: what the parser never sees, how
 * statuses and errors become exit codes, and that its module graph stays
 * bundleable (no `docker/`, no dockerode) for the in-job client.
 */
import assert from "node:assert/strict";
import { CliError } from "./cli_error.ts";
import {
  type CliContext,
  io,
  preSplit,
  programFor,
  runCli,
  signals,
  userErrors,
} from "./cli_program.ts";
import { registerHostCommands } from "../main.ts";

const root = new URL("../", import.meta.url).pathname;

Deno.test("preSplit cuts split's argv branches and join's consumer", () => {
  assert.deepEqual(preSplit(["split", "-n", ":::", "a", "kit", "-x", ":::", "b", "k"]), {
    head: ["split", "-n"],
    argvParts: [":::", "a", "kit", "-x", ":::", "b", "k"],
    consumer: undefined,
  });
  assert.deepEqual(preSplit(["join", "--json", "--", "sh", "-c", "x", "--"]), {
    head: ["join", "--json"],
    argvParts: [],
    consumer: ["sh", "-c", "x", "--"],
  });
  assert.deepEqual(preSplit(["join"]), { head: ["join"], argvParts: [], consumer: undefined });
  // fanout's argv branches are cut as split's: `-x` there is the branch's, not fanout's.
  assert.deepEqual(preSplit(["fanout", "-b", "a=x", ":::", "b", "ls", "-x"]), {
    head: ["fanout", "-b", "a=x"],
    argvParts: [":::", "b", "ls", "-x"],
    consumer: undefined,
  });
  // Only split's and fanout's ::: and join's -- are special.
  assert.deepEqual(preSplit(["splits", ":::", "--"]), {
    head: ["splits", ":::", "--"],
    argvParts: [],
    consumer: undefined,
  });
});

Deno.test("runCli: a command's status, a CliError's code, usage errors are 2", async () => {
  const seen: string[] = [];
  const status = await runCli(["probe", "7"], (program, ctx) => {
    ctx.userErrors(program.command("probe"), "marsh probe")
      .argument("<N>")
      .action((n: string) => {
        seen.push(n);
        if (n === "fail") throw new CliError("marsh probe: failed on purpose", 42);
        ctx.setStatus(Number(n));
      });
  });
  assert.equal(status, 7);
  assert.deepEqual(seen, ["7"]);
  assert.equal(
    await runCli(["probe", "fail"], (program, ctx) => {
      ctx.userErrors(program.command("probe"), "marsh probe")
        .argument("<N>")
        .action(() => {
          throw new CliError("marsh probe: failed on purpose", 42);
        });
    }),
    42,
  );
  // Refused before any daemon is asked: no connection is attempted here.
  for (
    const args of [
      ["no-such-command"],
      ["split", "word"],
      ["split"],
      ["join", "word"],
      ["join", "--"],
      ["splits", "cancel"],
      ["split", "-b", "nolabel"],
    ]
  ) {
    assert.equal(await runCli(args), 2, args.join(" "));
  }
});

Deno.test("programFor: split and join build only themselves, anything else every command", () => {
  const ctx: CliContext = { io, signals, setStatus: () => {}, userErrors };
  const names = (args: string[]) =>
    programFor(args, ctx, registerHostCommands).program.commands.map((c) => c.name());
  assert.deepEqual(names(["split", "-n", ":::", "a", "kit", "true"]), ["split"]);
  assert.deepEqual(names(["join", "--json", "--", "sh"]), ["join"]);
  const all = names(["splits"]);
  for (const name of ["split", "join", "splits", "logs", "merge", "status", "kits", "engine"]) {
    assert.ok(all.includes(name), `${name} in ${all.join(" ")}`);
  }
  assert.deepEqual(names(["--help"]), all);
  assert.deepEqual(names(["help", "split"]), all);
  assert.deepEqual(programFor(["join", "--keep", "--", "x"], ctx).head, ["join", "--keep"]);
});

Deno.test({
  name: "split and join alone print the help and the errors the whole program prints",
  permissions: { run: true, read: true, write: true, env: true },
}, async () => {
  const home = await Deno.makeTempDir({ prefix: "marsh-cli-only-" });
  const run = async (args: string[]) => {
    const out = await new Deno.Command(`${root}marsh`, {
      args,
      env: { MARSH_HOME: home },
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).output();
    const dec = new TextDecoder();
    return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
  };
  try {
    for (const name of ["split", "join"]) {
      // `help NAME` builds every command; `NAME --help` only NAME.
      const whole = await run(["help", name]);
      assert.equal(whole.code, 0);
      assert.match(whole.stdout, new RegExp(`^Usage: marsh ${name} `));
      assert.deepEqual(await run([name, "--help"]), whole);
    }
    const bad = await run(["split", "--bogus"]);
    assert.equal(bad.code, 2);
    assert.equal(
      bad.stderr,
      "marsh split: unknown option '--bogus' (see `marsh split --help`)\n",
    );
    const badJoin = await run(["join", "--bogus"]);
    assert.equal(
      badJoin.stderr,
      "marsh join: unknown option '--bogus' (see `marsh join --help`)\n",
    );
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});

Deno.test("runCli: something else thrown is a bug and propagates", async () => {
  await assert.rejects(
    runCli(["boom"], (program) => {
      program.command("boom").action(() => {
        throw new RangeError("a bug");
      });
    }),
    RangeError,
  );
});

interface GraphModule {
  readonly specifier: string;
  readonly dependencies?: readonly {
    readonly code?: { readonly specifier: string };
    readonly isDynamic?: boolean;
  }[];
}

/**
 * What `entry` may load at run time: `deno info`'s graph without type-only
 * imports; with `staticOnly`, also without what `import()` loads on demand.
 */
async function runtimeGraph(entry: string, staticOnly = false): Promise<string[]> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["info", "--json", `--config=${root}deno.json`, `${root}${entry}`],
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.ok(out.success, new TextDecoder().decode(out.stderr));
  const info = JSON.parse(new TextDecoder().decode(out.stdout)) as {
    roots: string[];
    modules: GraphModule[];
  };
  const modules = new Map(info.modules.map((m) => [m.specifier, m]));
  const seen = new Set<string>();
  const visit = (specifier: string) => {
    if (seen.has(specifier)) return;
    seen.add(specifier);
    for (const dep of modules.get(specifier)?.dependencies ?? []) {
      if (dep.code && !(staticOnly && dep.isDynamic)) visit(dep.code.specifier);
    }
  };
  for (const r of info.roots) visit(r);
  return [...seen];
}

Deno.test({
  name: "the shared program and the job client load neither docker/ nor dockerode",
  permissions: { run: true, read: true, env: true },
}, async () => {
  for (const entry of ["client/cli_program.ts", "job/main.ts"]) {
    const graph = await runtimeGraph(entry);
    assert.ok(graph.includes(`file://${root}client/split_command.ts`), entry);
    for (const s of graph) {
      assert.ok(!/^file:\/\/.*\/(docker|daemon|worker)\//.test(s), `${entry} loads ${s}`);
      if (s.startsWith("npm:")) assert.match(s, /^npm:commander@/, `${entry} loads ${s}`);
    }
  }
  // The host CLI does reach docker/ (on demand): the check above is real.
  assert.ok((await runtimeGraph("main.ts")).includes(`file://${root}docker/flags.ts`));
});

Deno.test({
  name: "the host CLI loads no docker/ at start and never dockerode",
  permissions: { run: true, read: true, env: true },
}, async () => {
  // Every command pays for main.ts's static graph: the engine and Kit
  // modules are imported by the commands that use them, and the CLI never
  // talks to Docker itself (its children do), so no engine client at all.
  const loaded = await runtimeGraph("main.ts", true);
  assert.ok(loaded.includes(`file://${root}client/status_command.ts`));
  for (const s of loaded) {
    assert.ok(!/^file:\/\/.*\/(docker|journal|daemon|worker|job)\//.test(s), `main.ts loads ${s}`);
    if (s.startsWith("npm:")) assert.match(s, /^npm:commander@/, `main.ts loads ${s}`);
  }
  const reachable = await runtimeGraph("main.ts");
  assert.ok(reachable.includes(`file://${root}docker/kit_build.ts`));
  for (const s of reachable) {
    if (s.startsWith("npm:")) assert.match(s, /^npm:commander@/, `main.ts reaches ${s}`);
  }
});
