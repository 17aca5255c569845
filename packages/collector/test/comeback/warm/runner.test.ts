// The learned warm start's loop edge (issue 36 item 2): the pure plan per VM (plan.ts) and the
// runner that carries it out, on a fake clock in Europe/Berlin across the daylight saving change.
// The platform is a table of annotations the runner writes to, as the VM's annotations are; a
// collector restart is a new runner over the same annotations.
import { describe, expect, it } from "vitest";
import type { AuthorizedStart } from "../../../src/comeback/start/handler.js";
import type { StartFacts, StartPlatform, StartResult } from "../../../src/comeback/start/platform.js";
import { noteShortages, planWarmStart, resourceShort, type WarmVmInput } from "../../../src/comeback/warm/plan.js";
import { encodeReturns, parseReturns, type ReturnRecord } from "../../../src/comeback/warm/returns.js";
import { DEFAULT_WARM_LIMITS, localTimeIn } from "../../../src/comeback/warm/rule.js";
import { WarmRunner } from "../../../src/comeback/warm/runner.js";
import {
  boundedWarmStarts,
  encodeWarmStarts,
  parseWarmStarts,
  warmWaitingPolicy,
} from "../../../src/comeback/warm/starts.js";
import { BUILTIN_DEFAULT_POLICY } from "../../../src/engine/policy.js";
import type { Policy } from "../../../src/engine/types.js";
import { berlinAt, weekdayPattern } from "../../fixtures/berlin-returns.js";

const PREFIX = "workstation.aik8s.run/";
const VM = { namespace: "team", name: "ada" };
const OTHER = { namespace: "team", name: "bob" };
const berlin = localTimeIn("Europe/Berlin");
const MIN = 60_000;
const DAY = 24 * 3600_000;

const ON: Policy = { ...BUILTIN_DEFAULT_POLICY, warmStart: true, warmStartWindowSeconds: 20 * 60 };

function facts(annotations: Record<string, string>, more: Partial<StartFacts> = {}): StartFacts {
  return {
    owner: "ada",
    runStrategy: "Manual",
    status: "Stopped",
    allocates: [],
    needs: ["nvidia.com/A100"],
    wantsToRun: false,
    instance: null,
    lastStop: null,
    labels: {},
    annotations,
    ...more,
  };
}

/** A fleet of VMs whose annotations the runner writes; `restart()` is a new runner over the same VMs. */
function harness(options: { policy?: Policy; errors?: boolean; startResult?: StartResult } = {}) {
  let now = berlinAt(2026, 3, 30, 8, 40); // Monday, the day after the DST change
  const vms = new Map<string, StartFacts>([
    [
      VM.name,
      facts({ [`${PREFIX}time-zone`]: "Europe/Berlin", [`${PREFIX}returns`]: encodeReturns(weekdayPattern()) }),
    ],
  ]);
  const starts: AuthorizedStart[] = [];
  const audits: string[] = [];
  const returns: ReturnRecord[] = [];
  const foundWarm: number[] = [];
  let lastHumanAtMs: number | undefined;
  const platform: StartPlatform = {
    list: () => [...vms.keys()].map((name) => ({ namespace: "team", name })),
    facts: (vm) => vms.get(vm.name),
    start: async () => options.startResult ?? { ok: true, already: false, message: "start accepted" },
    writeAnnotations: async (vm, annotations) => {
      const f = vms.get(vm.name)!;
      for (const [name, value] of Object.entries(annotations))
        if (value === null) delete f.annotations[`${PREFIX}${name}`];
        else f.annotations[`${PREFIX}${name}`] = value;
      return { ok: true, message: "patched" };
    },
    recordReturn: async (_vm, record) => {
      returns.push(record);
      return undefined;
    },
  };
  const make = () =>
    new WarmRunner({
      platform,
      start: async (request) => {
        starts.push(request);
        // The start is asked for after the warm start is on the VM: a crash in between never fires twice.
        expect(parseWarmStarts(vms.get(request.vm.name)!.annotations[`${PREFIX}warm-starts`]).at(-1)?.outcome).toBe(
          "waiting",
        );
        const result = await platform.start(request.vm);
        if (result.ok) vms.get(request.vm.name)!.wantsToRun = true;
        return result;
      },
      prefix: PREFIX,
      siteZone: "UTC",
      policyOf: () => ({ policy: options.policy ?? ON, errors: options.errors ?? false }),
      lastHumanAtMs: () => lastHumanAtMs,
      nowMs: () => now,
      leader: () => true,
      audit: (_vm, type, reason, message) => audits.push(`${type} ${reason}: ${message}`),
      foundWarm: (_vm, atMs) => foundWarm.push(atMs),
      log: () => {},
    });
  let runner = make();
  return {
    vms,
    starts,
    audits,
    returns,
    foundWarm,
    get runner() {
      return runner;
    },
    get now() {
      return now;
    },
    at: async (ms: number) => {
      now = ms;
      await runner.pass();
    },
    restart: () => {
      runner = make();
    },
    human: (ms: number) => {
      lastHumanAtMs = ms;
    },
    warmStarts: () => parseWarmStarts(vms.get(VM.name)!.annotations[`${PREFIX}warm-starts`]),
  };
}

