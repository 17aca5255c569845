// The schedule's "stop by HH:MM" (issue 36): the engine gets the next stop-by instant through its
// observation and runs it through the one pending-stop lifecycle: notice, grace, a lease holds it,
// activity during the grace cancels it.
import { describe, expect, it } from "vitest";
import { HOUR, MINUTE, SECOND, Sim, T0, actionsOf, report, testPolicy, transitions, ttySession } from "./sim.js";

const typing = () => report({ sessions: { sessions: [ttySession(0)] } });
/** A daily stop-by at T0 + 30 min (and every 24 h after), as protocol's nextStopBy would give it. */
const STOP_BY = T0 + 30 * MINUTE;
const dailyStopBy = (nowMs: number) =>
  STOP_BY + Math.max(0, Math.floor((nowMs - STOP_BY) / (24 * HOUR)) + 1) * 24 * HOUR;

function scheduledSim(): Sim {
  const sim = new Sim(testPolicy({ idleTimeoutSeconds: 2 * 3600 }));
  sim.stopBy = dailyStopBy;
  sim.send(typing());
  return sim;
}

const leaseReport = (ageSeconds: number) =>
  report({
    sessions: { sessions: [ttySession(99_999)] },
    leases: { leases: [{ id: "L1", uid: 1000, user: "alice", requestedSeconds: 3600, ageSeconds, confirmed: true }] },
  });

describe("decide: the schedule's stop-by", () => {
  it("wakes at the stop-by time, sends a notice with the grace, and stops an idle VM after it", () => {
    const sim = scheduledSim();
    const before = sim.idleFor(29 * MINUTE);
    expect(before.at(-1)?.wakeAtMs).toBe(STOP_BY);
    const decisions = sim.idleFor(MINUTE + 11 * MINUTE);
    expect(transitions(decisions)).toEqual(["Active→StoppingPending", "StoppingPending→Stopping"]);
    const [notice] = actionsOf(decisions, "notice");
    expect(notice?.reason).toMatch(/stop-by time was reached/);
    expect(notice?.stopInSeconds).toBe(600);
    const noticeAt = decisions.find((d) => d.explanation.to === "StoppingPending")!.explanation.atMs;
    expect(noticeAt).toBe(STOP_BY);
    const [stop] = actionsOf(decisions, "stop");
    expect(stop?.reason).toMatch(/stop-by time was reached and the grace period/);
    // Idle 30 min only: the idle rule alone would not have stopped it.
    expect(sim.record!.clock.lastActivityAtMs).toBe(T0);
  });

  it("activity during the grace cancels it, and the day's stop-by is spent", () => {
    const sim = scheduledSim();
    sim.idleFor(31 * MINUTE);
    expect(sim.state).toBe("StoppingPending");
    sim.now += 2 * MINUTE;
    sim.send(typing());
    expect(sim.state).toBe("Active");
    const later = sim.idleFor(60 * MINUTE);
    expect(actionsOf(later, "stop")).toEqual([]);
    expect(sim.record!.stopByAtMs).toBe(STOP_BY + 24 * HOUR);
  });

  it("a lease holds it; when the lease ends the stop-by notice follows", () => {
    const sim = scheduledSim();
    let age = 0;
    const held = sim.advance(50 * MINUTE, { reportEveryMs: 15 * SECOND, makeReport: () => leaseReport((age += 15)) });
    expect(sim.state).toBe("Active");
    expect(actionsOf(held, "notice")).toEqual([]);
    expect(held.at(-1)?.explanation.reason).toMatch(/stop-by time is reached, but held: .*lease L1/);
    const after = sim.idleFor(5 * MINUTE);
    expect(transitions(after)).toEqual(["Active→StoppingPending"]);
    expect(actionsOf(after, "notice")[0]?.reason).toMatch(/stop-by time was reached/);
  });

  it("observe mode only says what it would do", () => {
    const sim = new Sim(testPolicy({ mode: "observe" }));
    sim.stopBy = dailyStopBy;
    sim.send(typing());
    const decisions = sim.idleFor(45 * MINUTE);
    expect(actionsOf(decisions, "stop")).toEqual([]);
    expect(actionsOf(decisions, "would-stop")[0]?.reason).toMatch(/stop-by time was reached/);
  });

  it("a VM started after the stop-by time waits for the next one", () => {
    const sim = new Sim(testPolicy());
    sim.stopBy = dailyStopBy;
    sim.now = STOP_BY + HOUR;
    sim.send(typing());
    const decisions = sim.idleFor(50 * MINUTE);
    expect(actionsOf(decisions, "notice")).toEqual([]);
    expect(sim.record!.stopByAtMs).toBe(STOP_BY + 24 * HOUR);
  });
});

describe("decide: a stop-by notice when observe turns to enforce", () => {
  it("is withdrawn and sent again as a stop-by notice, not an idle one", () => {
    const sim = new Sim(testPolicy({ mode: "observe", idleTimeoutSeconds: 2 * 3600 }));
    sim.stopBy = dailyStopBy;
    sim.send(typing());
    sim.idleFor(31 * MINUTE);
    expect(sim.state).toBe("StoppingPending");
    sim.policy = testPolicy({ mode: "enforce", idleTimeoutSeconds: 2 * 3600 });
    const decisions = sim.idleFor(MINUTE);
    expect(actionsOf(decisions, "notice-cleared")).toHaveLength(1);
    const [again] = actionsOf(decisions, "notice");
    expect(again).toMatchObject({ mode: "enforce" });
    expect(again?.reason).toMatch(/stop-by time was reached/);
    expect(sim.state).toBe("StoppingPending");
    expect(sim.record!.stopByAtMs).toBe(STOP_BY + 24 * HOUR);
  });
});
