import assert from "node:assert/strict";
import { blobId, ZERO_ID } from "./blob_id.ts";
import { gitOk, randomBytes, tempDir, utf8 } from "./_testing.ts";

Deno.test("blobId() matches known Git blob ids", { permissions: {} }, () => {
  assert.equal(blobId(new Uint8Array()), "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391");
  assert.equal(blobId(utf8("hello\n")), "ce013625030ba8dba906f756967f9e9ca394464a");
  assert.equal(ZERO_ID, "0000000000000000000000000000000000000000");
});

Deno.test("blobId() agrees with git hash-object", {
  permissions: { read: true, write: true, run: ["git"], env: ["PATH"] },
}, async () => {
  await using dir = await tempDir();
  const samples = [
    utf8("a\r\nb"),
    new Uint8Array([0, 1, 2, 255, 0x80, 10]),
    randomBytes(70_000),
  ];
  for (const bytes of samples) {
    const out = await gitOk(dir.path, ["hash-object", "--stdin"], { stdin: bytes });
    assert.equal(blobId(bytes), new TextDecoder().decode(out).trim());
  }
});
