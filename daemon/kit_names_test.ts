import assert from "node:assert/strict";
import type { BranchSpec } from "../protocol/daemon.ts";
import { checkArgvBranches } from "./kit_names.ts";

function journalOf(names: string[]): { listKits(): { name: string }[]; reads: number } {
  const j = {
    reads: 0,
    listKits() {
      j.reads++;
      return names.map((name) => ({ name }));
    },
  };
  return j;
}

const argv = (label: string, ...words: string[]): BranchSpec => ({
  kind: "argv",
  label,
  argv: words,
});
const shell = (label: string, script: string): BranchSpec => ({ kind: "shell", label, script });

Deno.test({ name: "every argv CMD registered: no refusal", permissions: {} }, () => {
  const j = journalOf(["claude", "codex"]);
  const ok = [shell("t", "make test"), argv("a", "codex", "exec", "x"), argv("b", "claude", "-p")];
  assert.equal(checkArgvBranches(ok, j), null);
  assert.equal(j.reads, 1, "the registry is read once");
});

Deno.test({ name: "shell branches alone never read the registry", permissions: {} }, () => {
  const j = journalOf([]);
  assert.equal(checkArgvBranches([shell("a", "codex exec x")], j), null);
  assert.equal(checkArgvBranches([], j), null);
  assert.equal(j.reads, 0);
});

Deno.test({
  name: "the first unregistered CMD in declaration order is named with the list",
  permissions: {},
}, () => {
  const j = journalOf(["claude", "codex"]);
  assert.equal(
    checkArgvBranches([argv("a", "codex"), argv("b", "pi", "-p"), argv("c", "gemini")], j),
    'unknown Kit command "pi" in branch "b"; registered: claude, codex ' +
      "(add one with: marsh kits add NAME --image IMAGE)",
  );
});

Deno.test({ name: "no Kit registered: the refusal says so", permissions: {} }, () => {
  assert.equal(
    checkArgvBranches([argv("review", "codex", "exec")], journalOf([])),
    'unknown Kit command "codex" in branch "review"; no Kit commands are registered ' +
      "(add one with: marsh kits add NAME --image IMAGE)",
  );
});

Deno.test(
  { name: "a CMD is matched exactly: no path, case or prefix match", permissions: {} },
  () => {
    const j = journalOf(["codex"]);
    for (const cmd of ["/usr/bin/codex", "Codex", "codex2", "cod", "", "marsh"]) {
      assert.match(
        checkArgvBranches([argv("a", cmd)], j) ?? "",
        new RegExp(
          `^unknown Kit command ${JSON.stringify(cmd).replace(/[/]/g, "\\/")} in branch "a"`,
        ),
      );
    }
    assert.match(checkArgvBranches([argv("a", "x\ny")], j) ?? "", /"x\\ny"/);
  },
);
