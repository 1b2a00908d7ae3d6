import assert from "node:assert/strict";
import { join } from "node:path";
import { unzlibSync } from "fflate";
import { blobId } from "./blob_id.ts";
import { looseObject } from "./loose_object.ts";
import { bytesEqual, git, gitOk, randomBytes, tempDir, utf8, writeLooseBlob } from "./_testing.ts";

Deno.test("looseObject() deflates the blob header and bytes", { permissions: {} }, () => {
  const object = looseObject(utf8("hello\n"));
  assert.equal(object.id, "ce013625030ba8dba906f756967f9e9ca394464a");
  assert.equal(object.path, "ce/013625030ba8dba906f756967f9e9ca394464a");
  assert.deepEqual(unzlibSync(object.compressed), utf8("blob 6\0hello\n"));
});

Deno.test("looseObject() writes objects git can read and fsck", {
  permissions: { read: true, write: true, run: ["git"], env: ["PATH"] },
}, async () => {
  await using dir = await tempDir();
  const repo = join(dir.path, "store.git");
  await gitOk(dir.path, ["init", "--quiet", "--bare", repo]);
  const samples = [
    new Uint8Array(),
    utf8("text\n"),
    new Uint8Array([0, 0xff, 0x0d, 0x0a]),
    randomBytes(200_000),
  ];
  for (const bytes of samples) {
    const id = await writeLooseBlob(join(repo, "objects"), bytes);
    assert.equal(id, blobId(bytes));
    const type = await gitOk(repo, ["cat-file", "-t", id]);
    assert.equal(new TextDecoder().decode(type), "blob\n");
    const content = await gitOk(repo, ["cat-file", "-p", id]);
    assert.ok(bytesEqual(content, bytes), "cat-file returns the same bytes");
  }
  const fsck = await git(repo, ["fsck", "--strict", "--no-dangling"]);
  assert.equal(fsck.code, 0, fsck.stderr);
  // An empty bare repo has no HEAD commit; fsck says so as a "notice".
  const complaints = fsck.stderr.split("\n").filter((l) => l !== "" && !l.startsWith("notice:"));
  assert.deepEqual(complaints, []);
});
