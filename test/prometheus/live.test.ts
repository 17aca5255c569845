// A real Prometheus scrapes the shipped collector (standalone) fed by real
// agents; the series must arrive with the right values, the live scrape must be
// lint-clean, the dashboard's queries and the alert rules must run in it, and
// `ws-collector whatif` must replay the recording. The collector exports the detail set
// (metrics.vmSeries: detailed), the raw readings whatif needs.
//
// The agents read the machine's /proc (CPU, network, disk) but empty run, dev
// and home roots: no logins, terminals, Jupyter or code-server, so "idle" is
// idle. vm-lease holds a lease taken with the real ws-lease command.
import { execFile, spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse } from "yaml";
import {
  agentBundle,
  collectorBundle,
  eventually,
  getText,
  repoRoot,
  requireBundles,
  start,
  type Proc,
} from "../support/process.js";
import { standaloneCollector, type StandaloneCollector } from "../support/standalone.js";
import { promtool, startPrometheus, type RunningPrometheus } from "../support/prometheus.js";
import { dashboardQueries, withGrafanaVariables } from "./promql.js";

const run = promisify(execFile);
const NAMESPACE = "prom";
/** How long the recording must last for whatif with idle-timeout 1m and grace-period 30s to see a stop. */
const RECORDING_SECONDS = 100;

let dir: string;
let httpPort: number;
let prometheus: RunningPrometheus | undefined;
const processes: Proc[] = [];
let recordingFromSeconds: number;
/** When `ws-lease 2h` was run and when it returned (Unix seconds): the lease ends two hours after a moment between. */
let leaseTaken: { from: number; to: number };

function collector(...args: string[]): string[] {
  return [collectorBundle, ...args];
}

function startAgent(name: string, setup: StandaloneCollector): Proc {
  const grpcPort = setup.grpcPort;
  const roots = path.join(dir, `roots-${name}`);
  for (const sub of ["run", "dev", "home", "etc"]) mkdirSync(path.join(roots, sub), { recursive: true });
  const proc = start(
    agentBundle,
    [
      "run",
      "--insecure",
      "--collector",
      `127.0.0.1:${grpcPort}`,
      "--namespace",
      NAMESPACE,
      "--name",
      name,
      "--report-interval",
      "1s",
      "--state-dir",
      path.join(dir, `state-${name}`),
      "--socket",
      path.join(dir, `${name}.sock`),
      "--run-root",
      path.join(roots, "run"),
      "--dev-root",
      path.join(roots, "dev"),
      "--home-root",
      path.join(roots, "home"),
      "--etc-root",
      path.join(roots, "etc"),
    ],
    { WS_AGENT_TOKEN: setup.token(NAMESPACE, name), WS_AGENT_CONFIG: path.join(dir, "agent.yaml") },
  );
  processes.push(proc);
  return proc;
}

beforeAll(async () => {
  requireBundles();
  dir = mkdtempSync(path.join(os.tmpdir(), "ws-prom-e2e-"));
  writeFileSync(path.join(dir, "agent.yaml"), "# flags carry everything\n");
  const setup = await standaloneCollector(dir, {
    policyDefaults: { autostop: "enabled", mode: "observe", "idle-timeout": "1h" },
    // The detail set: what whatif replays (the default set is scraped in test/e2e/kubernetes.test.ts).
    extra: "metrics: { vmSeries: detailed }",
  });
  httpPort = setup.httpPort;
  const server = start(collectorBundle, ["serve", "--config", setup.configFile]);
  processes.push(server);
  await server.waitFor(/collector serving/);
  prometheus = await startPrometheus({
    targets: [`127.0.0.1:${httpPort}`],
    scrapeIntervalSeconds: 1,
    ruleFiles: [path.join(repoRoot, "packaging/prometheus/workstation-alerts.yaml")],
  });

  const idle = startAgent("vm-idle", setup);
  const leased = startAgent("vm-lease", setup);
  await Promise.all([idle.waitFor(/connected to collector/), leased.waitFor(/connected to collector/)]);
  recordingFromSeconds = Math.floor(Date.now() / 1000);
  const leaseFrom = Date.now() / 1000;
  const lease = spawnSync(process.execPath, [agentBundle, "lease", "2h", "--reason", "prometheus test"], {
    encoding: "utf8",
    env: { ...process.env, WS_AGENT_SOCKET: path.join(dir, "vm-lease.sock") },
    timeout: 30_000,
  });
  expect(lease.status, lease.stdout + lease.stderr).toBe(0);
  leaseTaken = { from: Math.floor(leaseFrom), to: Math.ceil(Date.now() / 1000) };
});

