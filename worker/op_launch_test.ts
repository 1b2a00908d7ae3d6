/**
 * A checkpoint operation's launch (docs/checkpoints.md "An operation")
 * through the real worker and supervisor: argv exec'd as it is, stdio on
 * real FIFOs (`mkfifo`) opened by a stand-in for the CLI, drained, cancelled
 * and ended as a shell branch is.
 */
import assert from "node:assert/strict";
import {
  MAX_ARGV_BYTES,
  type ShellWorkerEvent as WorkerEvent,
  type StdioFifos,
} from "../protocol/worker.ts";
import { BranchRunner } from "./runner.ts";
import {
  type CliOptions,
  makeFifos,
  releaseFifos,
  type Sandbox,
  sandbox,
  withCli,
  WorkerClient,
} from "./_testing.ts";

const perms: Deno.PermissionOptions = { run: true, read: true, write: true, env: true };
const enc = new TextEncoder();
const dec = new TextDecoder();

let serial = 0;
/** Attempt ids are global on a machine (cgroup names): make each one unique. */
function id(prefix: string): string {
  return `${prefix}-${Deno.pid}-${++serial}-${crypto.randomUUID().slice(0, 8)}`;
}

interface OpRun {
  readonly events: WorkerEvent[];
  readonly stdout: Uint8Array;
  readonly stderr: Uint8Array;
  readonly written: number;
}

