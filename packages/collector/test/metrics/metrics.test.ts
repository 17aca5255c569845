// The /metrics registry over a plain FleetReader: values, series that leave
// with their VM, histograms drained from the stats, promtool's lint, and the
// docs listing every metric.
import { spawnSync } from "node:child_process";
import { registerHostSourceMetrics } from "../../src/loop/hostside/metrics.js";
import { registerNotificationMetrics } from "../../src/outreach/notify/metrics.js";
import { vmView } from "../fixtures/vm-view.js";
import { registerWarmMetrics } from "../../src/comeback/warm/runner.js";
import { registerStartMetrics } from "../../src/comeback/start/metrics.js";
import { registerSpendMetrics } from "../../src/metrics/spend-metrics.js";
import { StartTracker } from "../../src/comeback/start/tracker.js";
import { WebhookSender } from "../../src/outreach/notify/sender.js";
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import {
  VM_SERIES_BUDGET,
  createMetrics,
  metricNames,
  warmPerVmSeries,
  type VmSeriesSet,
} from "../../src/metrics/metrics.js";
import { CollectorStats } from "../../src/lib/stats.js";
import type { FleetCounters, FleetReader, VmSeriesSource, VmView } from "../../src/model/vm-view.js";

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../../..");
const NOW = 1_700_000_000_000;

function view(name: string, overrides: Partial<VmView> = {}): VmView {
  return vmView(name, {
    agentVersion: "0.1.0",
    peer: "10.0.0.7:40000",
    lastReportAtMs: NOW - 2_000,
    lastActivityAtMs: NOW - 600_000,
    idleSeconds: 600,
    idleTimeoutSeconds: 7200,
    stopDeadlineMs: NOW + 7_200_000,
    activeSignals: ["tty-input"],
    signals: { tty: true, jupyter: false, gpu: false },
    explanation: "Active",
    gpus: [{ gpu: "0", utilizationRatio: 0.42 }],
    disks: [{ mount: "/", usedRatio: 0.73 }],
    leases: [{ id: "l1", user: "ada", uid: 1000, reason: "training", expiresAtMs: NOW + 3_600_000, clamped: false }],
    gpuCount: 2,
    readings: {
      cpuBusyRatio: 0.25,
      userProcessCpuCores: 1.5,
      networkBytesPerSecond: 2048,
      diskBytesPerSecond: 4096,
      gpuCount: 2,
      gpuUtilization: { "0": 0.42 },
      gpuProcesses: 1,
      jupyterBusyKernels: 1,
      jupyterConnectedKernels: 2,
      idleInhibitors: 0,
      lastActivityAtMs: { "tty-input": NOW - 600_000, "code-server": NOW - 30_000 },
    },
    ...overrides,
  });
}

class StubFleet implements FleetReader {
  vms: VmView[] = [];
  readonly counterValues: FleetCounters = {
    stops: new Map([
      ["idle|enforce", 3],
      ["idle|observe", 5],
    ]),
    notices: 9,
    stopsCancelled: 4,
    leasesGranted: 2,
    policyErrors: 1,
  };
  views(): VmView[] {
    return this.vms;
  }
  counters(): FleetCounters {
    return this.counterValues;
  }
}

