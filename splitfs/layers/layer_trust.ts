/**
 * What the service remembers of the layers it has checked (docs/checkpoints.md
 * "What an operation trusts"), so an operation does not read every layer of
 * its stack again each time. Two verdicts, each kept with the evidence it
 * still holds for:
 *
 * - a layer's **seal** (`SEALED` matches `meta.json`, the meta parsed): kept
 *   with the `statx` identity (inode, size, ctime in ns) of `SEALED`,
 *   `meta.json` and the layer's directory. Any write, `chmod`, replacement
 *   or rename of either file moves one of them, and no writer can set a
 *   ctime back: as strong as reading them again.
 * - a layer's **data** (every entry as its `stat` records say,
 *   `layer_seal.ts` `checkData`): kept with the seal's digest of `stat` and
 *   the identity of the layer's directory, `data/` and `stat`. This catches
 *   a layer re-sealed, replaced, or given a new, removed or renamed entry
 *   at the top of `data/`; it does not catch a file deeper in `data/`
 *   written behind marsh after the check. Such a change is found by the next
 *   full check: the first use of the layer by a service process (the cache
 *   is in memory only), recovery's read-back of a layer (`layer-check`), and
 *   a snapshot that reuses a chain's stack (`LayerStore.snapshot`, which
 *   never uses this cache).
 *
 * A layer this service sealed itself is trusted from its seal on: its stat
 * records were taken by the same process a moment before.
 *
 * Needs `--allow-ffi=<libc path>`.
 *
 * @module
 */

import type { Dir, Stat } from "../fd/dir.ts";
import type { LayerMeta } from "./layer_seal.ts";
import { DATA, META, SEALED, STAT } from "./layer_seal.ts";

/** At most this many layers' verdicts are kept (a stack is at most 64 deep; several sessions). */
const MAX_TRUSTED = 4096;

interface Sealed {
  readonly evidence: string;
  readonly meta: LayerMeta;
}

const seals = new Map<string, Sealed>();
const data = new Map<string, string>();
let fullChecks = 0;

function identity(st: Stat | null): string {
  return st === null ? "-" : `${st.kind}:${st.ino}:${st.size}:${st.ctimeNs}`;
}

function remember<V>(map: Map<string, V>, key: string, value: V): void {
  map.delete(key);
  map.set(key, value);
  while (map.size > MAX_TRUSTED) map.delete(map.keys().next().value as string);
}

/** The evidence a seal verdict holds for: `wrapper` itself, `SEALED` and `meta.json`. */
function sealEvidence(wrapper: Dir): string {
  return `${identity(wrapper.stat())} ${identity(wrapper.statAt(SEALED))} ${
    identity(wrapper.statAt(META))
  }`;
}

/** The evidence a data verdict holds for: `wrapper`, `data/` and `stat`. */
function dataEvidence(wrapper: Dir, meta: LayerMeta): string {
  return `${meta.id} ${meta.data?.sha256 ?? "-"} ${identity(wrapper.stat())} ${
    identity(wrapper.statAt(DATA))
  } ${identity(wrapper.statAt(STAT))}`;
}

/**
 * The meta of layer `key` read and checked by `read` (`readSealedMeta`),
 * or the one kept when its evidence still holds.
 */
export function trustedMeta(key: string, wrapper: Dir, read: () => LayerMeta): LayerMeta {
  const before = sealEvidence(wrapper);
  const kept = seals.get(key);
  if (kept !== undefined && kept.evidence === before) return kept.meta;
  const meta = read();
  // Taken again: a write between the read and the first evidence is not kept.
  if (sealEvidence(wrapper) === before) remember(seals, key, { evidence: before, meta });
  return meta;
}

/**
 * Whether layer `key`'s data was checked intact (or sealed) by this process
 * and its evidence still holds; when not, runs `check` (`checkData`) and
 * keeps a clean verdict.
 *
 * @returns `check`'s answer, or `null` from the kept verdict
 */
export function trustedData(
  key: string,
  wrapper: Dir,
  meta: LayerMeta,
  check: () => string | null,
): string | null {
  const before = dataEvidence(wrapper, meta);
  if (data.get(key) === before) return null;
  fullChecks++;
  const problem = check();
  if (problem === null && dataEvidence(wrapper, meta) === before) remember(data, key, before);
  return problem;
}

/** Marks layer `key` (its wrapper `wrapper`), just sealed by this process, as checked. */
export function trustSealed(key: string, wrapper: Dir, meta: LayerMeta): void {
  remember(data, key, dataEvidence(wrapper, meta));
}

/** Forgets layer `key` (discarded). */
export function forgetTrust(key: string): void {
  seals.delete(key);
  data.delete(key);
}

/**
 * Forgets every verdict, as a new service process starts with none (tests,
 * memory pressure).
 */
export function releaseTrust(): void {
  seals.clear();
  data.clear();
}

/** How many full data checks ran (for tests). */
export function fullDataChecks(): number {
  return fullChecks;
}