describe("the warm-start runner (fake clock, Europe/Berlin, the Monday after the DST change)", () => {
  it("starts the stopped VM once, ahead of the usual arrival, through the start path as trigger warm; a restart does not fire it again", async () => {
    const h = harness();
    await h.at(berlinAt(2026, 3, 30, 8, 43)); // lead 5 min before 08:49: not yet
    expect(h.starts).toEqual([]);
    // 08:44 CEST is 06:44 UTC: the pattern learned in CET (07:4x UTC) is followed in local time.
    await h.at(berlinAt(2026, 3, 30, 8, 44));
    expect(new Date(h.now).toISOString()).toBe("2026-03-30T06:44:00.000Z");
    expect(h.starts).toEqual([
      { vm: VM, by: "a learned warm start (usual arrival 08:49, ready 5 min ahead)", trigger: "warm" },
    ]);
    expect(h.warmStarts()).toEqual([{ atMs: berlinAt(2026, 3, 30, 8, 44), outcome: "waiting" }]);
    // The VM was stopped again by someone else meanwhile; a restarted collector reads the annotation.
    h.vms.get(VM.name)!.wantsToRun = false;
    h.restart();
    await h.at(berlinAt(2026, 3, 30, 8, 47));
    await h.at(berlinAt(2026, 3, 30, 8, 48));
    expect(h.starts).toHaveLength(1);
    expect(h.warmStarts()).toEqual([{ atMs: berlinAt(2026, 3, 30, 8, 44), outcome: "wasted" }]);
  });

  it("nobody comes: once it is stopped again it is waste, counted once, and the next weekday warms it again", async () => {
    const h = harness();
    const warmAt = berlinAt(2026, 3, 30, 8, 44);
    await h.at(warmAt);
    await h.at(warmAt + 10 * MIN); // still running, nobody yet
    expect(h.runner.counts).toEqual({ used: 0, wasted: 0 });
    // The engine stopped it (its window as idle-timeout, then notice and grace): the last-stop record says so.
    const f = h.vms.get(VM.name)!;
    f.wantsToRun = false;
    f.lastStop = { atMs: warmAt + 25 * MIN } as StartFacts["lastStop"];
    await h.at(warmAt + 26 * MIN);
    expect(h.runner.counts).toEqual({ used: 0, wasted: 1 });
    expect(h.warmStarts()).toEqual([{ atMs: warmAt, outcome: "wasted" }]);
    expect(h.audits).toEqual([
      "Normal WarmStartWasted: the learned warm start was not used: nobody came within its window and it was stopped again",
    ]);
    await h.at(warmAt + 27 * MIN);
    expect(h.runner.counts.wasted).toBe(1);
    // Tuesday: arrival median 08:49 again (10, 17, 24 March: 08:49, 08:53, 08:45).
    await h.at(berlinAt(2026, 3, 31, 8, 44));
    expect(h.starts).toHaveLength(2);
  });

  it("a person's first activity while it runs makes it used: counted, and kept as their return (trigger warm, no wait)", async () => {
    const h = harness();
    const warmAt = berlinAt(2026, 3, 30, 8, 44);
    await h.at(warmAt);
    // The old boot's clock, then the new boot's first Report (where the engine starts every clock): nobody yet.
    h.human(berlinAt(2026, 3, 30, 7, 0));
    await h.at(berlinAt(2026, 3, 30, 8, 46));
    h.human(berlinAt(2026, 3, 30, 8, 47));
    await h.at(berlinAt(2026, 3, 30, 8, 48));
    expect(h.runner.counts).toEqual({ used: 0, wasted: 0 });
    // A keystroke later: a person.
    h.human(berlinAt(2026, 3, 30, 8, 51));
    await h.at(berlinAt(2026, 3, 30, 8, 52));
    expect(h.runner.counts).toEqual({ used: 1, wasted: 0 });
    expect(h.warmStarts()).toEqual([{ atMs: warmAt, outcome: "used" }]);
    expect(h.returns).toEqual([{ atMs: berlinAt(2026, 3, 30, 8, 51), trigger: "warm", waitSeconds: 0 }]);
    expect(h.foundWarm).toEqual([berlinAt(2026, 3, 30, 8, 51)]);
    expect(h.audits[0]).toMatch(/^Normal WarmStartUsed/);
  });

  it("says on the VM page what the rule says now, and a page read moves nothing (the person's baseline stays the pass's)", async () => {
    const h = harness();
    // Monday 08:40.
    expect(h.runner.status(VM)).toEqual({
      on: true,
      now: "not yet: usual arrival 08:49, start from 08:44",
      lastWeek: { used: 0, wasted: 0 },
      returns: weekdayPattern().length,
    });
    const warmAt = berlinAt(2026, 3, 30, 8, 44);
    expect(h.runner.waitingSince(VM)).toBeUndefined();
    await h.at(warmAt);
    // The loop hears every sample and applies the warm window while it waits (the pass's record).
    expect(h.runner.waitingSince(VM)).toBe(warmAt);
    // The new boot's first Report: status reads between passes take no baseline of their own.
    h.human(berlinAt(2026, 3, 30, 8, 46));
    expect(h.runner.status(VM)).toMatchObject({ waitingSinceMs: warmAt, now: "warm-started: waiting for its person" });
    await h.at(berlinAt(2026, 3, 30, 8, 47));
    h.human(berlinAt(2026, 3, 30, 8, 50));
    expect(h.runner.status(VM)?.waitingSinceMs).toBe(warmAt);
    await h.at(berlinAt(2026, 3, 30, 8, 51));
    expect(h.runner.counts).toEqual({ used: 1, wasted: 0 });
    expect(h.runner.waitingSince(VM)).toBeUndefined();
    expect(h.runner.status(VM)).toMatchObject({ on: true, lastWeek: { used: 1, wasted: 0 } });
    expect(h.runner.status(VM)?.waitingSinceMs).toBeUndefined();
    // Not opted in and no record: nothing to say. The owner's off: said.
    expect(harness({ policy: BUILTIN_DEFAULT_POLICY }).runner.status(VM)).toBeUndefined();
    const off = harness();
    off.vms.get(VM.name)!.annotations[`${PREFIX}warm-start`] = "off";
    expect(off.runner.status(VM)).toMatchObject({ on: false, now: "the owner turned warm starts off" });
  });

  it("a start request that found it up (a recorded return) makes it used, and no second return is kept", async () => {
    const h = harness();
    const warmAt = berlinAt(2026, 3, 30, 8, 44);
    await h.at(warmAt);
    const f = h.vms.get(VM.name)!;
    const arrived = { atMs: berlinAt(2026, 3, 30, 8, 50), trigger: "link" as const, waitSeconds: 0 };
    f.annotations[`${PREFIX}returns`] = encodeReturns([...parseReturns(f.annotations[`${PREFIX}returns`]), arrived]);
    h.human(berlinAt(2026, 3, 30, 8, 55));
    await h.at(berlinAt(2026, 3, 30, 8, 56));
    expect(h.runner.counts).toEqual({ used: 1, wasted: 0 });
    expect(h.returns).toEqual([]);
  });

  it("never for a VM whose owner turned it off, whose policy has errors, or whose profile did not opt in", async () => {
    const off = harness();
    off.vms.get(VM.name)!.annotations[`${PREFIX}warm-start`] = "off";
    const errors = harness({ errors: true });
    const notIn = harness({ policy: BUILTIN_DEFAULT_POLICY });
    for (const h of [off, errors, notIn]) {
      await h.at(berlinAt(2026, 3, 30, 8, 44));
      await h.at(berlinAt(2026, 3, 30, 8, 46));
      expect(h.starts).toEqual([]);
      expect(h.warmStarts()).toEqual([]);
    }
  });

  it("never while a start needing the same GPU could not be placed in the last 30 minutes", async () => {
    const h = harness();
    h.vms.set(
      OTHER.name,
      facts(
        {},
        {
          wantsToRun: true,
          instance: {
            phase: "Pending",
            nodeName: null,
            createdAtMs: null,
            phaseTimes: {},
            unschedulable: {
              reason: "Unschedulable",
              message: "0/3 nodes: Insufficient nvidia.com/A100",
              sinceMs: null,
            },
          },
        },
      ),
    );
    await h.at(berlinAt(2026, 3, 30, 8, 30));
    // Placed since: the shortage is remembered for 30 minutes, past the usual arrival.
    h.vms.get(OTHER.name)!.instance = null;
    await h.at(berlinAt(2026, 3, 30, 8, 44));
    await h.at(berlinAt(2026, 3, 30, 8, 48));
    expect(h.starts).toEqual([]);
  });

  it("a start the platform refused leaves no warm start recorded (a later pass may try), and says so", async () => {
    const h = harness({ startResult: { ok: false, message: "HTTP 500" } });
    await h.at(berlinAt(2026, 3, 30, 8, 44));
    expect(h.starts).toHaveLength(1);
    expect(h.warmStarts()).toEqual([]);
    expect(h.audits).toEqual(["Warning WarmStartFailed: the learned warm start could not be made: HTTP 500"]);
    await h.at(berlinAt(2026, 3, 30, 8, 45));
    expect(h.starts).toHaveLength(2);
  });
});

