/**
 * `marsh commit [--session NAME] [--checkpoint C] --ref refs/heads/X [-m MSG] [--json]`
 * (docs/guide.md, "Committing a checkpoint"): one Git commit whose tree is a
 * checkpoint's root and whose parent is the ref's current value (for a new
 * ref, the commit `HEAD` names, as `git branch` starts one; none with
 * `--orphan`), and the ref moved to it by compare-and-swap.
 *
 * 1. The daemon resolves the checkpoint and the service writes the root's
 *    missing blobs and trees into the project's object store
 *    (`checkpoint.export`); an entry Git cannot store stops here.
 * 2. The identity is read (`hardened_git.ts`), then the ref's value.
 * 3. `git commit-tree ROOT [-p PARENT]`, then `git update-ref REF NEW OLD` (the
 *    zero id for a new ref): a ref that moved since step 2 fails the swap.
 *
 * The ref moves only in step 3's `update-ref`; every failure before or in it
 * leaves the ref where it was (a commit object no ref names is pruned by
 * `git gc`).
 *
 * Needs what {@linkcode connectDaemon} needs, and `--allow-run` for git.
 *
 * @module
 */

import type { CheckpointExportedReply } from "../protocol/daemon_checkpoint.ts";
import { CliError } from "./cli_error.ts";
import { connectDaemon, type DaemonConnection, daemonSocket, request } from "./daemon_connect.ts";
import { HARDENED_CONFIG, hardenedEnv, readIdentity, runGit } from "./hardened_git.ts";
import { withoutIgnored } from "./commit_ignored.ts";
import type { CliIo } from "./io.ts";

const enc = new TextEncoder();
const ZERO = "0".repeat(40);
const OID = /^[0-9a-f]{40}$/;
/** Exit status of a refusal that moved nothing: an unsupported entry, a moved ref. */
export const COMMIT_REFUSED = 1;
/** Most ignored paths `--json` lists (`ignored_count` has them all). */
const IGNORED_LISTED = 1000;
/** Exit status of a Git failure. */
const GIT_FAILED = 125;

/** `marsh commit --help`'s text after the options. */
export const COMMIT_HELP = `
Promotes one checkpoint's root to Git: the root's blobs and trees Git lacks
are written into the project's object store (streamed from the snapshot
layers, nothing checked out), then one commit whose tree is the root and
whose parent is REF's current value, and REF moved to it by
compare-and-swap (git update-ref REF NEW OLD). A new REF starts where HEAD
is, as git branch does (no parent when HEAD has no commit yet); --orphan
makes it a root commit instead.

Paths the root's .gitignore files (or .git/info/exclude) ignore and the
parent does not track are left out of the commit, as git add -A leaves them
(an operation's target/ or node_modules/ stays in the checkpoint, not in
Git); stderr names them. --include-ignored commits the root as it is. Git runs without hooks,
filters, fsmonitor, signing or your global config; only your user.name and
user.email are read from it.

The checkpoint: --checkpoint C (an id or at least 4 of its first digits),
else the head of --session NAME, else of $MARSH_SESSION, else of the
project's one open session.

Exit status: 0 committed; 1 refused and nothing moved (UnsupportedGitExport:
an empty directory, a symlink leaving the tree, a special file; or REF moved
meanwhile, or does not name a commit); 2 usage (unknown session or
checkpoint, not a Git repository, no identity); 125 Git failed.

Examples:
  marsh commit --ref refs/heads/agent-fix -m 'fix the parser'
  marsh commit --session try2 --ref refs/heads/try2 --json
  marsh commit --checkpoint 3f9a0c12 --ref refs/heads/before-refactor
  marsh commit --ref refs/heads/snapshot --orphan
`;

/** What `marsh commit` was asked for. */
export interface CommitOptions {
  readonly ref: string;
  readonly session?: string;
  readonly checkpoint?: string;
  readonly message?: string;
  /** A new ref gets a root commit instead of starting at `HEAD`. */
  readonly orphan?: boolean;
  /** Commit the root as it is, paths Git ignores included. */
  readonly includeIgnored?: boolean;
  readonly json: boolean;
}

