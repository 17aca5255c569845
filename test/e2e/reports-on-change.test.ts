// Reports on change with the shipped artifacts (docs/protocol.md, "Reports on change"): the
// bundled collector and the single-file agent over real gRPC. The agent samples every second
// either way; against a collector that sends no ReportWhen (reportHeartbeat: off, as a collector
// from before it) it sends every sample, against one that does it sends a fraction of them, and
// the fewer Reports never make the healthy agent look lost (agent-lost-after 30 s here: the
// collector's deadline lands before it).
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import {
  agentBundle,
  collectorBundle,
  eventually,
  getText,
  requireBundles,
  start,
  type Proc,
} from "../support/process.js";
import { standaloneCollector } from "../support/standalone.js";

let dir: string;
const running: Proc[] = [];

/** A quiet VM whatever the test machine does: no level of this machine counts as work. */
const POLICY = {
  autostop: "enabled",
  mode: "observe",
  "idle-timeout": "1h",
  "agent-lost-after": "30s",
  "cpu-busy-threshold": "off",
  "user-cpu-threshold": "off",
  "network-threshold": "off",
  "disk-threshold": "off",
  "gpu-utilization-threshold": "off",
};
/** How long each collector watches the agent: longer than agent-lost-after. */
const WATCH_MS = 45_000;

interface Watched {
  reports: number;
  seconds: number;
  states: string[];
  lastReportAgesS: number[];
}

/** Starts a collector with `extra` config and an agent sampling every second, and waits for its first Report. */
async function startPhase(name: string, extra: string, policy: Record<string, string> = POLICY) {
  const phaseDir = path.join(dir, name);
  mkdirSync(phaseDir);
  writeFileSync(path.join(phaseDir, "agent.yaml"), "# flags carry everything\n");
  const setup = await standaloneCollector(phaseDir, { policyDefaults: policy, extra });
  const collector = start(collectorBundle, ["serve", "--config", setup.configFile]);
  running.push(collector);
  await collector.waitFor(/collector serving/);
  const agent = start(
    agentBundle,
    setup.agentRunArgs("e2e", name, [
      "--state-dir",
      path.join(phaseDir, "state"),
      "--socket",
      path.join(phaseDir, "agent.sock"),
    ]),
    { WS_AGENT_TOKEN: setup.token("e2e", name), WS_AGENT_CONFIG: path.join(phaseDir, "agent.yaml") },
  );
  running.push(agent);
  const vm = async () => {
    const { body } = await getText(`http://127.0.0.1:${setup.httpPort}/api/vms`);
    return (JSON.parse(body).vms as Array<{ name: string; state: string; lastReportAtMs?: number }>).find(
      (v) => v.name === name,
    );
  };
  const received = async () => {
    const { body } = await getText(`http://127.0.0.1:${setup.httpPort}/metrics`);
    return Number(body.match(/^workstation_reports_received_total (\d+)/m)?.[1] ?? 0);
  };
  const firstReportAtMs = await eventually(
    async () => (await vm())?.lastReportAtMs,
    30_000,
    `a first report from ${name}`,
  );
  const stop = async () => {
    expect(await agent.stop()).toBe(0);
    expect(await collector.stop()).toBe(0);
  };
  return { setup, vm, received, firstReportAtMs, stop };
}

/** Watches a VM for WATCH_MS from its first Report. */
async function watch(name: string, extra: string): Promise<Watched> {
  const { vm, received, stop } = await startPhase(name, extra);
  const first = await received();
  const began = Date.now();
  const states: string[] = [];
  const lastReportAgesS: number[] = [];
  while (Date.now() - began < WATCH_MS) {
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    const seen = await vm();
    states.push(seen?.state ?? "absent");
    lastReportAgesS.push((Date.now() - (seen?.lastReportAtMs ?? 0)) / 1000);
  }
  const reports = (await received()) - first;
  const seconds = (Date.now() - began) / 1000;
  await stop();
  return { reports, seconds, states, lastReportAgesS };
}

beforeAll(() => {
  requireBundles();
  dir = mkdtempSync(path.join(os.tmpdir(), "ws-e2e-on-change-"));
});

afterEach(async () => {
  await Promise.all(running.splice(0).map((p) => p.stop()));
});

afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

describe("reports on change, as shipped", () => {
  it("a collector without ReportWhen hears every sample; with it, a fraction, and the agent is never lost", async () => {
    const everySample = await watch("vm-every-sample", "reportHeartbeat: off");
    // The default (reportHeartbeat 5m): reports on change.
    const onChange = await watch("vm-on-change", "");

    // Every second against the old way (a loaded machine samples a little slower).
    expect(everySample.reports).toBeGreaterThan(everySample.seconds / 3);
    // On change: a heartbeat before agent-lost-after (30 s less a sample interval and 15 s) and
    // what changed on this machine; at least five times fewer.
    expect(onChange.reports * 5).toBeLessThan(everySample.reports);
    expect(onChange.reports).toBeGreaterThanOrEqual(2);
    // Liveness: Active all along, the last Report never as old as agent-lost-after.
    expect(new Set(onChange.states)).toEqual(new Set(["Active"]));
    expect(Math.max(...onChange.lastReportAgesS)).toBeLessThan(30);
  }, 240_000);
});

describe("the VM page's chart of a quiet VM, as shipped", () => {
  it("keeps a point a minute while the agent stays quiet: the heartbeat carries the minutes", async () => {
    // A 2-minute heartbeat, agent-lost-after far beyond it: the agent holds its samples back for
    // up to two minutes, and the Report that ends the quiet carries the minute in between.
    const { setup, vm, firstReportAtMs, stop } = await startPhase("vm-chart", "reportHeartbeat: 2m", {
      ...POLICY,
      "agent-lost-after": "10m",
    });
    const lastReportAtMs = await eventually(
      async () => {
        const at = (await vm())?.lastReportAtMs ?? 0;
        return at - firstReportAtMs >= 100_000 ? at : undefined;
      },
      240_000,
      "the heartbeat Report",
    );
    const { body } = await getText(`http://127.0.0.1:${setup.httpPort}/api/vms/e2e/vm-chart`);
    const times = (JSON.parse(body).points as Array<{ atMs: number }>)
      .map((p) => p.atMs)
      .filter((at) => at >= firstReportAtMs && at <= lastReportAtMs)
      .sort((a, b) => a - b);
    const gaps = times.slice(1).map((at, i) => at - times[i]!);
    // Without the quiet minutes the chart's only points here would be the two Reports', ~2 minutes apart.
    expect(times.length).toBeGreaterThanOrEqual(3);
    expect(Math.max(...gaps)).toBeLessThanOrEqual(75_000);
    await stop();
  }, 300_000);
});
