/**
 * The tests' set-up (`tests/_setup.ts`): a package the tests need is
 * installed with apt when missing, and when it cannot be, the error says
 * what to run.
 *
 * A boundary these tests cannot reach for real: a machine without
 * busybox. Uninstalling `busybox-static` here would break every other
 * test run on this shared machine, so each test injects the "is it
 * installed" check instead; the apt-get that then runs is the real one
 * (installing an installed package is a no-op for apt), or a real program
 * that fails, or a path where there is none.
 */

import assert from "node:assert/strict";
import { findBusybox } from "../docker/rootfs.ts";
import { type AptPackage, BUSYBOX, ensureAptPackage, ensureBusybox } from "./_setup.ts";

/** `BUSYBOX`, with an "is it installed" check that answers `answers` in turn, then the last. */
function scripted(answers: readonly boolean[]): { pkg: AptPackage; asked: () => number } {
  let n = 0;
  return {
    pkg: {
      ...BUSYBOX,
      installed: () => Promise.resolve(answers[Math.min(n++, answers.length - 1)]!),
    },
    asked: () => n,
  };
}

async function withLockFile(body: (lock: string) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "marsh-apt-" });
  try {
    await body(`${dir}/apt.lock`);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

const root = () => Promise.resolve(0);
const notRoot = () => Promise.resolve(65534);

Deno.test("present: nothing runs, not even the root check", async () => {
  const { pkg, asked } = scripted([true]);
  const r = await ensureAptPackage(pkg, {
    aptGet: "/nonexistent/apt-get",
    uid: () => Promise.reject(new Error("the root check ran")),
    lock: "/nonexistent/apt.lock",
  });
  assert.equal(r, "present");
  assert.equal(asked(), 1);
});

Deno.test("missing, as root: the real apt-get installs busybox-static, then it is there", async () => {
  await withLockFile(async (lock) => {
    // Asked before the lock, again under it, and after apt-get.
    const { pkg, asked } = scripted([false, false, true]);
    assert.equal(await ensureAptPackage(pkg, { uid: root, lock }), "installed");
    assert.equal(asked(), 3);
  });
});

Deno.test("installed by another process while this one waited for the lock: apt does not run", async () => {
  await withLockFile(async (lock) => {
    const { pkg, asked } = scripted([false, true]);
    assert.equal(
      await ensureAptPackage(pkg, { uid: root, lock, aptGet: "/nonexistent/apt-get" }),
      "present",
    );
    assert.equal(asked(), 2);
  });
});

Deno.test("missing and not root: the error says to install it as root; apt does not run", async () => {
  await withLockFile(async (lock) => {
    const { pkg } = scripted([false]);
    await assert.rejects(
      ensureAptPackage(pkg, { uid: notRoot, lock, aptGet: "/nonexistent/apt-get" }),
      (e: Error) => {
        assert.equal(
          e.message,
          "the tests need busybox (for `marsh kit build`), which is not installed, and they are " +
            "not root, so they cannot install it: install busybox-static " +
            "(`apt-get install -y busybox-static` as root)",
        );
        return true;
      },
    );
    await assert.rejects(Deno.lstat(lock), Deno.errors.NotFound, "the lock was not even taken");
  });
});

Deno.test("missing, root, and no apt-get: the error says to use the system's package manager", async () => {
  await withLockFile(async (lock) => {
    const { pkg } = scripted([false]);
    await assert.rejects(
      ensureAptPackage(pkg, { uid: root, lock, aptGet: "/nonexistent/apt-get" }),
      /^Error: the tests need busybox \(for `marsh kit build`\), which is not installed, and there is no apt-get \(\/nonexistent\/apt-get\) to install busybox-static: install busybox \(for `marsh kit build`\) with this system's package manager$/,
    );
  });
});

Deno.test("apt-get fails, update too: the error says so and what to run", async () => {
  await withLockFile(async (lock) => {
    const { pkg } = scripted([false]);
    await assert.rejects(
      ensureAptPackage(pkg, { uid: root, lock, aptGet: "false" }),
      /`apt-get update` failed, so busybox-static cannot be installed .*`apt-get install -y busybox-static` as root/,
    );
  });
});

Deno.test("apt-get succeeds but the check still fails: the error names the package", async () => {
  await withLockFile(async (lock) => {
    const { pkg } = scripted([false]);
    await assert.rejects(
      ensureAptPackage(pkg, { uid: root, lock, aptGet: "true" }),
      /^Error: apt-get installed busybox-static, but busybox \(for `marsh kit build`\) is still missing: see `dpkg -L busybox-static`$/,
    );
  });
});

Deno.test("ensureBusybox leaves busybox where kit build looks for it", async () => {
  await ensureBusybox();
  assert.ok(await findBusybox(Deno.env.get("PATH") ?? ""));
});