/** What a test may change about how the command runs. */
export interface CommitDeps {
  readonly connect?: () => Promise<DaemonConnection>;
  /** The Git program (default `git` from `PATH`). */
  readonly git?: string;
}

/** The default message: the checkpoint, its session and its operation. */
function defaultMessage(x: CheckpointExportedReply): string {
  const c = x.checkpoint;
  const lines = [`marsh checkpoint ${c.id.slice(0, 12)} of session ${c.session.name}`, ""];
  lines.push(`Checkpoint: ${c.id}`);
  if (c.operation !== null) {
    lines.push(`Operation: ${JSON.stringify(c.operation.argv)}`);
    if (c.operation.exit !== null) lines.push(`Exit: ${c.operation.exit}`);
  }
  return lines.join("\n") + "\n";
}

/** A scratch dir for {@linkcode withoutIgnored}, in the control dir (the one place the CLI writes). */
function scratchDir(): string {
  const parent = `${daemonSocket().home}/tmp`;
  Deno.mkdirSync(parent, { recursive: true, mode: 0o700 });
  return `${parent}/commit-${crypto.randomUUID()}`;
}

/**
 * The commit `HEAD` names, where a new ref starts; null when `HEAD` has no
 * commit yet (a repository without one).
 */
async function headCommit(
  run: (args: readonly string[]) => Promise<{ code: number; stdout: string }>,
): Promise<string | null> {
  const head = await run(["rev-parse", "--verify", "--quiet", "HEAD^{commit}"]);
  const id = head.stdout.trim();
  return head.code === 0 && OID.test(id) ? id : null;
}

/**
 * Runs `marsh commit` and returns its exit status.
 *
 * @throws {CliError} for a usage error, the daemon's refusal, or a Git failure
 */
