/**
 * What the machine is doing while the bench runs: load average, disk use,
 * and whether DAMON reclaims idle page cache.
 *
 * @module
 */

import { runText } from "./_command.ts";

/** `du -sb` of `path`, bytes. */
export async function duBytes(path: string): Promise<number> {
  const out = await runText({ cmd: "du", args: ["-sb", "--", path] });
  return Number(out.split("\t")[0]);
}

/** The 1, 5 and 15 minute load averages, space-separated. */
export async function loadavg(): Promise<string> {
  // Deno.loadavg needs --allow-sys, which the task does not grant.
  return (await runText({ cmd: "cat", args: ["/proc/loadavg"] })).trim().split(" ").slice(0, 3)
    .join(" ");
}

/** `/proc/pressure/io`'s `some avg10` (the share of time some task waited on I/O, %), or "n/a". */
export async function ioPressure(): Promise<string> {
  const text = await runText({ cmd: "cat", args: ["/proc/pressure/io"] }).catch((error) => {
    if (error instanceof Error) return "";
    throw error;
  });
  return /^some avg10=([0-9.]+)/m.exec(text)?.[1] ?? "n/a";
}

const DAMON_SCRIPT = `
for s in /sys/kernel/mm/damon/admin/kdamonds/*/contexts/*/schemes/*; do
  [ -e "$s/action" ] || continue
  k=\${s%%/contexts/*}
  [ "$(cat "$k/state")" = on ] || continue
  c=\${s%%/schemes/*}
  echo "$(cat "$s/action") $(cat "$s/access_pattern/age/min") $(cat "$c/monitoring_attrs/intervals/aggr_us")"
done
`;

/**
 * Says so when DAMON reclaims idle page cache on this machine (these VMs page
 * out memory idle for about a minute), which limits what "warm cache" means
 * for the big trees. Deno refuses to read /sys without --allow-all, so a
 * shell reads it.
 */
export async function damonNote(): Promise<string | null> {
  let out: string;
  try {
    out = await runText({ cmd: "bash", args: ["-c", DAMON_SCRIPT] });
  } catch (err) {
    return `DAMON state unknown (${err instanceof Error ? err.message : String(err)})`;
  }
  for (const line of out.split("\n")) {
    const [action, minAge, aggrUs] = line.split(" ");
    if (action !== "pageout") continue;
    const seconds = (Number(minAge) * Number(aggrUs)) / 1e6;
    return `DAMON pages out memory idle for ≥ ${seconds} s, page cache included: only data ` +
      "touched within that window is warm, so big trees are read partly from disk";
  }
  return null;
}