/** Launches `argv` with FIFOs through `w`, plays the CLI with `input`, and waits for the attempt's end. */
async function runOp(
  sb: Sandbox,
  w: WorkerClient,
  argv: readonly string[],
  input: Uint8Array = new Uint8Array(),
  opts: CliOptions = {},
): Promise<OpRun> {
  const attempt = id("op");
  const fifos = makeFifos(sb.control, attempt);
  await w.send({
    v: 1,
    t: "launch",
    attempt,
    argv,
    cwd: sb.fork,
    env: { PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin" },
    stdio: fifos,
  });
  return await withCli(w, attempt, fifos, input, opts);
}

function kinds(events: WorkerEvent[]): string[] {
  return events.map((e) => e.t);
}

function exited(events: WorkerEvent[]): { code: number | null; signal: string | null } {
  const e = events.find((e) => e.t === "exited");
  assert.ok(e?.t === "exited", JSON.stringify(events));
  return { code: e.code, signal: e.signal };
}

function settled(events: WorkerEvent[]): [number, number] {
  const e = events.at(-1);
  assert.ok(e?.t === "settled", JSON.stringify(events));
  return [e.stdoutBytes, e.stderrBytes];
}

Deno.test({
  name: "an operation's argv reaches the program byte for byte: no shell, no quoting",
  permissions: perms,
}, async () => {
  using sb = sandbox();
  await using w = WorkerClient.start(sb.control);
  const marker = `${sb.top}/pwned`;
  const args = [
    "a b",
    "  lead and trail  ",
    `'single' "double" \\back`,
    "line1\nline2\n",
    `$(touch ${marker})`,
    `\`touch ${marker}\``,
    "; touch x; |&",
    "",
    "$HOME *.txt ~",
    "€ \u{1F600} \t",
  ];
  const script = 'print join("\\0", @ARGV); exit 3';
  const r = await runOp(sb, w, ["perl", "-e", script, ...args]);
  assert.deepEqual(kinds(r.events), ["launched", "exited", "settled"], dec.decode(r.stderr));
  assert.deepEqual(exited(r.events), { code: 3, signal: null });
  assert.deepEqual(dec.decode(r.stdout).split("\0"), args);
  assert.throws(() => Deno.lstatSync(marker), Deno.errors.NotFound);
  assert.throws(() => Deno.lstatSync(`${sb.fork}/x`), Deno.errors.NotFound);
  assert.deepEqual(settled(r.events), [r.stdout.length, 0]);
});

Deno.test({
  name: "an operation's argv at MAX_ARGV_BYTES (as JSON) runs whole; one byte more is refused",
  permissions: perms,
}, async () => {
  using sb = sandbox();
  await using w = WorkerClient.start(sb.control);
  // Elements under the kernel's 128 KiB per argument, the whole at the bound.
  const head = ["perl", "-e", 'print join("\\0", @ARGV)'];
  const json = (a: string[]) => enc.encode(JSON.stringify(a)).length;
  const parts = ["x".repeat(60_000), "y".repeat(60_000), "z".repeat(60_000), ""];
  parts[3] = "w".repeat(MAX_ARGV_BYTES - json([...head, ...parts]));
  const argv = [...head, ...parts];
  assert.equal(json(argv), MAX_ARGV_BYTES);
  const r = await runOp(sb, w, argv);
  assert.deepEqual(exited(r.events), { code: 0, signal: null }, dec.decode(r.stderr));
  assert.deepEqual(dec.decode(r.stdout).split("\0"), parts);

  const attempt = id("big");
  const fifos = makeFifos(sb.control, attempt);
  await w.send({
    v: 1,
    t: "launch",
    attempt,
    argv: [...argv.slice(0, -1), `${parts[3]}w`],
    cwd: sb.fork,
    env: {},
    stdio: fifos,
  });
  // A malformed frame names no attempt: nothing was launched, no FIFO opened.
  const e = await w.wait((e) => e.t === "error");
  assert.match(
    e.event.t === "error" ? e.event.message : "",
    new RegExp(
      `the command is too long \\(${MAX_ARGV_BYTES + 1} bytes; at most ${MAX_ARGV_BYTES}\\)`,
    ),
  );
  assert.equal(
    w.events.filter((t) => "attempt" in t.event && t.event.attempt === attempt).length,
    0,
  );
});

Deno.test({
  name: "stdin reaches the program and its stdout and stderr reach the readers, binary, 3 MiB each",
  permissions: perms,
}, async () => {
  using sb = sandbox();
  await using w = WorkerClient.start(sb.control);
  const input = new Uint8Array(3 * 1024 * 1024 + 17);
  for (let off = 0; off < input.length; off += 65536) {
    crypto.getRandomValues(input.subarray(off, Math.min(off + 65536, input.length)));
  }
  // tee copies stdin to stdout and to stderr.
  const r = await runOp(sb, w, ["tee", "/dev/stderr"], input);
  assert.deepEqual(exited(r.events), { code: 0, signal: null });
  assert.equal(r.written, input.length);
  assert.equal(r.stdout.length, input.length);
  assert.ok(r.stdout.every((b, i) => b === input[i]), "stdout differs from stdin");
  assert.ok(r.stderr.every((b, i) => b === input[i]) && r.stderr.length === input.length);
  assert.deepEqual(settled(r.events), [input.length, input.length]);
  assert.ok(!r.events.some((e) => e.t === "output-limit"));
});

Deno.test({
  name: "no output limit: 40 MB on stdout all reach the reader (a branch keeps 16 MiB)",
  permissions: perms,
}, async () => {
  using sb = sandbox();
  await using w = WorkerClient.start(sb.control);
  const r = await runOp(sb, w, ["head", "-c", "40000000", "/dev/urandom"]);
  assert.deepEqual(exited(r.events), { code: 0, signal: null });
  assert.equal(r.stdout.length, 40_000_000);
  assert.deepEqual(settled(r.events), [40_000_000, 0]);
  assert.ok(!r.events.some((e) => e.t === "output-limit"));
});

Deno.test({
  name: "an operation's exit status and its signal; a command not found is 127, not runnable 126",
  permissions: perms,
}, async () => {
  using sb = sandbox();
  await using w = WorkerClient.start(sb.control);
  const killed = await runOp(sb, w, ["sh", "-c", "echo before; kill -TERM $$; echo after"]);
  assert.deepEqual(exited(killed.events), { code: null, signal: "SIGTERM" });
  assert.equal(dec.decode(killed.stdout), "before\n");
  const missing = await runOp(sb, w, ["no-such-command-marsh"]);
  assert.deepEqual(exited(missing.events), { code: 127, signal: null });
  assert.equal(
    dec.decode(missing.stderr),
    "marsh: cannot run no-such-command-marsh: No such file or directory\n",
  );
  Deno.writeTextFileSync(`${sb.fork}/not-runnable`, "#!/bin/sh\n", { mode: 0o644 });
  const refused = await runOp(sb, w, [`${sb.fork}/not-runnable`]);
  assert.deepEqual(exited(refused.events), { code: 126, signal: null });
  assert.match(dec.decode(refused.stderr), /not-runnable: Permission denied\n$/);
  // stdin at its end when the CLI closes it: `cat` ends by itself.
  const cat = await runOp(sb, w, ["sh", "-c", "cat; echo end >&2"], enc.encode("in\n"));
  assert.equal(dec.decode(cat.stdout), "in\n");
  assert.equal(dec.decode(cat.stderr), "end\n");
});

for (const mech of ["cgroup", "subreaper"] as const) {
  Deno.test({
    name:
      `${mech}: a background child that outlives the program delays settled, and its output arrives`,
    permissions: perms,
  }, async () => {
    using sb = sandbox();
    await using w = WorkerClient.start(sb.control, { forceSubreaper: mech === "subreaper" });
    const r = await runOp(sb, w, [
      "sh",
      "-c",
      "(sleep 1.5; echo late; echo late-err >&2) & echo early",
    ]);
    assert.deepEqual(exited(r.events), { code: 0, signal: null });
    assert.equal(dec.decode(r.stdout), "early\nlate\n");
    assert.equal(dec.decode(r.stderr), "late-err\n");
    const launched = r.events.find((e) => e.t === "launched");
    assert.ok(
      launched?.t === "launched" && (mech === "subreaper") === (launched.mechanism === "subreaper"),
    );
    const at = w.events.filter((t) => "attempt" in t.event && t.event.attempt === launched.attempt);
    const tExited = at.find((t) => t.event.t === "exited")!.at;
    const tSettled = at.find((t) => t.event.t === "settled")!.at;
    assert.ok(tSettled - tExited >= 1200, `settled ${tSettled - tExited} ms after exited`);
    assert.ok(at.some((t) => t.event.t === "lingering"), "the sleeper was named");
  });
}

Deno.test({
  name: "a reader that closes early loses the rest of its stream; the program runs on to its end",
  permissions: perms,
}, async () => {
  using sb = sandbox();
  await using w = WorkerClient.start(sb.control);
  const r = await runOp(
    sb,
    w,
    ["sh", "-c", "head -c 20000000 /dev/zero; echo wrote-all >&2; echo done > ran; exit 4"],
    new Uint8Array(),
    { stdoutUpTo: 100_000 },
  );
  assert.deepEqual(exited(r.events), { code: 4, signal: null }, dec.decode(r.stderr));
  assert.equal(r.stdout.length, 100_000);
  assert.equal(dec.decode(r.stderr), "wrote-all\n");
  assert.equal(Deno.readTextFileSync(`${sb.fork}/ran`), "done\n");
  const [out] = settled(r.events);
  assert.ok(out >= 100_000 && out < 20_000_000, `stdout delivered: ${out}`);
});

Deno.test({
  name: "the CLI may open the FIFOs one by one in any order, and late",
  permissions: perms,
}, async () => {
  using sb = sandbox();
  await using w = WorkerClient.start(sb.control);
  const orders = [
    ["stdin", "stdout", "stderr"],
    ["stderr", "stdout", "stdin"],
    ["stdout", "stdin", "stderr"],
  ] as const;
  for (const order of orders) {
    const r = await runOp(sb, w, ["sh", "-c", "cat; echo e >&2"], enc.encode("x"), {
      order,
      delayMs: 300,
    });
    assert.deepEqual(exited(r.events), { code: 0, signal: null }, order.join());
    assert.equal(dec.decode(r.stdout), "x");
    assert.equal(dec.decode(r.stderr), "e\n");
  }
});

Deno.test({
  name:
    "cancel: SIGINT to the operation, then SIGKILL; a reader that never reads does not hold settled",
  permissions: perms,
}, async () => {
  using sb = sandbox();
  await using w = WorkerClient.start(sb.control);
  const attempt = id("cancel");
  const fifos = makeFifos(sb.control, attempt);
  await w.send({
    v: 1,
    t: "launch",
    attempt,
    argv: ["sh", "-c", "trap '' INT; head -c 10000000 /dev/zero; sleep 100"],
    cwd: sb.fork,
    env: { PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin" },
    stdio: fifos,
  });
  // Opened, never read: the program blocks on a full pipe.
  const opening = Promise.all([
    Deno.open(fifos.stdin, { write: true }),
    Deno.open(fifos.stdout, { read: true }),
    Deno.open(fifos.stderr, { read: true }),
  ]);
  const first = await w.wait((e) =>
    "attempt" in e && e.attempt === attempt && (e.t === "launched" || e.t === "error")
  );
  if (first.event.t !== "launched") await releaseFifos(fifos);
  const [i, o, e] = await opening;
  try {
    assert.equal(first.event.t, "launched", JSON.stringify(first.event));
    await new Promise((r) => setTimeout(r, 300));
    await w.send({ v: 1, t: "cancel", attempt, graceMs: 500 });
    const events = (await w.finish(attempt)).map((t) => t.event);
    assert.deepEqual(exited(events), { code: null, signal: "SIGKILL" });
    assert.equal(events.at(-1)?.t, "settled");
  } finally {
    for (const f of [i, o, e]) f.close();
  }
});

/** Events of one attempt run in this process with a short FIFO wait. */
async function inProcess(
  sb: Sandbox,
  argv: string[],
  fifos: StdioFifos,
  waitMs: number,
): Promise<WorkerEvent[]> {
  const events: WorkerEvent[] = [];
  const runner = new BranchRunner({
    emit: (e) => events.push(e as WorkerEvent),
    fifoOpenMs: waitMs,
  });
  const attempt = id("peer");
  runner.launch({
    v: 1,
    t: "launch",
    attempt,
    argv,
    cwd: sb.fork,
    env: { PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin" },
    stdio: fifos,
  });
  await runner.shutdown(0);
  return events;
}

Deno.test({
  name: "a FIFO peer that never opens fails the launch after the wait; nothing ran",
  permissions: perms,
}, async () => {
  using sb = sandbox();
  const t0 = performance.now();
  const none = await inProcess(sb, ["touch", `${sb.fork}/ran`], makeFifos(sb.control, "a"), 400);
  const took = performance.now() - t0;
  assert.deepEqual(kinds(none), ["error"]);
  assert.match(
    none[0]?.t === "error" ? none[0].message : "",
    new RegExp(
      `^nothing opened the stderr FIFO ${sb.control}/io/a/err for reading within 0.4 s: ` +
        "the command that made it is gone or stuck; nothing was run$",
    ),
  );
  assert.ok(took >= 400 && took < 5000, `failed after ${took} ms`);
  // stdout open, stderr never.
  const fifos = makeFifos(sb.control, "b");
  const reader = Deno.open(fifos.stdout, { read: true });
  const one = await inProcess(sb, ["touch", `${sb.fork}/ran`], fifos, 400);
  (await reader).close();
  assert.match(one[0]?.t === "error" ? one[0].message : "", /the stderr FIFO .*\/io\/b\/err/);
  assert.throws(() => Deno.lstatSync(`${sb.fork}/ran`), Deno.errors.NotFound);
  // Not a FIFO: refused at once.
  Deno.mkdirSync(`${sb.control}/io/c`);
  for (const n of ["in", "out", "err"]) Deno.writeTextFileSync(`${sb.control}/io/c/${n}`, "");
  const file = await inProcess(sb, ["true"], {
    stdin: `${sb.control}/io/c/in`,
    stdout: `${sb.control}/io/c/out`,
    stderr: `${sb.control}/io/c/err`,
  }, 400);
  assert.match(file[0]?.t === "error" ? file[0].message : "", /io\/c\/in is not a FIFO/);
});

Deno.test({
  name:
    "a CLI gone after opening stdout and stderr only: the program runs to its end, or is cancelled",
  permissions: perms,
}, async () => {
  using sb = sandbox();
  await using w = WorkerClient.start(sb.control);
  const launch = async (argv: string[]) => {
    const attempt = id("gone");
    const fifos = makeFifos(sb.control, attempt);
    await w.send({
      v: 1,
      t: "launch",
      attempt,
      argv,
      cwd: sb.fork,
      env: { PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin" },
      stdio: fifos,
    });
    const [o, e] = await Promise.all([
      Deno.open(fifos.stdout, { read: true }),
      Deno.open(fifos.stderr, { read: true }),
    ]);
    o.close();
    e.close();
    return attempt;
  };
  // Writes to the gone readers, never reads stdin.
  const a = await launch(["sh", "-c", "seq 100000; echo err >&2; echo done > ran; exit 6"]);
  const ended = (await w.finish(a)).map((t) => t.event);
  assert.deepEqual(exited(ended), { code: 6, signal: null });
  assert.equal(Deno.readTextFileSync(`${sb.fork}/ran`), "done\n");
  // What reached the FIFO before its reader closed, at most its capacity; `seq 100000` is 588,895 bytes.
  assert.ok(settled(ended)[0] <= 65536, JSON.stringify(ended.at(-1)));
  // Reads stdin, which nobody will ever write or close: a cancel ends it.
  const b = await launch(["cat"]);
  await w.wait((e) => e.t === "launched" && e.attempt === b);
  await new Promise((r) => setTimeout(r, 200));
  assert.ok(
    !w.events.some((t) => "attempt" in t.event && t.event.attempt === b && t.event.t === "exited"),
  );
  await w.send({ v: 1, t: "cancel", attempt: b, graceMs: 1000 });
  const cancelled = (await w.finish(b)).map((t) => t.event);
  assert.deepEqual(exited(cancelled), { code: null, signal: "SIGINT" });
  assert.equal(cancelled.at(-1)?.t, "settled");
});
