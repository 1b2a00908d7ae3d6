/**
 * Test helpers for the session frames (splitfs/session/*_test.ts): a
 * project sandbox whose frames are answered in this process by
 * `handleSession`, a command run inside an op's overlay, and Git's own tree
 * id of any directory (a mounted view) through a private index. Real files,
 * real overlay mounts, real Git (the tests run as root).
 *
 * @module
 */

import assert from "node:assert/strict";
import { fingerprint, gitOk, put, run, type Sandbox, sandbox, unmountBelow } from "../_testing.ts";
import { ProjectLocks } from "../project_lock.ts";
import { handleSession } from "./frames.ts";
import type {
  OpCapturedReply,
  OpPreparedReply,
  OpSealedReply,
  SessionReply,
  SessionRequest,
} from "../../protocol/splitfs_session.ts";

/** A session request without its `v`. */
export type Frame = SessionRequest extends infer R ? R extends unknown ? Omit<R, "v"> : never
  : never;

/** A project with checkpoint sessions answered in process. */
export interface SessionWorld extends Disposable {
  readonly sb: Sandbox;
  readonly root: string;
  /** Sends one frame (without `v`). */
  call<R extends SessionReply = SessionReply>(req: Frame): Promise<R>;
  /** Git's tree id of everything under `dir` (ignored files too), through a private index. */
  gitTree(dir: string): Promise<string>;
  /** Runs `bash -c script` with `dir` as its cwd; throws unless it exits 0. */
  sh(dir: string, script: string): Promise<void>;
  /**
   * `git ls-tree -r -t -z` of a tree {@linkcode SessionWorld.gitTree} wrote:
   * `<mode> <type> <id>\t<path>` per entry, trees included.
   */
  lsTree(tree: string): Promise<string[]>;
}

let gitDirs = 0;

/** A sandbox holding `files`, with a `.git` dir when `git` (default), answered in process. */
export async function sessionWorld(
  files: Record<string, string> = {},
  git = true,
): Promise<SessionWorld> {
  const sb = sandbox("marsh-session-test-");
  for (const [rel, data] of Object.entries(files)) put(sb.root, rel, data);
  const opts = { home: sb.home };
  if (git) await gitOk(sb.root, ["init", "-q"], opts);
  const bare = `${sb.top}/tree.git`;
  await gitOk(sb.top, ["init", "-q", "--bare", bare], opts);
  const locks = new ProjectLocks(null);
  const ctx = { locks, atFirstHold: () => Promise.resolve() };
  return {
    sb,
    root: sb.root,
    call<R extends SessionReply>(req: Frame): Promise<R> {
      return handleSession({ v: 1, ...req } as SessionRequest, ctx) as Promise<R>;
    },
    async gitTree(dir: string): Promise<string> {
      const index = `${sb.top}/index-${gitDirs++}`;
      const env = { GIT_INDEX_FILE: index };
      const base = ["-c", "core.bare=false", `--git-dir=${bare}`, `--work-tree=${dir}`];
      await gitOk(dir, [...base, "add", "-A", "--force", "."], { ...opts, env });
      const id = (await gitOk(dir, [...base, "write-tree"], { ...opts, env })).trim();
      Deno.removeSync(index);
      return id;
    },
    async lsTree(tree: string): Promise<string[]> {
      const out = await gitOk(
        sb.top,
        [`--git-dir=${bare}`, "ls-tree", "-r", "-t", "-z", tree],
        opts,
      );
      return out.split("\0").filter((l) => l !== "");
    },
    async sh(dir: string, script: string): Promise<void> {
      await run("bash", ["-c", script], { ...opts, cwd: dir });
    },
    [Symbol.dispose]() {
      unmountBelow(sb.top);
      sb[Symbol.dispose]();
    },
  };
}

/** What an op's merged view showed before its capture, for comparing with a view after. */
export function viewPrint(dir: string): Map<string, string> {
  return fingerprint(dir);
}

/** Asserts a capture's reply is `changed` and returns it narrowed. */
export function changedReply(
  r: OpCapturedReply,
): Extract<OpCapturedReply, { kind: "changed" }> {
  assert.equal(r.kind, "changed", JSON.stringify(r));
  return r as Extract<OpCapturedReply, { kind: "changed" }>;
}

/** Runs `script` as one op on `layers` and seals it; returns the new stack and root. */
export async function sealOneOp(
  w: SessionWorld,
  name: string,
  id: string,
  head: { layers: readonly string[]; rootId: string },
  script: string,
): Promise<{ layers: string[]; rootId: string; layer: string }> {
  const at = { root: w.root, name };
  const prep = await w.call<OpPreparedReply>({
    t: "op-prepare",
    ...at,
    op: id,
    layers: head.layers,
  });
  await w.sh(prep.merged, script);
  const cap = changedReply(
    await w.call<OpCapturedReply>({
      t: "op-capture",
      ...at,
      op: id,
      layers: head.layers,
      rootId: head.rootId,
    }),
  );
  const sealed = await w.call<OpSealedReply>({
    t: "op-seal",
    ...at,
    op: id,
    layer: cap.layer,
    rootId: cap.rootId,
    layers: head.layers,
  });
  await w.call({ t: "op-drop", ...at, op: id });
  return { layers: [...sealed.layers], rootId: cap.rootId, layer: cap.layer };
}
