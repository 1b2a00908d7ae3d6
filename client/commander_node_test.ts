/**
 * The bundled CLI's stand-ins for commander's Node imports, each held
 * against Node's own module (Deno's compatibility layer) on what commander
 * does with it; and the bundler's rewrite of commander's import lines.
 */
import assert from "node:assert/strict";
import { EventEmitter as NodeEmitter } from "node:events";
import nodeProcess from "node:process";
import { stripVTControlCharacters as nodeStrip } from "node:util";
import fc from "fast-check";
import {
  childProcess,
  EventEmitter,
  fs,
  path,
  process,
  stripVTControlCharacters,
} from "./commander_node.ts";
import { useCommanderNode } from "./cli_bundle.ts";

/** What commander does with an emitter: listeners per event, `this`, the count, a listener added while emitting. */
function script(make: () => NodeEmitter | EventEmitter): unknown[] {
  const log: unknown[] = [];
  const e = make() as EventEmitter;
  log.push(e.emit("option:x", 1), e.listenerCount("option:x"));
  e.on("option:x", function (this: unknown, ...args: unknown[]) {
    log.push(["first", this === e, args]);
    e.on("option:x", () => log.push("added while emitting"));
  });
  e.on("option:x", (v: unknown) => log.push(["second", v]));
  log.push(e.on("other", () => log.push("other")) === e);
  log.push(e.emit("option:x", "a", "b"), e.listenerCount("option:x"));
  log.push(e.emit("option:x"), e.listenerCount("option:x"), e.listenerCount("none"));
  try {
    e.emit("error", new Error("boom"));
  } catch (error) {
    log.push(["threw", (error as Error).message]);
  }
  return log;
}

Deno.test("EventEmitter: on, emit and listenerCount as node:events has them", () => {
  assert.deepEqual(script(() => new EventEmitter()), script(() => new NodeEmitter()));
  // A subclass, as commander's Command is.
  class Sub extends EventEmitter {}
  class NodeSub extends NodeEmitter {}
  assert.deepEqual(script(() => new Sub()), script(() => new NodeSub()));
});

Deno.test("stripVTControlCharacters: node:util's result on escapes, partial escapes and text", () => {
  const cases = [
    "plain",
    "\u001b[31mred\u001b[0m",
    "\u001b[1;38;5;245mbold\u001b[22m",
    "\u009b4mu\u009b0m",
    "\u001b]8;;https://example.invalid\u0007link\u001b]8;;\u0007",
    "\u001b]0;title\u001b\\after",
    "\u001b[",
    "\u001bc",
    "a\u001b[2Kb\u001b[10;20Hc",
  ];
  for (const s of cases) assert.equal(stripVTControlCharacters(s), nodeStrip(s), JSON.stringify(s));
  const pieces = fc.constantFrom(
    "\u001b",
    "\u009b",
    "[",
    "]",
    ";",
    "0",
    "12",
    "m",
    "K",
    "H",
    "\u0007",
    "\\",
    "a",
    " ",
    "é",
    "#",
    "?",
  );
  fc.assert(
    fc.property(fc.array(pieces, { maxLength: 24 }), (parts) => {
      const s = parts.join("");
      assert.equal(stripVTControlCharacters(s), nodeStrip(s), JSON.stringify(s));
    }),
    { numRuns: 2000 },
  );
  assert.throws(() => stripVTControlCharacters(3 as unknown as string), TypeError);
});

Deno.test("process: env, the streams' terminal and width, exitCode and argv as node:process has them", () => {
  const key = "MARSH_COMMANDER_NODE_TEST";
  Deno.env.delete(key);
  assert.equal(key in process.env, key in nodeProcess.env);
  assert.equal(process.env[key], nodeProcess.env[key]);
  Deno.env.set(key, "1");
  try {
    assert.equal(key in process.env, true);
    assert.equal(process.env[key], nodeProcess.env[key]);
    assert.ok(Object.keys(process.env).includes(key));
  } finally {
    Deno.env.delete(key);
  }
  for (const s of ["stdout", "stderr"] as const) {
    assert.equal(process[s].isTTY, nodeProcess[s].isTTY, s);
    assert.equal(process[s].columns, nodeProcess[s].columns, s);
  }
  assert.equal(process.exitCode, undefined);
  assert.equal(process.platform, nodeProcess.platform);
  assert.deepEqual(process.execArgv, []);
  assert.equal(process.versions.electron, undefined);
  assert.deepEqual(process.argv.slice(2), Deno.args);
});

Deno.test("what only executable subcommands use throws, naming it", () => {
  for (const [name, m] of [["child_process", childProcess], ["fs", fs], ["path", path]] as const) {
    assert.throws(() => m.spawn, new RegExp(`no executable subcommands \\(node:${name}\\)`));
  }
  assert.throws(() => process.on(), /no executable subcommands \(process\.on\)/);
});

Deno.test("the bundler points commander's Node imports, and only commander's, at commander_node.js", () => {
  const bundle = [
    "// ../../../root/.cache/deno/npm/registry.npmjs.org/commander/15.1.0/lib/command.js",
    'import { EventEmitter } from "node:events";',
    'import childProcess from "node:child_process";',
    'import process from "node:process";',
    'import { stripVTControlCharacters as stripVTControlCharacters2 } from "node:util";',
    'import { inspect } from "node:util";',
    'import os from "node:os";',
    "var x = 1;",
    "// client/thing.ts",
    'import process2 from "node:process";',
    'import { EventEmitter as EventEmitter2 } from "node:events";',
  ].join("\n");
  assert.equal(
    useCommanderNode(bundle),
    [
      "// ../../../root/.cache/deno/npm/registry.npmjs.org/commander/15.1.0/lib/command.js",
      'import { EventEmitter as EventEmitter } from "./client/commander_node.js";',
      'import { childProcess as childProcess } from "./client/commander_node.js";',
      'import { process as process } from "./client/commander_node.js";',
      'import { stripVTControlCharacters as stripVTControlCharacters2 } from "./client/commander_node.js";',
      // Not something commander_node.ts stands in for: Node's stays.
      'import { inspect } from "node:util";',
      'import os from "node:os";',
      "var x = 1;",
      "// client/thing.ts",
      'import process2 from "node:process";',
      'import { EventEmitter as EventEmitter2 } from "node:events";',
    ].join("\n"),
  );
});
