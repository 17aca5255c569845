// The shipped artifacts end to end: the bundled collector (standalone) and the
// single-file agent as processes, over real gRPC on loopback.
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
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
import { standaloneCollector, type StandaloneCollector } from "../support/standalone.js";

let dir: string;
let setup: StandaloneCollector;
let configFile: string;
let grpcPort: number;
let httpPort: number;
const running: Proc[] = [];

function collectorArgs(): string[] {
  return ["serve", "--config", configFile];
}

function token(namespace: string, name: string): string {
  return setup.token(namespace, name);
}

function startCollector(): Proc {
  const proc = start(collectorBundle, collectorArgs());
  running.push(proc);
  return proc;
}

function startAgent(name: string, tokenValue: string): Proc {
  const state = path.join(dir, `state-${name}`);
  const proc = start(
    agentBundle,
    [
      "run",
      "--insecure",
      "--collector",
      `127.0.0.1:${grpcPort}`,
      "--namespace",
      "e2e",
      "--name",
      name,
      "--report-interval",
      "1s",
      "--state-dir",
      state,
      "--socket",
      path.join(dir, `${name}.sock`),
    ],
    { WS_AGENT_TOKEN: tokenValue, WS_AGENT_CONFIG: path.join(dir, "agent.yaml") },
  );
  running.push(proc);
  return proc;
}

async function vms(): Promise<Array<{ name: string; state: string; connected: boolean; lastReportAtMs?: number }>> {
  const { body } = await getText(`http://127.0.0.1:${httpPort}/api/vms`);
  return JSON.parse(body).vms;
}

beforeAll(async () => {
  requireBundles();
  dir = mkdtempSync(path.join(os.tmpdir(), "ws-e2e-"));
  writeFileSync(path.join(dir, "agent.yaml"), "# flags carry everything\n");
  setup = await standaloneCollector(dir, {
    policyDefaults: { autostop: "enabled", mode: "observe", "idle-timeout": "1h" },
  });
  configFile = setup.configFile;
  grpcPort = setup.grpcPort;
  httpPort = setup.httpPort;
});

afterEach(async () => {
  await Promise.all(running.splice(0).map((p) => p.stop()));
});

afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