export async function commitCommand(
  opts: CommitOptions,
  io: CliIo,
  deps: CommitDeps = {},
): Promise<number> {
  const who = "marsh commit";
  const git = deps.git ?? "git";
  const userEnv = io.env();
  const format = await runGit(git, ["check-ref-format", opts.ref], {
    PATH: userEnv.PATH ?? "/usr/bin:/bin",
    GIT_CONFIG_NOSYSTEM: "1",
    GIT_CONFIG_GLOBAL: "/dev/null",
  });
  if (!opts.ref.startsWith("refs/") || format.code !== 0) {
    throw new CliError(
      `${who}: ${
        JSON.stringify(opts.ref)
      } is not a full ref name; give one like refs/heads/my-branch; nothing was committed`,
    );
  }
  const session = opts.session ?? (userEnv.MARSH_SESSION || null);
  const exported = await (async () => {
    await using conn = await (deps.connect ?? connectDaemon)();
    return await request(
      conn,
      {
        v: 1,
        t: "checkpoint.export",
        cwd: io.cwd(),
        session,
        checkpoint: opts.checkpoint ?? null,
      },
      ["checkpoint.exported"],
      who,
      io.error,
    );
  })();
  const c = exported.checkpoint;
  if (exported.unsupported !== null) {
    const u = exported.unsupported;
    if (opts.json) {
      await io.write(enc.encode(`${
        JSON.stringify({
          error: "UnsupportedGitExport",
          path: u.path,
          kind: u.kind,
          message: u.message,
          checkpoint: c.id,
          ref: opts.ref,
        })
      }\n`));
    }
    io.error(`${who}: ${u.message}; ${opts.ref} was not moved`);
    return COMMIT_REFUSED;
  }
  const identity = await readIdentity(git, exported.git_dir, userEnv);
  const env = hardenedEnv(exported.git_dir, identity, userEnv);
  const run = (args: readonly string[], stdin?: string) =>
    runGit(git, [...HARDENED_CONFIG, ...args], env, stdin);
  const runWith = (
    args: readonly string[],
    extra: Readonly<Record<string, string>> = {},
    stdin?: string,
  ) => runGit(git, [...HARDENED_CONFIG, ...args], { ...env, ...extra }, stdin);
  const failed = (step: string, r: { code: number; stderr: string }) =>
    new CliError(
      `${who}: git ${step} failed (exit ${r.code}): ${r.stderr.trim()}; ${opts.ref} was not moved`,
      GIT_FAILED,
    );

  const old = await run(["show-ref", "--verify", "--hash", opts.ref]);
  const oldId = old.code === 0 ? old.stdout.trim() : null;
  if (oldId !== null && !OID.test(oldId)) throw failed("show-ref", old);
  if (oldId !== null) {
    const type = await run(["cat-file", "-t", oldId]);
    if (type.code !== 0) throw failed("cat-file", type);
    if (type.stdout.trim() !== "commit") {
      throw new CliError(
        `${who}: ${opts.ref} names a ${type.stdout.trim()}, not a commit; nothing was committed`,
        COMMIT_REFUSED,
      );
    }
  }
  if (oldId !== null && opts.orphan === true) {
    throw new CliError(
      `${who}: --orphan makes a new ref, and ${opts.ref} exists (at ${
        oldId.slice(0, 12)
      }); name a new ref or drop --orphan; nothing was committed`,
    );
  }
  const parent = oldId ?? (opts.orphan === true ? null : await headCommit(run));
  let kept: { tree: string; ignored: readonly string[] } = { tree: c.root, ignored: [] };
  if (opts.includeIgnored !== true) {
    try {
      kept = await withoutIgnored(runWith, c.root, parent, scratchDir());
    } catch (error) {
      throw new CliError(
        `${who}: leaving out the paths Git ignores failed: ${
          error instanceof Error ? error.message : String(error)
        }; ${opts.ref} was not moved (--include-ignored commits the root as it is)`,
        GIT_FAILED,
      );
    }
  }
  const made = await run(
    [
      "commit-tree",
      "--no-gpg-sign",
      kept.tree,
      ...(parent === null ? [] : ["-p", parent]),
      "-F",
      "-",
    ],
    opts.message !== undefined ? `${opts.message}\n` : defaultMessage(exported),
  );
  const commit = made.stdout.trim();
  if (made.code !== 0 || !OID.test(commit)) throw failed("commit-tree", made);
  const swap = await run([
    "update-ref",
    "-m",
    `marsh commit: checkpoint ${c.id.slice(0, 12)}`,
    opts.ref,
    commit,
    oldId ?? ZERO,
  ]);
  if (swap.code !== 0) {
    const now = await run(["show-ref", "--verify", "--hash", opts.ref]);
    const current = now.code === 0 ? now.stdout.trim() : null;
    if (current !== oldId) {
      throw new CliError(
        `${who}: ${opts.ref} moved meanwhile: it is ${current ?? "gone"}, not ${
          oldId ?? "absent"
        }; nothing was moved (commit ${commit} is unreferenced); run marsh commit again`,
        COMMIT_REFUSED,
      );
    }
    throw failed("update-ref", swap);
  }
  const result = {
    ref: opts.ref,
    commit,
    parent,
    root: c.root,
    tree: kept.tree,
    ignored: kept.ignored.slice(0, IGNORED_LISTED),
    ignored_count: kept.ignored.length,
    checkpoint: c.id,
    session: c.session.name,
    git_dir: exported.git_dir,
    written: { blobs: exported.blobs, trees: exported.trees, bytes: exported.bytes },
    present: exported.present,
  };
  if (kept.ignored.length > 0 && !opts.json) {
    const shown = kept.ignored.slice(0, 5).join(", ");
    const more = kept.ignored.length > 5 ? `, and ${kept.ignored.length - 5} more` : "";
    io.error(
      `${who}: left out ${kept.ignored.length} path${
        kept.ignored.length === 1 ? "" : "s"
      } Git ignores${
        parent === null ? "" : " and the parent does not track"
      }: ${shown}${more} (they stay in the checkpoint; --include-ignored commits them)`,
    );
  }
  await io.write(enc.encode(opts.json ? `${JSON.stringify(result)}\n` : `${commit}\n`));
  return 0;
}
