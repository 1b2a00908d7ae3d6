import assert from "node:assert/strict";
import { sandbox } from "../_testing.ts";
import { Dir } from "../fd/dir.ts";
import {
  decodeLog,
  encodeRecord,
  IntentLog,
  LOG_FILE,
  LogCorruptError,
  type LogRecord,
  readLog,
} from "./intent_log.ts";

const PERMS = { read: true, write: true, ffi: true, env: true } as const;
const enc = new TextEncoder();

const RECORDS: LogRecord[] = [
  { t: "begin", v: 1, id: "r1", scope: "git", gitModes: true, ops: [] },
  { t: "ready", prior: [{ kind: "file", perm: 0o644, blob: "a".repeat(40) }] },
  { t: "step", kind: "backup", n: 0 },
  { t: "commit" },
];

Deno.test("intent log: records round-trip; a torn or damaged last line is dropped", () => {
  const text = RECORDS.map(encodeRecord).join("");
  assert.deepEqual(decodeLog(enc.encode(text), "log").records, RECORDS);
  // Torn mid-append: no newline yet.
  const torn = text + encodeRecord({ t: "done" }).slice(0, 20);
  const d = decodeLog(enc.encode(torn), "log");
  assert.deepEqual(d.records, RECORDS);
  assert.equal(d.validBytes, enc.encode(text).length);
  // A last line whose bytes did not all reach the disk: the checksum says so.
  const bad = text + encodeRecord({ t: "done" }).replace("done", "done!");
  assert.deepEqual(decodeLog(enc.encode(bad), "log").records, RECORDS);
});

Deno.test("intent log: a damaged line before the last refuses, naming the line", () => {
  const lines = RECORDS.map(encodeRecord);
  lines[1] = lines[1]!.replace('"ready"', '"reddy"');
  assert.throws(() => decodeLog(enc.encode(lines.join("")), "/p/log"), (e: unknown) => {
    assert.ok(e instanceof LogCorruptError);
    assert.match(e.message, /resolution log \/p\/log is damaged at line 2/);
    return true;
  });
});

Deno.test(
  { name: "intent log: appending after a torn tail cuts it off first", permissions: PERMS },
  () => {
    using sb = sandbox("marsh-log-");
    using dir = Dir.openAbsolute(sb.root);
    {
      using log = IntentLog.open(dir);
      log.append(RECORDS[0]!);
    }
    // A crash mid-append leaves half a record.
    Deno.writeTextFileSync(`${sb.root}/${LOG_FILE}`, encodeRecord(RECORDS[1]!).slice(0, 30), {
      append: true,
    });
    {
      using log = IntentLog.open(dir);
      log.append(RECORDS[2]!);
    }
    assert.deepEqual(readLog(dir), [RECORDS[0], RECORDS[2]]);
    assert.equal(
      Deno.readTextFileSync(`${sb.root}/${LOG_FILE}`),
      encodeRecord(RECORDS[0]!) + encodeRecord(RECORDS[2]!),
    );
  },
);
