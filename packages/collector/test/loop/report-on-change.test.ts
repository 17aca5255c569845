// Reports on change against the live Fleet: an agent that follows the collector's ReportWhen
// (the agent's own gate, report-gate.ts) and one that sends every sample, on the same day of one
// VM, get the same decisions at the same times — notice, cancellation, stop — while the first
// sends a fraction of the Reports.
import { REPORT_ON_CHANGE_CAPABILITY, ReportChange, type Report, type Thresholds } from "@ws/protocol";
import { describe, expect, it } from "vitest";
import {
  contractFrom,
  digestOf,
  type ReportContract,
  type SampleDigest,
  sendReason,
} from "../../../guest-agent/src/agent/report-gate.js";
import { type ChartSample, quietMinutes } from "../../../guest-agent/src/agent/quiet-minutes.js";
import { deriveLinkKey } from "../../src/links/keep-token.js";
import { History } from "../../src/outreach/history.js";
import { parseNotificationsConfig } from "../../src/outreach/notify/config.js";
import { Outreach } from "../../src/outreach/notify/outreach.js";
import { BUILTIN_DEFAULT_POLICY } from "../../src/engine/policy.js";
import type { Policy } from "../../src/engine/types.js";
import { reportFromReadings, type ReportReadings } from "../../src/model/readings.js";
import { DEFAULT_REPORT_HEARTBEAT_MS, reportPlan, tighterThan } from "../../src/loop/report-when.js";
import { startFleet, type TestSession } from "./fleet-harness.js";

const START = Date.parse("2026-05-04T09:00:00Z");
const MIN = 60_000;
const INTERVAL_MS = 15_000;

const policy: Policy = {
  ...BUILTIN_DEFAULT_POLICY,
  autostopEnabled: true,
  mode: "enforce",
  idleTimeoutSeconds: 20 * 60,
  gracePeriodSeconds: 5 * 60,
  reportIntervalSeconds: INTERVAL_MS / 1000,
  thresholds: { ...BUILTIN_DEFAULT_POLICY.thresholds },
};

/** What the VM looks like at a moment: who typed last, what runs, which lease is held. */
interface World {
  readings(atMs: number): ReportReadings;
  /** Samples sent every interval over Reports sent on change, at least (a level counting is heard every sample). */
  fewerBy: number;
  lease?: { takenAtMs: number; expiresAtMs: number };
}

const quiet = (lastActivityAtMs: ReportReadings["lastActivityAtMs"]): ReportReadings => ({
  cpuBusyRatio: 0.02,
  userProcessCpuCores: 0.01,
  networkBytesPerSecond: 300,
  diskBytesPerSecond: 1000,
  gpuCount: 1,
  gpuUtilization: { "0": 0 },
  gpuProcesses: 0,
  jupyterBusyKernels: 0,
  jupyterConnectedKernels: 0,
  idleInhibitors: 0,
  lastActivityAtMs,
});

/** A person types (a keystroke a second) through each of `present`'s spans, and not otherwise. */
function typing(present: Array<[number, number]>): (atMs: number) => ReportReadings {
  return (atMs) => {
    let last: number | undefined;
    for (const [from, to] of present) if (atMs >= from) last = Math.floor(Math.min(atMs, to) / 1000) * 1000;
    return quiet(last === undefined ? {} : { "tty-input": last });
  };
}

const WORLDS: Record<string, World> = {
  "a person types for 40 minutes and leaves: notice, then stop": {
    readings: typing([[START, START + 40 * MIN]]),
    fewerBy: 3,
  },
  "a person comes back while the stop is pending: cancelled at the next sample": {
    readings: typing([
      [START, START + 30 * MIN],
      [START + 52 * MIN + 7_000, START + 70 * MIN],
    ]),
    fewerBy: 3,
  },
  "a GPU job runs from minute 10 to 75, nobody types after minute 5": {
    readings: (atMs) => ({
      ...typing([[START, START + 5 * MIN]])(atMs),
      gpuUtilization: { "0": atMs >= START + 10 * MIN && atMs < START + 75 * MIN ? 0.95 : 0 },
      gpuProcesses: atMs >= START + 10 * MIN && atMs < START + 75 * MIN ? 1 : 0,
    }),
    fewerBy: 1.2,
  },
  "a lease from minute 15 for an hour keeps an idle VM": {
    readings: typing([[START, START + 2 * MIN]]),
    lease: { takenAtMs: START + 15 * MIN, expiresAtMs: START + 75 * MIN },
    fewerBy: 3,
  },
};

const HOURS = 3;

function reportAt(world: World, atMs: number): Report {
  const lease = world.lease && atMs >= world.lease.takenAtMs ? world.lease : undefined;
  return reportFromReadings(world.readings(atMs), atMs, {
    intervalSeconds: INTERVAL_MS / 1000,
    ...(lease ? { lease } : {}),
  });
}

/**
 * Runs one VM for HOURS, or until it is stopped (its agent stops with it), with an agent that
 * samples every interval; returns what the collector did and how many Reports it got.
 */
