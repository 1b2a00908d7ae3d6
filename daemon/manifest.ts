/**
 * Builds the public manifest (docs/rules.md "States and records") from journal records.
 *
 * @module
 */

import type { BranchRecord, Creator, SplitRecord } from "../journal/records.ts";
import type { Manifest, ManifestBranch } from "../protocol/manifest.ts";

/** `host`, `session:<id>` or `job:<id>`: a creator as the manifest names it. */
export function holderOf(c: Creator): string {
  return c.kind === "host" ? "host" : `${c.kind}:${c.id}`;
}

function branchOf(b: BranchRecord): ManifestBranch {
  return {
    label: b.label,
    kind: b.kind,
    placement: b.placement,
    state: b.state,
    ...(b.status !== null ? { status: b.status } : {}),
    ...(b.code !== null ? { code: b.code } : {}),
    ...(b.jobId !== null ? { job_id: b.jobId } : {}),
    files: b.files,
    ...(b.trust !== null ? { trust: b.trust } : {}),
    fork: b.fork,
    ...(b.forkStrategy !== null ? { fork_strategy: b.forkStrategy } : {}),
    ...(b.view !== null ? { view: b.view } : {}),
    ...(b.viewReason !== null ? { view_reason: b.viewReason } : {}),
    ...(b.startedMs !== null ? { started_unix_ms: b.startedMs } : {}),
    ...(b.finishedMs !== null ? { finished_unix_ms: b.finishedMs } : {}),
    ...(b.discard !== null
      ? {
        discarded: {
          after: b.discard.after,
          reason: b.discard.reason,
          by: holderOf(b.discard.by),
          at_unix_ms: b.discard.atMs,
        },
      }
      : {}),
  };
}

/** The manifest of a split and its branches (declaration order). */
export function manifestOf(s: SplitRecord, branches: readonly BranchRecord[]): Manifest {
  return {
    version: 2,
    id: s.id,
    state: s.state,
    ...(s.status !== null ? { status: s.status } : {}),
    creator: s.creator,
    session: s.session,
    parent: s.parent,
    depth: s.depth,
    root: s.root,
    dir: s.dir,
    out: `${s.dir}/out`,
    objects: `${s.dir}/store.git/objects`,
    cwd: s.cwd,
    created_unix_ms: s.createdMs,
    ...(s.reason !== null ? { reason: s.reason } : {}),
    ...(s.git !== null ? { git: { head: s.git.head, objects: s.git.objects } } : {}),
    identity: s.identity ? [Number(s.identity[0]), Number(s.identity[1])] : [],
    timing_ms: s.timing,
    ...(s.withIgnored ? { with_ignored: true as const } : {}),
    ...(s.rootId !== null ? { root_id: s.rootId } : {}),
    ...(s.finishedMs !== null ? { finished_unix_ms: s.finishedMs } : {}),
    branches: branches.map(branchOf),
  };
}

/**
 * Why a split with a rejected branch is kept, and how to recover that
 * branch's work (docs/messages.md, "marsh join"): its fork, whose Git
 * metadata is marsh's (verified, or the branch's set aside), and its
 * untrusted patch when one was written.
 */
export function keptWork(m: Manifest, b: BranchRecord): string {
  const patch = b.files > 0 ? ` and its untrusted patch in ${m.out}/${b.label}/diff.patch` : "";
  return `branch ${b.label} ${
    b.status ?? b.state
  }; its work is kept in ${b.fork} (see git -C ${b.fork} status)${patch}`;
}
