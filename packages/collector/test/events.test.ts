// One vocabulary for Events: engine/events.ts's EVENT_REASONS is every reason the code sends
// (read from the sources), docs/kubernetes.md's table is that list, and no document or manifest
// names a reason that does not exist.
import { readdirSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { EVENT_REASONS, eventReasonsTable, isEventReason } from "../src/engine/events.js";

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..");
const REASONS = Object.keys(EVENT_REASONS).sort();

function filesUnder(dir: string, keep: (file: string) => boolean): string[] {
  return readdirSync(dir).flatMap((entry) => {
    const full = path.join(dir, entry);
    if (statSync(full).isDirectory()) return entry === "node_modules" || entry === "dist" ? [] : filesUnder(full, keep);
    return keep(full) ? [full] : [];
  });
}

/** Reasons the collector's sources pass to an Event: the engine's event(type, reason, …) and the edge's auditEvent(reason, …). */
function reasonsInSources(): Map<string, string[]> {
  const found = new Map<string, string[]>();
  const sources = filesUnder(
    path.join(repoRoot, "packages/collector/src"),
    (f) => f.endsWith(".ts") && !f.endsWith("engine/events.ts"),
  );
  for (const file of sources) {
    const text = readFileSync(file, "utf8");
    const patterns = [
      /\bevent\(\s*(?:\w+,\s*)?(?:"(?:Normal|Warning)"|trigger[^,]*),\s*"([A-Za-z]+)"/g,
      /\bauditEvent\(\s*"([A-Za-z]+)"/g,
      /\.event\(\s*\w+,\s*"(?:Normal|Warning)",\s*"([A-Za-z]+)"/g,
      /\breason:\s*"([A-Z][A-Za-z]+)",\s*action:/g,
    ];
    for (const pattern of patterns) {
      for (const match of text.matchAll(pattern))
        found.set(match[1]!, [...(found.get(match[1]!) ?? []), path.relative(repoRoot, file)]);
    }
  }
  return found;
}

describe("Event reasons", () => {
  it("are exactly the list in engine/events.ts: each one is sent somewhere, none is sent that is not in it", () => {
    const sent = reasonsInSources();
    expect([...sent.keys()].sort()).toEqual(REASONS);
  });

  it("are documented in docs/kubernetes.md by the table the list renders", () => {
    const docs = readFileSync(path.join(repoRoot, "docs/kubernetes.md"), "utf8");
    expect(
      docs.includes(eventReasonsTable()),
      `docs/kubernetes.md must hold this table verbatim:\n${eventReasonsTable()}`,
    ).toBe(true);
  });

  it("named anywhere in the docs, the README or the packaging exist (field selectors, `Reason` Events)", () => {
    const files = [
      path.join(repoRoot, "README.md"),
      ...filesUnder(path.join(repoRoot, "docs"), (f) => f.endsWith(".md")),
      ...filesUnder(path.join(repoRoot, "packaging"), (f) => /\.(ya?ml|json|md)$/.test(f)),
    ];
    const unknown: string[] = [];
    for (const file of files) {
      const text = readFileSync(file, "utf8");
      const named = [
        ...[...text.matchAll(/reason=([A-Z][A-Za-z]+)/g)].map((m) => m[1]!),
        // "`IdleStop` Event", "Events (`IdleStop`, `IdleStopFailed`)", "the IdleStopRefused Events"
        ...[...text.matchAll(/`([A-Z][a-z]+[A-Z][A-Za-z]+)`\s+(?:Warning\s+)?Events?\b/g)].map((m) => m[1]!),
        ...[...text.matchAll(/Events?\s*\(([^)]*)\)/g)].flatMap((m) =>
          [...m[1]!.matchAll(/`([A-Z][a-z]+[A-Z][A-Za-z]+)`/g)].map((n) => n[1]!),
        ),
        ...[...text.matchAll(/\b(?:the|an?)\s+`?([A-Z][a-z]+[A-Z][A-Za-z]+)`?\s+(?:Warning\s+)?Events?\b/g)].map(
          (m) => m[1]!,
        ),
      ];
      for (const name of named) if (!isEventReason(name)) unknown.push(`${path.relative(repoRoot, file)}: ${name}`);
    }
    expect(unknown).toEqual([]);
  });

  it("never name the reasons of the first wave that no code sends", () => {
    const retired = ["StopPending", "WouldStop", "BadPolicy", "StopRefused", "StopCancelled", "StopFailed"];
    const files = [
      path.join(repoRoot, "README.md"),
      ...filesUnder(path.join(repoRoot, "docs"), (f) => f.endsWith(".md")),
    ];
    const hits = files.flatMap((file) => {
      const text = readFileSync(file, "utf8");
      return retired
        .filter((name) => new RegExp(`(?<![A-Za-z])${name}(?![A-Za-z])`).test(text))
        .map((name) => `${path.relative(repoRoot, file)}: ${name}`);
    });
    expect(hits).toEqual([]);
  });
});
