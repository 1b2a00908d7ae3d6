/**
 * `marsh merge --paths P...`: each path as the user gave it, relative to
 * their current directory, becomes a path relative to the project root, as
 * the service's `paths` scope takes them (docs/guide.md, "marsh merge").
 * Pure string work on absolute paths: the daemon reads no project file, and
 * the CLI's cwd is already physical (`getcwd`).
 *
 * @module
 */

import { pathProblem } from "../model/resolution_plan.ts";
import { MAX_LISTED_PATHS } from "../protocol/splitfs_resolve.ts";
import { RequestError } from "./request_error.ts";

/** `/a/./b/../c` → `/a/c`; `..` never climbs above `/`. */
function normalise(abs: string): string {
  const out: string[] = [];
  for (const seg of abs.split("/")) {
    if (seg === "" || seg === ".") continue;
    if (seg === "..") out.pop();
    else out.push(seg);
  }
  return `/${out.join("/")}`;
}

/**
 * The project-relative form of each of `given` (relative to `cwd`, or
 * absolute), sorted, duplicates and paths under another given one dropped
 * (a directory stands for everything under it).
 *
 * @throws {RequestError} (2) for a path outside the project, the project
 *   itself, one in `.git` or `.marsh`, or too many
 */
export function projectPaths(root: string, cwd: string, given: readonly string[]): string[] {
  if (given.length === 0) throw new RequestError(2, "--paths needs at least one path");
  if (given.length > MAX_LISTED_PATHS) {
    throw new RequestError(2, `--paths takes at most ${MAX_LISTED_PATHS} paths`);
  }
  const top = normalise(root);
  const rel = new Set<string>();
  for (const p of given) {
    if (p.includes("\0")) throw new RequestError(2, `--paths: a path holds a NUL byte`);
    const abs = normalise(p.startsWith("/") ? p : `${cwd}/${p}`);
    if (abs === top) {
      throw new RequestError(
        2,
        `--paths ${JSON.stringify(p)} is the whole project: use --filesystem instead`,
      );
    }
    if (!abs.startsWith(top === "/" ? "/" : `${top}/`)) {
      throw new RequestError(
        2,
        `--paths ${JSON.stringify(p)} is outside the project ${top} (it is ${abs}): ` +
          `give paths inside the project, relative to the current directory`,
      );
    }
    const r = abs.slice(top === "/" ? 1 : top.length + 1);
    const problem = pathProblem(r);
    if (problem !== null) throw new RequestError(2, `--paths ${JSON.stringify(p)}: ${problem}`);
    rel.add(r);
  }
  const under = (r: string): boolean => {
    for (let i = r.indexOf("/"); i !== -1; i = r.indexOf("/", i + 1)) {
      if (rel.has(r.slice(0, i))) return true;
    }
    return false;
  };
  return [...rel].filter((r) => !under(r)).sort();
}