async function run(world: World, onChange: boolean, chart?: { history: History; quietMinutes: boolean }) {
  // With a chart: the collector's real outreach keeps the VM page's history (its chart points).
  const observer = chart
    ? new Outreach({
        config: parseNotificationsConfig({}, []),
        log: () => {},
        metadataFor: () => ({ labels: {}, annotations: {} }),
        prefix: "workstation.aik8s.run/",
        linkKey: deriveLinkKey(Buffer.from("a collector token key of enough length, for tests")),
        history: chart.history,
      })
    : undefined;
  const live = startFleet(policy, START, undefined, observer ? { observer } : {});
  const vm = { namespace: "lab", name: "ws" };
  const session: TestSession = live.connect(vm, onChange ? [REPORT_ON_CHANGE_CAPABILITY] : []);
  // The agent's side: the contract of the newest Directive, the collector's thresholds, what it sent last.
  const send = session.send.bind(session);
  let contract: ReportContract | undefined;
  let thresholds: Thresholds | undefined;
  session.send = (directive) => {
    send(directive);
    if (directive.policy?.thresholds) thresholds = directive.policy.thresholds;
    if (directive.reportWhen) contract = contractFrom(directive.reportWhen, live.clock.nowMs);
  };
  let sent: SampleDigest | undefined;
  // The agent's chart samples (runtime.ts): the last one sent, those held back since.
  let sentSample: ChartSample | undefined;
  let held: ChartSample[] = [];
  let reports = 0;
  for (let atMs = START; atMs <= START + HOURS * 60 * MIN; atMs += INTERVAL_MS) {
    await live.clock.advanceTo(atMs);
    if (live.stops.length > 0) break;
    const report = reportAt(world, atMs);
    const digest = digestOf(report, atMs, thresholds);
    if (sendReason(contract, sent, digest, atMs, INTERVAL_MS) === undefined) {
      held.push({ takenAtMs: atMs, activityAtMs: digest.activityAtMs });
      continue;
    }
    if (chart?.quietMinutes && contract && sentSample) report.quietMinutes = quietMinutes(sentSample, held, atMs);
    sent = digest;
    sentSample = { takenAtMs: atMs, activityAtMs: digest.activityAtMs };
    held = [];
    reports++;
    live.report(session, report);
  }
  const story = live.transitions.map(
    (t) =>
      `${(t.atMs - START) / 1000}s ${t.from}→${t.to} ${t.decision.actions
        .map((a) => a.kind)
        .filter((kind) => kind !== "persist")
        .join(",")}`,
  );
  return { story, stops: live.stops.map((s) => s.atMs - START), reports };
}

describe("reports on change against the live collector", () => {
  it.each(Object.keys(WORLDS))("%s: the same decisions at the same times, far fewer Reports", async (name) => {
    const world = WORLDS[name]!;
    const everySample = await run(world, false);
    const onChange = await run(world, true);
    expect(onChange.story).toEqual(everySample.story);
    expect(onChange.stops).toEqual(everySample.stops);
    expect(onChange.reports * world.fewerBy).toBeLessThan(everySample.reports);
  });

  it("the stories are the ones each world tells", async () => {
    const stop = await run(WORLDS["a person types for 40 minutes and leaves: notice, then stop"]!, true);
    // Last keystroke at 40:00; notice at 60:00 (idle-timeout 20m), stop 5 minutes later.
    expect(stop.stops).toEqual([65 * MIN]);
    const back = await run(
      WORLDS["a person comes back while the stop is pending: cancelled at the next sample"]!,
      true,
    );
    // Notice at 50:00; the keystroke at 52:07 is reported by the sample at 52:15, which cancels it.
    expect(back.story.some((line) => line.startsWith(`${52 * 60 + 15}s StoppingPending→Active`))).toBe(true);
    expect(back.stops).toEqual([(70 + 20 + 5) * MIN]);
  });

  it("a person typing all day costs a handful of Reports an hour", async () => {
    const allDay: World = { readings: typing([[START, START + 10 * 60 * MIN]]), fewerBy: 15 };
    const { reports, stops } = await run(allDay, true);
    expect(stops).toEqual([]);
    // 240 samples an hour; a Report every 4.5 minutes (agent-lost-after 5m less the margin).
    expect(reports / HOURS).toBeLessThanOrEqual(14);
  });
});

