import { describe, expect, it } from "vitest";
import { persistedAnnotations, restoreRecord } from "../../src/engine/persist.js";
import type { PersistedState } from "../../src/engine/types.js";
import { HOUR, MINUTE, SECOND, Sim, T0, actionsOf, report, testPolicy, transitions, ttySession } from "./sim.js";

const PREFIX = "workstation.aik8s.run/";
const idle = () => report({ sessions: { sessions: [ttySession(99_999)] } });

/** A collector that saw the VM go idle and sent a notice, then was restarted `downMs` later. */
function restartedInStoppingPending(downMs: number) {
  const before = new Sim();
  before.send(report({ sessions: { sessions: [ttySession(0)] } }));
  const decisions = before.idleFor(HOUR);
  const persisted = actionsOf(decisions, "persist").at(-1)!.values;
  expect(persisted.state).toBe("StoppingPending");
  const annotations = Object.fromEntries(
    Object.entries(persistedAnnotations(persisted, PREFIX)).filter(
      (entry): entry is [string, string] => entry[1] !== null,
    ),
  );
  const restoredAt = before.now + downMs;
  const { record, problems } = restoreRecord({ "other.example/x": "1", ...annotations }, restoredAt, PREFIX);
  expect(problems).toEqual([]);
  const after = new Sim(testPolicy(), record);
  after.now = restoredAt;
  return { after, persisted, annotations };
}

describe("persisted state as annotations", () => {
  it("writes RFC 3339 times and removes what no longer applies", () => {
    const values: PersistedState = {
      state: "StoppingPending",
      lastActiveMs: T0,
      noticeId: "n-abc",
      stopDeadlineMs: T0 + 10 * MINUTE,
    };
    expect(persistedAnnotations(values, PREFIX)).toEqual({
      [`${PREFIX}state`]: "StoppingPending",
      [`${PREFIX}last-active`]: "2025-01-06T09:00:00.000Z",
      [`${PREFIX}notice-id`]: "n-abc",
      [`${PREFIX}stop-deadline`]: "2025-01-06T09:10:00.000Z",
    });
    expect(
      persistedAnnotations(
        { state: "Active", lastActiveMs: T0, noticeId: undefined, stopDeadlineMs: undefined },
        PREFIX,
      ),
    ).toMatchObject({
      [`${PREFIX}notice-id`]: null,
      [`${PREFIX}stop-deadline`]: null,
    });
  });
});

describe("a collector restarted in StoppingPending", () => {
  it("does not restart the idle clock: the announced deadline stands once a fresh report shows no activity", () => {
    const { after, persisted } = restartedInStoppingPending(2 * MINUTE);
    expect(after.state).toBe("StoppingPending");
    const decisions = after.idleFor(10 * MINUTE);
    const stopping = decisions.find((d) => d.explanation.to === "Stopping")!;
    // Stop at the original deadline (T0 + 1h + 10m), not 10 minutes after the restart.
    expect(stopping.explanation.atMs).toBeGreaterThanOrEqual(persisted.stopDeadlineMs!);
    expect(stopping.explanation.atMs).toBeLessThan(persisted.stopDeadlineMs! + 15 * SECOND);
    expect(stopping.explanation.idleSeconds).toBeGreaterThanOrEqual(70 * 60);
  });

  it("re-sends the notice with the same id when the agent connects", () => {
    const { after, persisted } = restartedInStoppingPending(MINUTE);
    after.now += 5 * SECOND;
    const decision = after.send(idle());
    expect(actionsOf(decision, "notice")).toEqual([expect.objectContaining({ id: persisted.noticeId, repeat: true })]);
  });

  it("does not stop a VM that became active meanwhile", () => {
    const { after } = restartedInStoppingPending(20 * MINUTE);
    // The deadline passed while the collector was down; the user typed 5 minutes ago.
    after.now += 5 * SECOND;
    const decision = after.send(report({ sessions: { sessions: [ttySession(300)] } }));
    expect(decision.next.state).toBe("Active");
    expect(actionsOf(decision, "stop")).toEqual([]);
    expect(actionsOf(decision, "notice-cleared")[0]?.reason).toMatch(/input on pts\/0/);
  });

  it("stops nothing before a fresh report, and loses the agent if none comes", () => {
    const { after } = restartedInStoppingPending(30 * MINUTE);
    after.connected = false;
    const decisions = after.advance(HOUR, { tickMs: 15 * SECOND });
    expect(actionsOf(decisions, "stop")).toEqual([]);
    expect(transitions(decisions)).toEqual(["StoppingPending→AgentLost"]);
  });

  it("stops at once, after the fresh report, when the deadline passed during the restart and nothing happened", () => {
    const { after } = restartedInStoppingPending(20 * MINUTE);
    after.now += 5 * SECOND;
    const decision = after.send(idle());
    expect(decision.next.state).toBe("Stopping");
    expect(actionsOf(decision, "stop")).toHaveLength(1);
  });
});