describe("collector and agent, as shipped", () => {
  it("delivers reports that show in /metrics and on the status page", async () => {
    const collector = startCollector();
    await collector.waitFor(/collector serving/);
    const agent = startAgent("vm-reporting", token("e2e", "vm-reporting"));
    await agent.waitFor(/connected to collector/);
    await eventually(
      async () => (await vms()).find((v) => v.name === "vm-reporting" && v.connected && v.lastReportAtMs),
      30_000,
      "a report from vm-reporting",
    );

    const metrics = await getText(`http://127.0.0.1:${httpPort}/metrics`);
    expect(metrics.status).toBe(200);
    expect(metrics.body).toMatch(/workstation_agent_connected\{namespace="e2e",name="vm-reporting"\} 1/);
    expect(metrics.body).toMatch(/workstation_state\{namespace="e2e",name="vm-reporting",state="Active"\} 1/);
    expect(Number(metrics.body.match(/^workstation_reports_received_total (\d+)/m)?.[1])).toBeGreaterThan(0);

    const page = await getText(`http://127.0.0.1:${httpPort}/`);
    expect(page.body).toContain(`${"e2e</td>".replace("</td>", "")}/vm-reporting`);
    expect(page.body).toContain("Active");
    expect((await getText(`http://127.0.0.1:${httpPort}/healthz`)).status).toBe(200);
    expect((await getText(`http://127.0.0.1:${httpPort}/readyz`)).status).toBe(200);

    // SIGTERM ends both cleanly.
    expect(await agent.stop()).toBe(0);
    expect(await collector.stop()).toBe(0);
  });

  it("reconnects by itself when the collector is killed and restarted", async () => {
    let collector = startCollector();
    await collector.waitFor(/collector serving/);
    const agent = startAgent("vm-reconnect", token("e2e", "vm-reconnect"));
    await agent.waitFor(/connected to collector/);
    await collector.stop("SIGKILL");
    await agent.waitFor(/reconnecting in/, 30_000);
    const mark = agent.mark();
    collector = startCollector();
    await collector.waitFor(/collector serving/);
    await agent.waitFor(/connected to collector/, 60_000, mark);
    await eventually(
      async () => (await vms()).find((v) => v.name === "vm-reconnect" && v.connected && v.lastReportAtMs),
      30_000,
      "reports after reconnect",
    );
  });

  it("refuses a wrong token and logs it", async () => {
    const collector = startCollector();
    await collector.waitFor(/collector serving/);
    const agent = startAgent("vm-impostor", token("e2e", "someone-else"));
    await collector.waitFor(/refused agent for e2e\/vm-impostor: token does not match/);
    await agent.waitFor(/collector refused this agent/);
    expect((await vms()).find((v) => v.name === "vm-impostor")).toBeUndefined();
    const metrics = await getText(`http://127.0.0.1:${httpPort}/metrics`);
    expect(metrics.body).toMatch(/workstation_auth_failures_total\{reason="bad-token"\} [1-9]/);
  });

  it("survives a collector that is absent at start", async () => {
    const agent = startAgent("vm-early", token("e2e", "vm-early"));
    await agent.waitFor(/reconnecting in/, 30_000);
    await agent.waitFor(/reconnecting in[\s\S]*reconnecting in/, 30_000);
    expect(agent.child.exitCode).toBeNull();
    const collector = startCollector();
    await collector.waitFor(/collector serving/);
    await agent.waitFor(/connected to collector/, 90_000);
    await eventually(
      async () => (await vms()).find((v) => v.name === "vm-early" && v.lastReportAtMs),
      30_000,
      "reports from the late collector",
    );
  });

  it("prints valid JSON from probe in a directory without node_modules", async () => {
    const alone = mkdtempSync(path.join(os.tmpdir(), "ws-alone-"));
    const copy = path.join(alone, "ws-agent.cjs");
    writeFileSync(copy, await (await import("node:fs/promises")).readFile(agentBundle));
    const result = spawnSync(
      process.execPath,
      [copy, "probe", "--json", "--window", "200ms", "--state-dir", path.join(alone, "state")],
      { cwd: alone, encoding: "utf8", timeout: 60_000 },
    );
    const report = JSON.parse(result.stdout);
    expect(report.sources.map((s: { source: string }) => s.source).sort()).toEqual([
      "code_server",
      "desktop",
      "disk",
      "gpu",
      "inhibitors",
      "jupyter",
      "leases",
      "remote_sessions",
      "sessions",
      "system",
    ]);
    expect(report.system.cpuCount).toBeGreaterThan(0);
    rmSync(alone, { recursive: true, force: true });
  });

  it("answers usage errors with exit code 2, configuration errors with 3, and a message", () => {
    for (const [bin, args, message, code] of [
      [agentBundle, ["run", "--bogus"], /unknown option --bogus/, 2],
      [agentBundle, ["frobnicate"], /unknown command "frobnicate"/, 2],
      [
        agentBundle,
        [
          "run",
          "--insecure",
          "--collector",
          "x:1",
          "--namespace",
          "a",
          "--name",
          "b",
          "--token",
          "t",
          "--report-interval",
          "soon",
        ],
        /report interval: "soon" is not a duration/,
        3,
      ],
      [collectorBundle, ["serve", "--nope"], /unknown option --nope/, 2],
      [collectorBundle, ["token", "--name", "x"], /needs --namespace and --name/, 2],
    ] as const) {
      const result = spawnSync(process.execPath, [bin, ...args], { encoding: "utf8", timeout: 30_000 });
      expect(result.status, result.stderr).toBe(code);
      expect(result.stderr).toMatch(message);
    }
    for (const [bin, args] of [
      [agentBundle, ["--version"]],
      [agentBundle, ["run", "--help"]],
      [agentBundle, ["probe", "--help"]],
      [collectorBundle, ["serve", "--help"]],
      [collectorBundle, ["token", "--help"]],
    ] as const) {
      const result = spawnSync(process.execPath, [bin, ...args], { encoding: "utf8", timeout: 30_000 });
      expect(result.status, result.stderr).toBe(0);
      expect(result.stdout.length).toBeGreaterThan(10);
    }
  });
});