describe("the VM page's chart while the agent stays quiet", () => {
  const vm = { namespace: "lab", name: "ws" };
  /** The minutes of the run (after the first) with no chart point in them, and those with one that shows no activity. */
  function gaps(history: History) {
    const points = history.points(vm, START);
    const empty: number[] = [];
    const idle: number[] = [];
    for (let minute = 1; minute < HOURS * 60; minute++) {
      const inMinute = points.filter((p) => p.atMs > START + (minute - 1) * MIN && p.atMs <= START + minute * MIN);
      if (inMinute.length === 0) empty.push(minute);
      else if (inMinute.every((p) => p.activeSignals === 0)) idle.push(minute);
    }
    return { empty, idle };
  }
  const allDay: World = { readings: typing([[START, START + 10 * 60 * MIN]]), fewerBy: 15 };

  it("keeps a point a minute, with the person's activity in it, from the heartbeat's quiet minutes", async () => {
    const history = new History();
    const { reports } = await run(allDay, true, { history, quietMinutes: true });
    expect(reports / HOURS).toBeLessThanOrEqual(14);
    expect(gaps(history)).toEqual({ empty: [], idle: [] });
    // The idle clock the chart draws stays near zero all along: a person types every second.
    const clocks = history
      .points(vm, START)
      .map((p) => p.idleSeconds)
      .filter(Number.isFinite);
    expect(clocks.length).toBeGreaterThanOrEqual(HOURS * 60);
    expect(Math.max(...clocks)).toBeLessThanOrEqual(INTERVAL_MS / 1000 + 1);
  });

  it("without them (an old agent's Reports on change), minutes go missing", async () => {
    const history = new History();
    await run(allDay, true, { history, quietMinutes: false });
    expect(gaps(history).empty.length).toBeGreaterThan(HOURS * 30);
  });
});

describe("reportPlan", () => {
  it("asks for every sample unless the VM is Active with nothing that needs it", async () => {
    const live = startFleet(policy, START);
    const session = live.connect({ namespace: "lab", name: "ws" }, [REPORT_ON_CHANGE_CAPABILITY]);
    live.report(session, reportAt(WORLDS["a person types for 40 minutes and leaves: notice, then stop"]!, START));
    const decision = live.fleet.loopState(session.vm)!.lastDecision!;
    const plan = reportPlan(decision, policy, START, DEFAULT_REPORT_HEARTBEAT_MS);
    // The earliest next moment is agent-lost-after (5 minutes) after this Report: 30 s before it.
    expect(plan).toEqual({
      kind: "by",
      reportByMs: START + 5 * MIN - INTERVAL_MS - 15_000,
      atOnce: [ReportChange.VETO, ReportChange.LEASE, ReportChange.SOURCE, ReportChange.SESSION, ReportChange.DISK],
    });
    expect(session.directives.at(-1)?.reportWhen?.nextReportWithinSeconds).toBe(270);
    expect(reportPlan(decision, policy, START, 60_000)).toMatchObject({ reportByMs: START + 60_000 });
    const pending = { ...decision, next: { ...decision.next, state: "StoppingPending" as const } };
    expect(reportPlan(pending, policy, START, DEFAULT_REPORT_HEARTBEAT_MS).kind).toBe("every-sample");
    const near = { ...decision, wakeAtMs: START + 40_000 };
    expect(reportPlan(near, policy, START, DEFAULT_REPORT_HEARTBEAT_MS).kind).toBe("every-sample");
  });

  it("while a start waits for the entry service, every sample, whatever the decision; then on change again", () => {
    let starting = true;
    const live = startFleet(policy, START, undefined, {
      hearEverySample: () => (starting ? "a start waits for the entry service" : undefined),
    });
    const session = live.connect({ namespace: "lab", name: "ws" }, [REPORT_ON_CHANGE_CAPABILITY]);
    const world = WORLDS["a person types for 40 minutes and leaves: notice, then stop"]!;
    live.report(session, reportAt(world, START));
    // A ReportWhen without a deadline: every sample (sshd coming up is not a kind of change).
    expect(session.directives.at(-1)?.reportWhen).toMatchObject({ reportAtOnce: [] });
    expect(session.directives.at(-1)?.reportWhen?.nextReportWithinSeconds).toBeUndefined();
    starting = false;
    live.report(session, reportAt(world, START + INTERVAL_MS));
    expect(session.directives.at(-1)?.reportWhen?.nextReportWithinSeconds).toBeGreaterThan(60);
  });

  it("an old agent (no capability) is never sent a ReportWhen", () => {
    const live = startFleet(policy, START);
    const session = live.connect({ namespace: "lab", name: "ws" });
    live.report(session, reportAt(WORLDS["a person types for 40 minutes and leaves: notice, then stop"]!, START));
    expect(session.directives.length).toBeGreaterThan(0);
    expect(session.directives.every((d) => d.reportWhen === undefined)).toBe(true);
  });

  it("a looser plan waits for the next answer; a tighter one is sent at once", () => {
    const by = (reportByMs: number, atOnce = [ReportChange.VETO]) => ({ kind: "by" as const, reportByMs, atOnce });
    expect(tighterThan(by(100_000), undefined)).toBe(false);
    expect(tighterThan({ kind: "every-sample", why: "" }, by(100_000))).toBe(true);
    expect(tighterThan(by(50_000), by(100_000))).toBe(true);
    expect(tighterThan(by(200_000), by(100_000))).toBe(false);
    expect(tighterThan(by(100_000, [ReportChange.VETO, ReportChange.DISK]), by(100_000))).toBe(true);
  });
});