function setup(options: { leader?: () => boolean; vmSeries?: () => VmSeriesSet } = {}) {
  const fleet = new StubFleet();
  const stats = new CollectorStats();
  const registry = createMetrics(
    fleet,
    stats,
    () => NOW,
    () => 3,
    // serve/serve.ts hands it the memory guard's look and the gRPC port's connections against their cap.
    {
      memory: () => ({ workingSetBytes: 300_000_000, limitBytes: 536_870_912, shedding: false }),
      agentConnections: () => ({ open: 3, limit: 18_976 }),
      // serve/serve.ts hands it the served certificate's expiry when grpc.certFile is set.
      certificates: () => [{ cert: "grpc", expiryMs: NOW + 90 * 86_400_000 }],
      ...options,
    },
  );
  // serve/serve.ts adds the notification metrics to the same registry.
  registerNotificationMetrics(
    registry,
    new WebhookSender({ log: () => {}, timeoutMs: 1000, retries: 0, queueSize: 1 }),
  );
  registerHostSourceMetrics(registry, {
    endpoint: "http://prometheus",
    rounds: 3,
    failures: 1,
    lastRoundOk: true,
    lastVms: 2,
  });
  // ...and the start metrics (issue 24).
  const starts = new StartTracker();
  registerStartMetrics(registry, starts);
  // ...and the learned warm starts' outcomes.
  registerWarmMetrics(registry, () => ({ used: 0, wasted: 0 }));
  // ...and what the fleet holds and costs, with prices (docs/cost.md).
  registerSpendMetrics(registry, () => [], true);
  return { fleet, stats, registry, starts };
}

/** One start through the tracker, ready 42 s after it was asked for: what the start metrics count. */
async function oneStart(tracker: StartTracker): Promise<void> {
  const vm = { namespace: "lab", name: "ada" };
  await tracker.request(vm, { by: "alice", trigger: "link" }, NOW, { running: false }, async () => ({
    ok: true,
    already: false,
    message: "",
  }));
  tracker.markReady(vm, NOW + 42_000);
}