describe("restoring other states", () => {
  it("Active resumes the idle clock no earlier than the restart: downtime is missing data", () => {
    const restoredAt = T0 + 5 * HOUR;
    const { record } = restoreRecord(
      { [`${PREFIX}state`]: "Active", [`${PREFIX}last-active`]: new Date(T0).toISOString() },
      restoredAt,
      PREFIX,
    );
    expect(record).toMatchObject({ state: "Active", clock: { lastActivityAtMs: restoredAt } });
    const sim = new Sim(testPolicy(), record);
    sim.now = restoredAt;
    const decisions = sim.idleFor(HOUR);
    expect(decisions.find((d) => d.explanation.to === "StoppingPending")?.explanation.atMs).toBe(restoredAt + HOUR);
  });

  it("a newer last-active than the restart is kept", () => {
    const { record } = restoreRecord(
      { [`${PREFIX}state`]: "Active", [`${PREFIX}last-active`]: new Date(T0 + MINUTE).toISOString() },
      T0,
      PREFIX,
    );
    expect(record?.clock.lastActivityAtMs).toBe(T0 + MINUTE);
  });

  it("Stopped stays Stopped until the VM runs again", () => {
    const { record } = restoreRecord({ [`${PREFIX}state`]: "Stopped" }, T0, PREFIX);
    const sim = new Sim(testPolicy(), record);
    sim.vmRunning = false;
    expect(sim.step().next.state).toBe("Stopped");
    sim.vmRunning = true;
    sim.now += MINUTE;
    expect(sim.send(idle()).next.state).toBe("Active");
  });

  it("an observe-mode notice is restored as one (its id says so)", () => {
    const { record } = restoreRecord(
      {
        [`${PREFIX}state`]: "StoppingPending",
        [`${PREFIX}last-active`]: new Date(T0).toISOString(),
        [`${PREFIX}notice-id`]: "o-sq1p40",
        [`${PREFIX}stop-deadline`]: new Date(T0 + 70 * MINUTE).toISOString(),
      },
      T0 + 65 * MINUTE,
      PREFIX,
    );
    expect(record?.notice?.mode).toBe("observe");
  });

  it.each([
    [{ [`${PREFIX}state`]: "Sleeping" }, /unknown state "Sleeping"/, undefined],
    [
      { [`${PREFIX}state`]: "Active", [`${PREFIX}last-active`]: "yesterday" },
      /last-active: "yesterday" is not an RFC 3339 time/,
      "Active",
    ],
    [
      { [`${PREFIX}state`]: "StoppingPending", [`${PREFIX}last-active`]: "2025-01-06T09:00:00Z" },
      /restored as Active/,
      "Active",
    ],
  ])("reports unreadable annotations and falls back safely (%j)", (annotations, problem, state) => {
    const { record, problems } = restoreRecord(annotations, T0, PREFIX);
    expect(problems.join("\n")).toMatch(problem);
    expect(record?.state).toBe(state);
    if (record) expect(record.clock.lastActivityAtMs).toBe(T0);
  });

  it("annotations an earlier collector wrote (the records were flat then) load into the clock value", () => {
    // Literal annotations, as a collector from before the idle clock became a value wrote them.
    const written = {
      [`${PREFIX}state`]: "StoppingPending",
      [`${PREFIX}last-active`]: "2026-03-01T10:00:00.000Z",
      [`${PREFIX}notice-id`]: "n-t9k2qo",
      [`${PREFIX}stop-deadline`]: "2026-03-01T11:30:00.000Z",
    };
    const restoredAt = Date.parse("2026-03-01T11:05:00.000Z");
    const { record, problems } = restoreRecord(written, restoredAt, PREFIX);
    expect(problems).toEqual([]);
    expect(record?.state).toBe("StoppingPending");
    expect(record?.clock).toEqual({
      lastStrongAtMs: Date.parse("2026-03-01T10:00:00.000Z"),
      lastActivityAtMs: Date.parse("2026-03-01T10:00:00.000Z"),
      lastActivityDetail: "restored last-active",
      lastActivityWeak: false,
    });
    expect(record?.notice).toMatchObject({ id: "n-t9k2qo", deadlineMs: Date.parse("2026-03-01T11:30:00.000Z") });
    // What it writes back is what it read: the format did not change.
    const again = new Sim(testPolicy(), record);
    again.now = restoredAt;
    const [stopping] = actionsOf(again.idleFor(HOUR), "persist");
    expect(stopping?.values.state).toBe("Stopping");
    expect(persistedAnnotations(stopping!.values, PREFIX)[`${PREFIX}last-active`]).toBe("2026-03-01T10:00:00.000Z");
  });

  it("nothing stored: a fresh record", () => {
    expect(restoreRecord({}, T0, PREFIX)).toEqual({ record: undefined, problems: [] });
  });
});