afterAll(async () => {
  await Promise.all(processes.splice(0).map((p) => p.stop()));
  await prometheus?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const value = (samples: Array<{ value: [number, string] }>) =>
  samples.length === 1 ? Number(samples[0]!.value[1]) : undefined;

describe("Prometheus scraping the shipped collector", () => {
  it("finds each VM's series with the right values", async () => {
    const p = prometheus!;
    const vm = `namespace="${NAMESPACE}",name="vm-idle"`;
    expect(await p.until(`workstation_state{${vm},state="Active"}`, (s) => value(s) === 1)).toBe(true);
    // Only the current state has a series.
    expect(await p.until(`workstation_state{${vm},state="Stopped"}`, (s) => s.length === 0)).toBe(true);
    expect(await p.until(`workstation_agent_connected{${vm}}`, (s) => value(s) === 1)).toBe(true);
    expect(await p.until(`workstation_vm_info{${vm},autostop="observe"}`, (s) => value(s) === 1)).toBe(true);
    expect(await p.until(`workstation_idle_timeout_seconds{${vm}}`, (s) => value(s))).toBe(3600);
    expect(await p.until("workstation_reports_received_total", (s) => (value(s) ?? 0) > 0 && value(s))).toBeGreaterThan(
      0,
    );
    expect(await p.until("workstation_agent_streams", (s) => value(s))).toBe(2);
    expect(await p.until("workstation_collector_leader", (s) => value(s))).toBe(1);
    // Raw readings for whatif: the machine's real /proc, nothing from the empty roots.
    const busy = await p.until(`workstation_cpu_busy_ratio{${vm}}`, (s) => value(s));
    expect(busy).toBeGreaterThanOrEqual(0);
    expect(busy).toBeLessThanOrEqual(1);
    expect(await p.until(`workstation_jupyter_busy_kernels{${vm}}`, (s) => value(s) === 0)).toBe(true);
    expect(
      await p.until(
        `workstation_signal_last_activity_timestamp_seconds{${vm},signal="tty-input"}`,
        (s) => s.length === 0,
      ),
    ).toBe(true);
    const rootUsed = await p.until(`workstation_disk_used_ratio{${vm},mount="/"}`, (s) => value(s));
    expect(rootUsed).toBeGreaterThan(0);
    expect(rootUsed).toBeLessThan(1);
    // The lease taken with ws-lease: a veto on the VM, its end about two hours ahead.
    const leased = `namespace="${NAMESPACE}",name="vm-lease"`;
    expect(await p.until(`workstation_signal_active{${leased},signal="lease"}`, (s) => value(s) === 1)).toBe(true);
    // Two hours from when it was taken (bracketed by the command's run, not by how long the test took to get here).
    const expiry = await p.until(`workstation_lease_expiry_timestamp_seconds{${leased}}`, (s) => value(s));
    expect(expiry).toBeGreaterThanOrEqual(leaseTaken.from + 7200);
    expect(expiry).toBeLessThanOrEqual(leaseTaken.to + 7200);
    expect(await p.until("workstation_leases_granted_total", (s) => value(s))).toBe(1);
    expect(
      await p.until("workstation_decision_duration_seconds_count", (s) => (value(s) ?? 0) > 0 && value(s)),
    ).toBeGreaterThan(0);
  });

  it("serves a scrape that promtool check metrics finds nothing to say about", async () => {
    const scrape = await getText(`http://127.0.0.1:${httpPort}/metrics`);
    expect(scrape.status).toBe(200);
    expect(scrape.body).toContain('workstation_state{namespace="prom",name="vm-idle",state="Active"} 1');
    const lint = promtool(["check", "metrics"], undefined, scrape.body);
    expect(lint.output).toBe("");
    expect(lint.status).toBe(0);
  });

  it("runs every dashboard query without an error", async () => {
    const dashboard = JSON.parse(
      readFileSync(path.join(repoRoot, "packaging/grafana/workstation-dashboard.json"), "utf8"),
    );
    const queries = dashboardQueries(dashboard);
    const failures: string[] = [];
    for (const { panel, expr } of queries) {
      try {
        await prometheus!.query(withGrafanaVariables(expr));
      } catch (error) {
        failures.push(`${panel}: ${(error as Error).message}`);
      }
    }
    expect(failures).toEqual([]);
    // And the per-VM state timeline has a value for each VM: Active is 1.
    const state = queries.find((q) => q.panel === "State")!;
    const timeline = await prometheus!.query(withGrafanaVariables(state.expr));
    expect(timeline.map((s) => [s.metric.name, Number(s.value[1])]).sort()).toEqual([
      ["vm-idle", 1],
      ["vm-lease", 1],
    ]);
  });

  it("loads the alert rules, all healthy", async () => {
    type Rule = { name: string; health: string; lastError?: string };
    const rules = await eventually(
      async () => {
        const response = await fetch(`${prometheus!.url}/api/v1/rules`);
        const body = (await response.json()) as { data: { groups: Array<{ rules: Rule[] }> } };
        const all = body.data.groups.flatMap((group) => group.rules);
        return all.length > 0 && all.every((rule) => rule.health !== "unknown") && all;
      },
      // workstation.false-stops runs every minute (its edge rule needs it), first within its first minute.
      90_000,
      "the alert rules to be evaluated",
    );
    const shipped = (
      parse(readFileSync(path.join(repoRoot, "packaging/prometheus/workstation-alerts.yaml"), "utf8")) as {
        groups: Array<{ rules: unknown[] }>;
      }
    ).groups.flatMap((group) => group.rules);
    expect(rules.length).toBe(shipped.length);
    for (const rule of rules) expect(rule.health, `${rule.name}: ${rule.lastError}`).toBe("ok");
  });

  it("replays the recording with whatif: the idle VM would be stopped, the leased one not", {
    timeout: 300_000,
  }, async () => {
    // The replayed policy needs this much recorded time before a stop can exist; polling earlier only burns CPU.
    const elapsed = Date.now() / 1000 - recordingFromSeconds;
    if (elapsed < RECORDING_SECONDS)
      await new Promise((resolve) => setTimeout(resolve, (RECORDING_SECONDS - elapsed) * 1000));
    const args = [
      "whatif",
      "--prometheus",
      prometheus!.url,
      "--from",
      String(recordingFromSeconds),
      "--to",
      "now",
      "--step",
      "5s",
      "--idle-timeout",
      "1m",
      "--grace-period",
      "30s",
      // The host's own CPU, network and disk are not this test's subject.
      "--cpu-busy-threshold",
      "off",
      "--user-cpu-threshold",
      "off",
      "--network-threshold",
      "off",
      "--disk-threshold",
      "off",
      "--namespace",
      NAMESPACE,
    ];
    type Vm = {
      name: string;
      stops: number;
      vmHoursSaved: number;
      likelyFalseStops: number;
      stopList: Array<{ endedBy: string }>;
    };
    const result = await eventually(
      async () => {
        const { stdout } = await run(process.execPath, collector(...args, "--json"), { timeout: 60_000 });
        const json = JSON.parse(stdout) as { vms: Vm[]; total: { stops: number } };
        // A stop at the very last step saves nothing yet: wait for one with time behind it.
        return json.vms.find((vm) => vm.name === "vm-idle" && vm.stops > 0 && vm.vmHoursSaved > 0) ? json : undefined;
      },
      120_000,
      "whatif to show a stop for vm-idle",
    );
    const idle = result.vms.find((vm) => vm.name === "vm-idle")!;
    const leased = result.vms.find((vm) => vm.name === "vm-lease")!;
    expect(idle.stops).toBe(1);
    expect(idle.likelyFalseStops).toBe(0);
    expect(idle.stopList[0]!.endedBy).toBe("end-of-range");
    expect(idle.vmHoursSaved).toBeGreaterThan(0);
    expect(leased.stops).toBe(0);
    expect(result.total.stops).toBe(1);

    const { stdout: table } = await run(process.execPath, collector(...args), { timeout: 60_000 });
    expect(table).toMatch(/prom\/vm-idle\s+1\s+0\s+\d+\.\d\d\s+0\.00/);
    expect(table).toMatch(/prom\/vm-lease\s+0\s+0\s+0\.00\s+0\.00/);
    expect(table).toContain("idle-timeout 1m, grace-period 30s");

    // The sweep replays the same recording once per value and recommends one: 1m stops the idle VM
    // (nobody came back: no likely false stop), 2h outlasts the recording and stops nothing.
    const sweepArgs = args.filter(
      (_, index) => index < args.indexOf("--idle-timeout") || index > args.indexOf("--idle-timeout") + 1,
    );
    const { stdout: sweepJson } = await run(
      process.execPath,
      collector(...sweepArgs, "--sweep", "idle-timeout=1m,2h", "--json"),
      { timeout: 60_000 },
    );
    const sweep = JSON.parse(sweepJson) as {
      rows: Array<{
        overrides: Record<string, string>;
        stops: number;
        likelyFalseStops: number;
        vmHours: number;
        longestNoticeSeconds: number;
      }>;
      recommendation: { overrides?: Record<string, string>; annotate?: string };
    };
    expect(sweep.rows.map((row) => [row.overrides["idle-timeout"], row.stops, row.likelyFalseStops])).toEqual([
      ["1m", 1, 0],
      ["2h", 0, 0],
    ]);
    expect(sweep.rows[0]!.vmHours).toBeGreaterThan(0);
    // The notice stood for the grace period before the stop (a step either way).
    expect(sweep.rows[0]!.longestNoticeSeconds).toBeGreaterThanOrEqual(25);
    expect(sweep.rows[0]!.longestNoticeSeconds).toBeLessThanOrEqual(35);
    expect(sweep.recommendation.overrides).toEqual({ "idle-timeout": "1m" });
    expect(sweep.recommendation.annotate).toBe(
      `kubectl annotate vm --all -n ${NAMESPACE} --overwrite workstation.aik8s.run/idle-timeout=1m`,
    );
    const { stdout: sweepTable } = await run(
      process.execPath,
      collector(...sweepArgs, "--sweep", "idle-timeout=1m,2h"),
      { timeout: 60_000 },
    );
    expect(sweepTable).toMatch(/^idle-timeout=1m\s+1\s/m);
    expect(sweepTable).toContain("Recommended: idle-timeout 1m");

    // A fleet too large for one answer is read a batch of VMs at a time (--vms-per-query, default about
    // 4 million points a query): one VM a query gives the same replay, plain and swept, to the byte.
    const toSeconds = String(Math.floor(Date.now() / 1000) - 5);
    const fixed = args.map((arg, index) => (args[index - 1] === "--to" ? toSeconds : arg));
    const fixedSweep = sweepArgs.map((arg, index) => (sweepArgs[index - 1] === "--to" ? toSeconds : arg));
    for (const replay of [
      [...fixed, "--json"],
      [...fixedSweep, "--sweep", "idle-timeout=1m,2h", "--jobs", "2", "--json"],
    ]) {
      const whole = await run(process.execPath, collector(...replay), { timeout: 60_000 });
      const batched = await run(process.execPath, collector(...replay, "--vms-per-query", "1"), { timeout: 60_000 });
      expect(batched.stdout).toBe(whole.stdout);
      const { vms } = JSON.parse(whole.stdout) as { vms: Vm[] | number };
      // Two VMs or more: one VM a query took a batch each.
      expect(typeof vms === "number" ? vms : vms.map((vm) => vm.name)).toEqual(
        typeof vms === "number" ? 2 : ["vm-idle", "vm-lease"],
      );
    }
  });
});
