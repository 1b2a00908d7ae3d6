/** The keyed environment digest: HMAC-SHA256 of `NAME=VALUE`, checked against openssl. */

import assert from "node:assert/strict";
import { ENV_KEY_BYTES, envDigest, envDigestMatches, newEnvKey } from "./job_env_digest.ts";

const KEY = new TextEncoder().encode("marsh-test-key".padEnd(ENV_KEY_BYTES, "\0"));

Deno.test({
  name: "env digest: HMAC-SHA256 of NAME=VALUE, as openssl computes it",
  permissions: { run: ["openssl"] },
}, async () => {
  const hexKey = Array.from(KEY, (b) => b.toString(16).padStart(2, "0")).join("");
  for (const [name, value] of [["FOO", "bar"], ["EMPTY", ""], ["UTF", "né=é"]] as const) {
    const out = await new Deno.Command("openssl", {
      args: ["dgst", "-sha256", "-mac", "HMAC", "-macopt", `hexkey:${hexKey}`],
      stdin: "piped",
      stdout: "piped",
    }).spawn();
    const w = out.stdin.getWriter();
    await w.write(new TextEncoder().encode(`${name}=${value}`));
    await w.close();
    const text = new TextDecoder().decode((await out.output()).stdout);
    assert.equal(envDigest(KEY, name, value), text.trim().split(" ").at(-1));
  }
  // HMAC pads a short key with zeros, so this is also `openssl dgst -sha256 -hmac marsh-test-key`.
  assert.equal(
    envDigest(KEY, "FOO", "bar"),
    "2fb30e44af96cc91ed0f8ac6213b6771d9c623611f9cbe2c68267264e6a06b18",
  );
});

Deno.test({
  name: "env digest: matches only its own NAME=VALUE under its own key",
  permissions: {},
}, () => {
  const d = envDigest(KEY, "FOO", "bar");
  assert.ok(envDigestMatches(KEY, "FOO", "bar", d));
  assert.ok(!envDigestMatches(KEY, "FOO", "baz", d));
  assert.ok(!envDigestMatches(KEY, "FOOb", "ar", d), "the name is part of what is digested");
  assert.ok(!envDigestMatches(newEnvKey(), "FOO", "bar", d), "another daemon's key");
  for (const bad of ["", "00", d.toUpperCase(), `${d}0`, "g".repeat(64)]) {
    assert.ok(!envDigestMatches(KEY, "FOO", "bar", bad), bad);
  }
  const a = newEnvKey();
  assert.equal(a.length, ENV_KEY_BYTES);
  assert.notDeepEqual(a, newEnvKey());
  assert.throws(() => envDigest(new Uint8Array(16), "A", "b"), /32 bytes, not 16/);
});