/** The value of one sample line, or undefined when the series is absent. */
function sample(text: string, series: string): number | undefined {
  const line = text.split("\n").find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

describe("createMetrics", () => {
  it("workstation_vm_info: one series per VM, value 1, the owner label value or empty, and the autostop mode", async () => {
    const { fleet, registry } = setup();
    fleet.vms = [view("alice-gpu-workstation", { owner: "alice" }), view("cirros-smoke")];
    const text = await registry.metrics();
    expect(
      sample(
        text,
        'workstation_vm_info{namespace="lab",name="alice-gpu-workstation",owner="alice",autostop="enforce",profile=""}',
      ),
    ).toBe(1);
    expect(
      sample(text, 'workstation_vm_info{namespace="lab",name="cirros-smoke",owner="",autostop="enforce",profile=""}'),
    ).toBe(1);
    expect(text.split("\n").filter((l) => l.startsWith("workstation_vm_info{"))).toHaveLength(2);
  });

  it("exports the per-VM decision by default: the current state only, active signals only, the fullest disk", async () => {
    const { fleet, registry } = setup();
    fleet.vms = [
      view("ada", {
        disks: [
          { mount: "/", usedRatio: 0.73 },
          { mount: "/home", usedRatio: 0.91 },
        ],
      }),
    ];
    const text = await registry.metrics();
    const vm = 'namespace="lab",name="ada"';
    // The idle clock as the time it runs from (idle 600 s at NOW): time() - x is its age.
    expect(sample(text, `workstation_last_activity_timestamp_seconds{${vm}}`)).toBe((NOW - 600_000) / 1000);
    expect(text).not.toContain("workstation_idle_seconds");
    expect(sample(text, `workstation_idle_timeout_seconds{${vm}}`)).toBe(7200);
    expect(sample(text, `workstation_last_report_timestamp_seconds{${vm}}`)).toBeUndefined();
    expect(sample(text, `workstation_state{${vm},state="Active"}`)).toBe(1);
    // No series for the states the VM is not in, nor for signals that show nothing.
    expect(sample(text, `workstation_state{${vm},state="Stopped"}`)).toBeUndefined();
    expect(text.split("\n").filter((l) => l.startsWith("workstation_state{"))).toHaveLength(1);
    expect(sample(text, `workstation_vm_info{${vm},owner="",autostop="enforce",profile=""}`)).toBe(1);
    expect(sample(text, `workstation_stop_deadline_timestamp_seconds{${vm}}`)).toBe((NOW + 7_200_000) / 1000);
    expect(sample(text, `workstation_agent_connected{${vm}}`)).toBe(1);
    expect(sample(text, `workstation_signal_active{${vm},signal="tty"}`)).toBe(1);
    expect(sample(text, `workstation_signal_active{${vm},signal="gpu"}`)).toBeUndefined();
    expect(sample(text, `workstation_lease_expiry_timestamp_seconds{${vm}}`)).toBe((NOW + 3_600_000) / 1000);
    expect(sample(text, `workstation_disk_used_ratio{${vm},mount="/home"}`)).toBe(0.91);
    expect(sample(text, `workstation_disk_used_ratio{${vm},mount="/"}`)).toBeUndefined();
    expect(sample(text, `workstation_gpus{${vm}}`)).toBe(2);
    expect(sample(text, `workstation_policy_invalid_settings{${vm}}`)).toBeUndefined();
    expect(sample(text, `workstation_report_truncated{${vm}}`)).toBeUndefined();
    // A VM never stopped has no stop outcomes; the detail families are off.
    expect(text).not.toContain(`workstation_stop_outcomes_total{${vm}`);
    for (const detail of [
      "workstation_cpu_busy_ratio",
      "workstation_gpu_utilization_ratio",
      "workstation_last_report_timestamp_seconds",
    ])
      expect(text).not.toContain(`${detail}{`);
  });

  it("keeps a typical VM within the series budget by default, and says how many series it wrote", async () => {
    const { fleet, registry } = setup();
    fleet.vms = [
      view("ada"),
      view("bob", { leases: [], stopDeadlineMs: undefined, gpuCount: 0 }),
      view("cy", { autostop: false, mode: "observe", connected: false, readings: undefined }),
    ];
    const text = await registry.metrics();
    const perVm = (name: string) =>
      text.split("\n").filter((l) => !l.startsWith("#") && l.includes(`namespace="lab",name="${name}"`)).length;
    expect(perVm("ada")).toBeLessThanOrEqual(VM_SERIES_BUDGET);
    expect(perVm("bob")).toBeLessThanOrEqual(VM_SERIES_BUDGET);
    // Only watched (autostop off): said on its info series.
    expect(sample(text, 'workstation_vm_info{namespace="lab",name="cy",owner="",autostop="off",profile=""}')).toBe(1);
    // Nothing in the default set is a constant 0.
    const zeros = text
      .split("\n")
      .filter((l) => l.includes('namespace="lab"') && l.endsWith(" 0"))
      .filter((l) => !l.startsWith("workstation_agent_connected"));
    expect(zeros).toEqual([]);
  });

  it("exports every mount, GPU and reading of the latest report with metrics.vmSeries detailed", async () => {
    let set: VmSeriesSet = "detailed";
    const { fleet, registry } = setup({ vmSeries: () => set });
    fleet.vms = [
      view("ada", {
        disks: [
          { mount: "/", usedRatio: 0.73 },
          { mount: "/home", usedRatio: 0.91 },
        ],
      }),
    ];
    const text = await registry.metrics();
    const vm = 'namespace="lab",name="ada"';
    expect(sample(text, `workstation_last_activity_timestamp_seconds{${vm}}`)).toBe((NOW - 600_000) / 1000);
    expect(sample(text, `workstation_last_report_timestamp_seconds{${vm}}`)).toBe((NOW - 2_000) / 1000);
    expect(sample(text, `workstation_disk_used_ratio{${vm},mount="/"}`)).toBe(0.73);
    expect(sample(text, `workstation_disk_used_ratio{${vm},mount="/home"}`)).toBe(0.91);
    expect(sample(text, `workstation_gpu_utilization_ratio{${vm},gpu="0"}`)).toBe(0.42);
    expect(sample(text, `workstation_gpu_utilization_ratio{${vm},gpu="1"}`)).toBeUndefined();
    expect(sample(text, `workstation_gpu_processes{${vm}}`)).toBe(1);
    expect(sample(text, `workstation_cpu_busy_ratio{${vm}}`)).toBe(0.25);
    expect(sample(text, `workstation_user_process_cpu_cores{${vm}}`)).toBe(1.5);
    expect(sample(text, `workstation_network_bytes_per_second{${vm}}`)).toBe(2048);
    expect(sample(text, `workstation_disk_io_bytes_per_second{${vm}}`)).toBe(4096);
    expect(sample(text, `workstation_jupyter_busy_kernels{${vm}}`)).toBe(1);
    expect(sample(text, `workstation_jupyter_connected_kernels{${vm}}`)).toBe(2);
    expect(sample(text, `workstation_idle_inhibitors{${vm}}`)).toBe(0);
    expect(sample(text, `workstation_signal_last_activity_timestamp_seconds{${vm},signal="tty-input"}`)).toBe(
      (NOW - 600_000) / 1000,
    );
    expect(sample(text, `workstation_signal_last_activity_timestamp_seconds{${vm},signal="code-server"}`)).toBe(
      (NOW - 30_000) / 1000,
    );
    // Back to the default set (the memory guard shedding): the detail series go at the next scrape.
    set = "default";
    const shed = await registry.metrics();
    expect(sample(shed, `workstation_cpu_busy_ratio{${vm}}`)).toBeUndefined();
    expect(sample(shed, `workstation_disk_used_ratio{${vm},mount="/"}`)).toBeUndefined();
  });

  it("exports the fleet counters and the collector's own health", async () => {
    const { fleet, stats, registry } = setup();
    fleet.vms = [view("ada")];
    stats.reportsReceived = 17;
    stats.reportDecodeFailures = 2;
    stats.streamsOpened = 5;
    stats.countAuthFailure("bad-token");
    stats.countKubeRequest("stop", "202");
    stats.countKubeRequest("stop", "202");
    stats.countStopOutcome({ namespace: "lab", name: "ada" }, "refused");
    const text = await registry.metrics();
    expect(sample(text, 'workstation_stops_total{reason="idle",mode="enforce"}')).toBe(3);
    expect(sample(text, 'workstation_stops_total{reason="idle",mode="observe"}')).toBe(5);
    expect(sample(text, "workstation_notices_total")).toBe(9);
    expect(sample(text, "workstation_stop_cancelled_total")).toBe(4);
    expect(sample(text, "workstation_leases_granted_total")).toBe(2);
    expect(sample(text, "workstation_policy_errors_total")).toBe(1);
    expect(sample(text, "workstation_reports_received_total")).toBe(17);
    expect(sample(text, 'workstation_report_decode_failures_total{kind="decode"}')).toBe(2);
    expect(sample(text, 'workstation_report_decode_failures_total{kind="validation"}')).toBe(0);
    expect(sample(text, 'workstation_auth_failures_total{reason="bad-token"}')).toBe(1);
    expect(sample(text, 'workstation_kube_requests_total{verb="stop",code="202"}')).toBe(2);
    expect(sample(text, 'workstation_stop_outcomes_total{namespace="lab",name="ada",outcome="refused"}')).toBe(1);
    // Every outcome from 0, so that increase() sees the first one.
    expect(sample(text, 'workstation_stop_outcomes_total{namespace="lab",name="ada",outcome="accepted"}')).toBe(0);
    expect(sample(text, 'workstation_stop_outcomes_total{namespace="lab",name="ada",outcome="failed"}')).toBe(0);
    expect(sample(text, "workstation_agent_streams")).toBe(3);
    expect(sample(text, "workstation_agent_streams_opened_total")).toBe(5);
    expect(sample(text, "workstation_collector_leader")).toBe(1);
  });

  it("removes a VM's series when the VM goes away, and its raw readings when its agent does", async () => {
    const { fleet, stats, registry } = setup();
    fleet.vms = [view("ada"), view("bob")];
    stats.countStopOutcome({ namespace: "lab", name: "bob" }, "accepted");
    const before = await registry.metrics();
    expect(before).toContain('name="bob"');

    fleet.vms = [view("ada", { connected: false, readings: undefined })];
    const after = await registry.metrics();
    expect(after).not.toContain('name="bob"');
    expect(sample(after, 'workstation_agent_connected{namespace="lab",name="ada"}')).toBe(0);
    expect(sample(after, 'workstation_cpu_busy_ratio{namespace="lab",name="ada"}')).toBeUndefined();
    expect(sample(after, 'workstation_gpu_utilization_ratio{namespace="lab",name="ada",gpu="0"}')).toBeUndefined();
    // Hardware and disk stay known while the agent is away.
    expect(sample(after, 'workstation_gpus{namespace="lab",name="ada"}')).toBe(2);
    expect(sample(after, 'workstation_disk_used_ratio{namespace="lab",name="ada",mount="/"}')).toBe(0.73);
  });

  it("drains decision durations into a histogram that keeps counting across scrapes", async () => {
    const { stats, registry } = setup();
    stats.observeDecision(0.00002);
    stats.observeDecision(0.003);
    const first = await registry.metrics();
    expect(stats.pendingDecisionSeconds).toEqual([]);
    expect(sample(first, "workstation_decision_duration_seconds_count")).toBe(2);
    expect(sample(first, 'workstation_decision_duration_seconds_bucket{le="0.000025"}')).toBe(1);
    stats.observeDecision(0.5);
    const second = await registry.metrics();
    expect(sample(second, "workstation_decision_duration_seconds_count")).toBe(3);
    expect(sample(second, 'workstation_decision_duration_seconds_bucket{le="+Inf"}')).toBe(3);
  });

  it("times each scrape and shows it from the next one on", async () => {
    const { registry } = setup();
    const first = await registry.metrics();
    expect(sample(first, "workstation_scrape_duration_seconds_count")).toBe(0);
    const second = await registry.metrics();
    expect(sample(second, "workstation_scrape_duration_seconds_count")).toBe(1);
  });

  it("exports no per-VM series and no fleet figures on a standby replica, only its own health", async () => {
    let leading = false;
    const { fleet, registry, stats } = setup({ leader: () => leading });
    fleet.vms = [view("ada")];
    stats.agentConnectionsRefused = 12;
    stats.agentConnectionsRefusedPerSource = 5;
    stats.agentConnectionsDeadlineClosed = 7;
    stats.countConnectionEviction("cap");
    stats.countConnectionEviction("same-vm");
    stats.countConnectionEviction("same-vm");
    const standby = await registry.metrics();
    expect(standby).not.toContain('name="ada"');
    expect(standby).not.toContain("workstation_reports_received_total");
    expect(sample(standby, "workstation_collector_leader")).toBe(0);
    expect(standby).toMatch(/^workstation_build_info\{version="[^"]+",mode="standalone"\} 1$/m);
    expect(standby).toContain("process_resident_memory_bytes");
    // The open-file cap guards every replica's descriptors, leader or not.
    expect(sample(standby, "workstation_agent_connections")).toBe(3);
    expect(sample(standby, "workstation_agent_connections_limit")).toBe(18_976);
    expect(sample(standby, "workstation_agent_connections_refused_total")).toBe(12);
    // And so do the counts of what kept its slots fair (agents/connection-slots.ts).
    expect(sample(standby, "workstation_agent_connections_per_source_refused_total")).toBe(5);
    expect(sample(standby, "workstation_agent_connections_deadline_closed_total")).toBe(7);
    expect(sample(standby, 'workstation_agent_connections_evicted_total{reason="cap"}')).toBe(1);
    expect(sample(standby, 'workstation_agent_connections_evicted_total{reason="same-vm"}')).toBe(2);
    expect(standby).toContain("process_max_fds");
    leading = true;
    expect(await registry.metrics()).toContain('name="ada"');
  });

  it("rebuilds a VM's series only when its version changes: a scrape of an unchanged VM copies its text", async () => {
    let now = NOW;
    let version = 1;
    let built = 0;
    let current = view("ada");
    const source: VmSeriesSource = {
      id: "lab/ada",
      get version() {
        return version;
      },
      view: () => {
        built++;
        return current;
      },
    };
    const fleet: FleetReader = {
      views: () => [current],
      counters: () => new StubFleet().counterValues,
      seriesSources: () => [source],
    };
    const registry = createMetrics(
      fleet,
      new CollectorStats(),
      () => now,
      () => 1,
      { processMetrics: false },
    );
    const first = await registry.metrics();
    now += 30_000;
    const second = await registry.metrics();
    expect(built).toBe(1);
    // Time passing alone changes nothing: the idle clock is a timestamp.
    const ada = (text: string) => text.split("\n").filter((line) => line.includes('name="ada"'));
    expect(ada(second)).toEqual(ada(first));
    expect(sample(second, 'workstation_last_activity_timestamp_seconds{namespace="lab",name="ada"}')).toBe(
      (NOW - 600_000) / 1000,
    );
    current = view("ada", { state: "Stopped", idleSeconds: undefined });
    version = 2;
    const third = await registry.metrics();
    expect(built).toBe(2);
    expect(sample(third, 'workstation_state{namespace="lab",name="ada",state="Stopped"}')).toBe(1);
    // The idle clock does not run for a stopped VM.
    expect(sample(third, 'workstation_last_activity_timestamp_seconds{namespace="lab",name="ada"}')).toBeUndefined();
  });

  it("builds a changed VM's series between scrapes, at most once per scrape, and the scrape serves that text", async () => {
    let now = NOW;
    let leading = true;
    const built: string[] = [];
    const vms = new Map([
      ["ada", { version: 1, view: view("ada") }],
      ["bob", { version: 1, view: view("bob") }],
    ]);
    const sources = (): VmSeriesSource[] =>
      [...vms].map(([name, vm]) => ({
        id: `lab/${name}`,
        version: vm.version,
        view: () => {
          built.push(name);
          return vm.view;
        },
      }));
    const fleet: FleetReader = {
      views: () => [...vms.values()].map((vm) => vm.view),
      counters: () => new StubFleet().counterValues,
      seriesSources: sources,
    };
    const registry = createMetrics(
      fleet,
      new CollectorStats(),
      () => now,
      () => 2,
      { processMetrics: false, leader: () => leading },
    );
    // Before any scrape: both are new, the slice takes one.
    expect(warmPerVmSeries(registry, 1)).toBe(1);
    expect(warmPerVmSeries(registry, 5)).toBe(1);
    expect(warmPerVmSeries(registry, 5)).toBe(0);
    expect(built).toEqual(["ada", "bob"]);
    await registry.metrics();
    expect(built).toEqual(["ada", "bob"]);
    // ada changes after the scrape: warmed once; its second change waits for the scrape.
    vms.set("ada", { version: 2, view: view("ada", { state: "Stopped", idleSeconds: undefined }) });
    expect(warmPerVmSeries(registry, 5)).toBe(1);
    vms.set("ada", { version: 3, view: view("ada", { state: "Active", idleSeconds: undefined }) });
    expect(warmPerVmSeries(registry, 5)).toBe(0);
    expect(built).toEqual(["ada", "bob", "ada"]);
    now += 15_000;
    const text = await registry.metrics();
    expect(built).toEqual(["ada", "bob", "ada", "ada"]);
    expect(sample(text, 'workstation_state{namespace="lab",name="ada",state="Active"}')).toBe(1);
    expect(sample(text, 'workstation_state{namespace="lab",name="ada",state="Stopped"}')).toBeUndefined();
    // A warmed text is what the scrape serves, and a standby builds nothing.
    vms.set("bob", { version: 2, view: view("bob", { state: "Stopped", idleSeconds: undefined }) });
    expect(warmPerVmSeries(registry, 5)).toBe(1);
    expect(sample(await registry.metrics(), 'workstation_state{namespace="lab",name="bob",state="Stopped"}')).toBe(1);
    expect(built).toEqual(["ada", "bob", "ada", "ada", "bob"]);
    leading = false;
    vms.set("bob", { version: 3, view: view("bob") });
    expect(warmPerVmSeries(registry, 5)).toBe(0);
  });

  it("reports the leader state it is given", async () => {
    let leading = false;
    const { registry } = setup({ leader: () => leading });
    expect(sample(await registry.metrics(), "workstation_collector_leader")).toBe(0);
    leading = true;
    expect(sample(await registry.metrics(), "workstation_collector_leader")).toBe(1);
  });

  it("exports no per-VM series while standing by, and all of them once leading", async () => {
    let leading = false;
    const { fleet, stats, registry } = setup({ leader: () => leading });
    fleet.vms = [view("ada"), view("bob")];
    stats.countStopOutcome({ namespace: "lab", name: "ada" }, "accepted");
    const standby = await registry.metrics();
    const perVm = (text: string) => text.split("\n").filter((line) => !line.startsWith("#") && /\bname="/.test(line));
    expect(perVm(standby)).toEqual([]);
    // Its own health still shows: that it waits, and how it talks to the API.
    expect(sample(standby, "workstation_collector_leader")).toBe(0);
    leading = true;
    const leader = await registry.metrics();
    expect(perVm(leader).some((line) => line.startsWith('workstation_state{namespace="lab",name="ada",state='))).toBe(
      true,
    );
    expect(
      perVm(leader).some((line) =>
        line.startsWith('workstation_stop_outcomes_total{namespace="lab",name="ada",outcome="accepted"} 1'),
      ),
    ).toBe(true);
  });

  it("passes promtool check metrics with every series present", async () => {
    const { fleet, stats, registry, starts } = setup();
    fleet.vms = [
      view("ada"),
      view("bob", { state: "StoppingPending", mode: "observe", policyErrors: ["idle-timeout: bad"] }),
    ];
    stats.countAuthFailure("bad-token");
    stats.countKubeRequest("stop", "202");
    stats.countStopOutcome({ namespace: "lab", name: "ada" }, "accepted");
    stats.observeDecision(0.001);
    await oneStart(starts);
    await registry.metrics();
    const text = await registry.metrics();
    expect(text).toMatch(/^workstation_starts_total\{trigger="link"\} 1$/m);
    expect(text).toMatch(/^workstation_starts_total\{trigger="ssh"\} 0$/m);
    expect(text).toMatch(/^workstation_start_to_ready_seconds_bucket\{le="60"\} 1$/m);
    // The per-stage wait: every trigger and stage from 0 on, the one return under link/total.
    expect(text).toMatch(/^workstation_return_wait_seconds_bucket\{le="60",trigger="link",stage="total"\} 1$/m);
    for (const trigger of ["wake", "ssh", "schedule", "warm", "standalone"])
      expect(text).toMatch(
        new RegExp(`^workstation_return_wait_seconds_count\\{trigger="${trigger}",stage="placement"\\} 0$`, "m"),
      );
    const lint = spawnSync("promtool", ["check", "metrics"], { input: text, encoding: "utf8" });
    if (lint.error)
      throw new Error(`promtool is missing (${lint.error.message}): install the Debian package prometheus`);
    expect(lint.stdout + lint.stderr).toBe("");
    expect(lint.status).toBe(0);
  });

  it("is documented metric by metric in docs/metrics.md", async () => {
    const { registry } = setup();
    const docs = readFileSync(path.join(repoRoot, "docs/metrics.md"), "utf8");
    const names = metricNames(registry);
    expect(names.length).toBeGreaterThan(30);
    const undocumented = names.filter((name) => !docs.includes(`\`${name}\``));
    expect(undocumented).toEqual([]);
    // And the docs name nothing that is not exported.
    const documented = [...docs.matchAll(/`(workstation_[a-z_]+)`/g)].map((m) =>
      m[1]!.replace(/_(bucket|sum|count)$/, ""),
    );
    expect(documented.filter((name) => !names.includes(name))).toEqual([]);
  });
});
