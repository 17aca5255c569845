// The schedule's loop edge (issue 36): which pass fires a start, that an invalid schedule fires
// nothing and is reported once, that a refused start is retried, and that a start that cannot be
// placed tells the owner once and again when it is placed. The clock is a variable.
import { describe, expect, it } from "vitest";
import { ScheduleRunner } from "../../../src/comeback/schedule/runner.js";
import { scheduleStatus } from "../../../src/comeback/schedule/schedules.js";
import type { StartFacts, StartPlatform, StartResult } from "../../../src/comeback/start/platform.js";
import type { AuthorizedStart } from "../../../src/comeback/start/handler.js";

const PREFIX = "workstation.aik8s.run/";
const VM = { namespace: "team", name: "alice-gpu" };

function harness(
  annotations: Record<string, string>,
  startResult: StartResult = { ok: true, already: false, message: "ok" },
) {
  let now = Date.parse("2026-12-07T07:40:00Z"); // Monday 08:40 in Berlin
  const facts: StartFacts = {
    owner: "alice",
    runStrategy: "Manual",
    status: "Stopped",
    allocates: [],
    wantsToRun: false,
    instance: null,
    lastStop: null,
    labels: {},
    annotations,
  };
  const starts: AuthorizedStart[] = [];
  const audits: string[] = [];
  const told: string[] = [];
  let result = startResult;
  const platform: StartPlatform = {
    list: () => [VM],
    facts: () => facts,
    start: async () => result,
  };
  const runner = new ScheduleRunner({
    platform,
    start: async (request) => {
      starts.push(request);
      return platform.start(request.vm);
    },
    prefix: PREFIX,
    siteZone: "UTC",
    nowMs: () => now,
    leader: () => true,
    catchUpMs: 15 * 60_000,
    retryMs: 60_000,
    giveUpMs: 3600_000,
    audit: (_vm, type, reason, message) => audits.push(`${type} ${reason}: ${message}`),
    tellOwner: (_vm, message) => told.push(message),
    log: () => {},
  });
  return {
    facts,
    starts,
    audits,
    told,
    runner,
    advance: async (ms: number) => {
      now += ms;
      await runner.pass();
    },
    setResult: (next: StartResult) => {
      result = next;
    },
  };
}

describe("ScheduleRunner", () => {
  it("starts the stopped VM on the pass that crosses its time in the owner's zone, once", async () => {
    const h = harness({
      [`${PREFIX}schedule`]: "weekdays 08:45",
      [`${PREFIX}time-zone`]: "Europe/Berlin",
    });
    await h.advance(4 * 60_000); // 08:44
    expect(h.starts).toEqual([]);
    await h.advance(60_000); // 08:45
    expect(h.starts).toEqual([{ vm: VM, by: "its schedule (weekdays 08:45)", trigger: "schedule" }]);
    h.facts.wantsToRun = true;
    h.facts.instance = { phase: "Running", nodeName: "n1", createdAtMs: 0, phaseTimes: {}, unschedulable: null };
    await h.advance(60_000);
    expect(h.starts).toHaveLength(1);
    expect(h.told).toEqual([]);
  });

  it("does not start a VM that is already running", async () => {
    const h = harness({ [`${PREFIX}schedule`]: "daily 07:45" });
    h.facts.wantsToRun = true;
    await h.advance(10 * 60_000);
    expect(h.starts).toEqual([]);
  });

  it("an invalid schedule starts nothing and is reported once", async () => {
    const h = harness({ [`${PREFIX}schedule`]: "weekdyas 08:45", [`${PREFIX}time-zone`]: "Europe/Berlin" });
    await h.advance(10 * 60_000);
    await h.advance(10 * 60_000);
    expect(h.starts).toEqual([]);
    expect(h.audits).toEqual([
      'Warning ScheduleInvalid: the schedule "weekdyas 08:45" is not applied (nothing is started or stopped for it): "weekdyas" is not a day; did you mean weekdays? (days: weekdays, weekends, daily, mon…sun, ranges like mon-thu)',
    ]);
    expect(scheduleStatus(h.facts.annotations, PREFIX, "UTC", 0)).toMatchObject({ valid: false });
  });

  it("retries a refused start and gives up after an hour, telling the owner", async () => {
    const h = harness({ [`${PREFIX}schedule`]: "daily 07:45" }, { ok: false, message: "the API server said 503" });
    await h.advance(5 * 60_000);
    expect(h.starts).toHaveLength(1);
    await h.advance(30_000);
    expect(h.starts).toHaveLength(1);
    await h.advance(30_000);
    expect(h.starts).toHaveLength(2);
    for (let i = 0; i < 60; i++) await h.advance(60_000);
    expect(h.audits.at(-1)).toMatch(/ScheduledStartFailed: .*given up 61 min after its time: the API server said 503/);
    expect(h.told).toHaveLength(1);
    const count = h.starts.length;
    await h.advance(60_000);
    expect(h.starts).toHaveLength(count);
  });

  it("a start that cannot be placed stays asked for and tells the owner, then says when it is placed", async () => {
    const h = harness({ [`${PREFIX}schedule`]: "daily 07:45" });
    await h.advance(5 * 60_000);
    expect(h.starts).toHaveLength(1);
    h.facts.wantsToRun = true;
    h.facts.instance = {
      phase: "Scheduling",
      nodeName: null,
      createdAtMs: 0,
      phaseTimes: {},
      unschedulable: { reason: "Unschedulable", message: "0/3 nodes have free nvidia.com/A100", sinceMs: null },
    };
    await h.advance(30_000);
    await h.advance(30_000);
    expect(h.starts).toHaveLength(1);
    expect(h.told).toEqual([
      "the scheduled start of team/alice-gpu (daily 07:45) cannot be placed yet: Unschedulable: 0/3 nodes have free nvidia.com/A100; it stays asked for and starts as soon as there is room",
    ]);
    h.facts.instance = { ...h.facts.instance, nodeName: "gpu-2", unschedulable: null };
    await h.advance(30_000);
    expect(h.told.at(-1)).toBe("the scheduled start of team/alice-gpu is placed now, 2 min after its time");
  });

  it("a standby fires nothing and does not make up the start when it becomes leader later", async () => {
    let leader = false;
    const h = harness({ [`${PREFIX}schedule`]: "daily 07:45" });
    (h.runner as unknown as { options: { leader: () => boolean } }).options.leader = () => leader;
    await h.advance(6 * 60_000);
    leader = true;
    await h.advance(60_000);
    expect(h.starts).toEqual([]);
  });
});
