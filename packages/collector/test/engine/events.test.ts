// One vocabulary for Events: engine/events.ts's EVENT_REASONS is every reason the code sends
// (the engine's, seen by driving decide(); the edges' are typed, and test/e2e/kubernetes.test.ts
// sees them on a cluster), docs/kubernetes.md's table is that list, and no document or manifest
// names a reason that does not exist.
import { readdirSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { EVENT_REASONS, eventReasonsTable, isEventReason } from "../../src/engine/events.js";
import type { Decision } from "../../src/engine/types.js";
import { actionsOf, HOUR, MINUTE, report, SECOND, Sim, testPolicy, ttySession } from "./sim.js";

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../../..");
const REASONS = Object.keys(EVENT_REASONS).sort();

function filesUnder(dir: string, keep: (file: string) => boolean): string[] {
  return readdirSync(dir).flatMap((entry) => {
    const full = path.join(dir, entry);
    if (statSync(full).isDirectory()) return entry === "node_modules" || entry === "dist" ? [] : filesUnder(full, keep);
    return keep(full) ? [full] : [];
  });
}

/** Every Event reason decide() sends, over scenarios that walk every state and guard. */
function reasonsTheEngineSends(): Set<string> {
  const sent = new Set<string>();
  const note = (decisions: Decision | Decision[]) => {
    for (const event of actionsOf(decisions, "event")) sent.add(event.reason);
  };
  const typing = () => report({ sessions: { sessions: [ttySession(1)] } });
  // Idle to a notice, a stop, a failure and a refusal; activity cancels a notice.
  const sim = new Sim(testPolicy());
  note(sim.send(typing()));
  note(sim.idleFor(HOUR + 10 * MINUTE + 15 * SECOND));
  note(sim.stopResult({ outcome: "failed", message: "the API is down" }));
  note(sim.stopResult({ outcome: "refused", message: "volume scratch is an emptyDisk" }));
  note(sim.idleFor(HOUR + MINUTE));
  sim.now += 5 * SECOND;
  note(sim.send(typing()));
  // Observe mode records what it would have stopped.
  const observe = new Sim(testPolicy({ mode: "observe" }));
  note(observe.send(typing()));
  note(observe.idleFor(HOUR + 10 * MINUTE + 15 * SECOND));
  // The agent goes silent and comes back.
  const lost = new Sim(testPolicy());
  note(lost.send(typing()));
  note(lost.advance(HOUR, { tickMs: MINUTE }));
  note(lost.send(typing()));
  // The agent is stopped on purpose: it says goodbye.
  const parted = new Sim(testPolicy());
  note(parted.send(typing()));
  parted.connected = false;
  parted.goodbye = "SIGTERM: stopped on purpose";
  parted.now += SECOND;
  note(parted.step());
  // A policy annotation that does not parse, then is fixed.
  const policy = new Sim(testPolicy());
  note(policy.send(typing()));
  policy.policyStatus = { errors: [{ key: "idle-timeout", message: "not a duration" }], fallback: "previous-valid" };
  policy.now += SECOND;
  note(policy.step());
  policy.policyStatus = undefined;
  policy.now += SECOND;
  note(policy.step());
  return sent;
}

describe("Event reasons", () => {
  it("the engine sends every reason the list says it sends (the edges' are typed EventReason: none outside the list compiles)", () => {
    const engine = Object.entries(EVENT_REASONS)
      .filter(([, info]) => info.sentBy === "engine")
      .map(([reason]) => reason)
      .sort();
    expect([...reasonsTheEngineSends()].sort()).toEqual(engine);
    expect(REASONS.filter((reason) => !engine.includes(reason))).toEqual([
      "IdentityRejected",
      "KeepRunningLink",
      "ScheduleInvalid",
      "ScheduleSet",
      "ScheduledStartFailed",
      "ScheduledStartUnplaced",
      "StartPlaced",
      "StartUnschedulable",
      "Started",
      "StopDisputed",
      "Stopped",
      "WarmStartFailed",
      "WarmStartUsed",
      "WarmStartWasted",
    ]);
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
