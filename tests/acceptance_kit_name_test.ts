/**
 * A Kit found by the name it was built as (issue 11): `marsh kit build
 * NAME --from-host` also tags `marsh-kit/NAME:latest` and prints the next
 * command, `marsh kits add NAME --image NAME`, which registers that build;
 * when `NAME:latest` is another image too, `kits add` refuses and says how
 * to name one. Through the real CLI and daemon, against the real test
 * engine ({@linkcode ensureEngine}: a missing engine fails these tests).
 */

import assert from "node:assert/strict";
import { PERMISSIONS as permissions, Sandbox, show } from "./_acceptance.ts";
import {
  ensureEngine,
  fixtureKit,
  inspectImage,
  removeImage,
  tagImage,
  withLock,
} from "./_engine.ts";
import { ensureBusybox } from "./_setup.ts";

/** The Kit these tests build: busybox only, so the same bytes every time (nothing piles up). */
const NAME = "probe-img";
const LATEST = `marsh-kit/${NAME}:latest`;

interface Built {
  sb: Sandbox;
  socket: string;
  id: string;
  stderr: string;
}

/** A sandbox on the test engine, where `marsh kit build probe-img --from-host` has just run. */
async function built(): Promise<Built> {
  const socket = await ensureEngine();
  await ensureBusybox();
  const sb = await Sandbox.create({ env: { DOCKER_HOST: `unix://${socket}` } });
  // Under the engine lock: builds of one Kit must not interleave (tests/_engine.ts).
  const r = await withLock(() => sb.marsh(["kit", "build", NAME, "--from-host"]));
  assert.equal(r.code, 0, show(r));
  assert.match(r.stdout, /^sha256:[0-9a-f]{64}\n$/);
  return { sb, socket, id: r.stdout.trim(), stderr: r.stderr };
}

Deno.test({
  name: "kit build tags NAME:latest and prints the next command, which registers that build",
  permissions,
}, async () => {
  const { sb, socket, id, stderr } = await built();
  await using _ = sb;
  assert.match(
    stderr,
    new RegExp(
      `^marsh kit build: (built marsh-kit/${NAME}:[0-9a-f]{12} \\(\\d+\\.\\d MB\\)|` +
        `marsh-kit/${NAME}:[0-9a-f]{12} is up to date), tagged ${LATEST}\\n` +
        `next: marsh kits add ${NAME} --image ${NAME}\\n$`,
    ),
  );
  assert.equal((await inspectImage(socket, LATEST))?.id, id);

  const next = /^next: marsh (.*)$/m.exec(stderr)![1]!.split(" ");
  const add = await sb.marsh(next);
  assert.equal(add.code, 0, show(add));
  assert.equal(
    add.stdout,
    `kit ${NAME} registered: ${LATEST} (${
      id.slice(0, 19)
    }), network=none, wall=3600s, home ${sb.home}/kits/${NAME}/home\n`,
  );

  // The issue's own commands: another Kit name, the build's name as --image.
  const probe = await sb.marsh(["kits", "add", "probe", "--image", NAME]);
  assert.equal(probe.code, 0, show(probe));
  const ls = await sb.marsh(["kits", "ls", "--json"]);
  assert.equal(ls.code, 0, show(ls));
  const listed =
    (JSON.parse(ls.stdout) as { kits: { name: string; image: string; image_id: string }[] })
      .kits.map((k) => [k.name, k.image, k.image_id]);
  assert.deepEqual(listed, [["probe", LATEST, id], [NAME, LATEST, id]]);
});

Deno.test({
  name: "kits add --image NAME refuses when NAME:latest and the Kit build NAME are two images",
  permissions,
}, async () => {
  const { sb, socket, id } = await built();
  await using _ = sb;
  const fixture = await fixtureKit(socket);
  assert.notEqual(fixture.id, id);
  await tagImage(socket, fixture.id, `${NAME}:latest`);
  try {
    const r = await sb.marsh(["kits", "add", "probe", "--image", NAME]);
    assert.equal(r.code, 2, show(r));
    assert.equal(r.stdout, "");
    assert.equal(
      r.stderr,
      `marsh kits add: --image "${NAME}" names two images: ${NAME}:latest and the Kit build ` +
        `${LATEST}; give one in full (--image ${LATEST}, or --image ${NAME}:latest)\n`,
    );

    // Named in full, each is found.
    for (const [image, want] of [[LATEST, id], [`${NAME}:latest`, fixture.id]] as const) {
      const add = await sb.marsh(["kits", "add", "probe", "--replace", "--image", image]);
      assert.equal(add.code, 0, show(add));
      assert.match(add.stdout, new RegExp(`^kit probe \\S+: ${image} \\(${want.slice(0, 19)}\\)`));
    }
  } finally {
    assert.equal(await removeImage(socket, `${NAME}:latest`), true);
  }
  assert.equal(await inspectImage(socket, `${NAME}:latest`), null, "only the tag was removed");
  assert.equal((await inspectImage(socket, fixture.ref))?.id, fixture.id);
});

Deno.test({
  name: "kits add --image NAME with neither NAME nor a Kit build NAME: the message names both",
  permissions,
}, async () => {
  const socket = await ensureEngine();
  const sb = await Sandbox.create({ env: { DOCKER_HOST: `unix://${socket}` } });
  await using _ = sb;
  const r = await sb.marsh(["kits", "add", "nope", "--image", "never-built-kit"]);
  assert.equal(r.code, 2, show(r));
  assert.match(
    r.stderr,
    /^marsh kits add: no image "never-built-kit" \(nor a Kit build marsh-kit\/never-built-kit:latest\) in the engine at \S+; build one with `marsh kit build NAME --from-host`.*; nothing was registered\n$/,
  );
  const ls = await sb.marsh(["kits", "ls", "--json"]);
  assert.equal(ls.stdout, '{"kits":[]}\n');
});