describe("the plan's bounds, from the annotation alone", () => {
  const records = weekdayPattern();
  const input = (nowMs: number, starts: WarmVmInput["starts"]): WarmVmInput => ({
    nowMs,
    policy: ON,
    policyErrors: false,
    ownerOff: false,
    running: false,
    returns: records,
    starts,
    local: berlin,
    resourceShort: false,
    limits: DEFAULT_WARM_LIMITS,
  });

  it("once a day and at most N a week, counted from the warm starts kept on the VM", () => {
    const monday = berlinAt(2026, 3, 30, 8, 45);
    const today = [{ atMs: berlinAt(2026, 3, 30, 6, 0), outcome: "wasted" as const }];
    expect(planWarmStart(input(monday, today))).toEqual({ kind: "none", reason: "already warm-started today" });
    const fiveThisWeek = [24, 25, 26, 27, 28].map((d) => ({
      atMs: berlinAt(2026, 3, d, 8, 40),
      outcome: "used" as const,
    }));
    expect(planWarmStart(input(monday, fiveThisWeek))).toEqual({
      kind: "none",
      reason: "5 warm starts in 7 days (at most 5)",
    });
    // A week later the oldest has aged out of the 7 days.
    const fourThisWeek = fiveThisWeek.slice(1);
    expect(planWarmStart(input(monday, fourThisWeek))).toMatchObject({ kind: "start" });
  });

  it("the record round-trips, skips what does not parse and stays bounded", () => {
    const t0 = berlinAt(2026, 3, 2, 9, 0);
    const many = Array.from({ length: 40 }, (_, i) => ({ atMs: t0 + i * 3600_000, outcome: "wasted" as const }));
    const kept = boundedWarmStarts(many, t0 + 40 * 3600_000);
    expect(kept).toHaveLength(16);
    expect(parseWarmStarts(`${encodeWarmStarts(kept)} junk 12q`)).toEqual(kept);
    expect(boundedWarmStarts(kept, t0 + 30 * DAY)).toEqual([]);
  });

  it("a shortage is the resources of a start the scheduler could not place, for 30 minutes", () => {
    const shortages = new Map<string, number>();
    noteShortages(shortages, [{ needs: ["nvidia.com/A100"] }], 0);
    expect(resourceShort(shortages, ["nvidia.com/A100"], 29 * MIN)).toBe(true);
    expect(resourceShort(shortages, ["nvidia.com/H100"], 29 * MIN)).toBe(false);
    expect(resourceShort(shortages, [], 29 * MIN)).toBe(false);
    noteShortages(shortages, [], 31 * MIN);
    expect(resourceShort(shortages, ["nvidia.com/A100"], 31 * MIN)).toBe(false);
  });

  it("while a warm start waits, the engine runs the VM under the window as its idle-timeout", () => {
    const policy = { ...ON, idleTimeoutSeconds: 2 * 3600 };
    const waiting = [{ atMs: 0, outcome: "waiting" as const }];
    expect(warmWaitingPolicy(policy, waiting).idleTimeoutSeconds).toBe(20 * 60);
    expect(warmWaitingPolicy(policy, [{ atMs: 0, outcome: "used" }])).toBe(policy);
    expect(warmWaitingPolicy(policy, [])).toBe(policy);
    // The default window is 30m; a VM whose idle-timeout is shorter keeps its own.
    expect(warmWaitingPolicy({ ...BUILTIN_DEFAULT_POLICY }, waiting).idleTimeoutSeconds).toBe(30 * 60);
    expect(warmWaitingPolicy({ ...policy, idleTimeoutSeconds: 600 }, waiting).idleTimeoutSeconds).toBe(600);
  });
});
