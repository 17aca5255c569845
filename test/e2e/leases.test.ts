// Leases end to end with the shipped files: a lease taken while the collector
// is away is recorded, then confirmed and clamped to max-keep-running when it
// connects; the VM is not stopped while the lease holds, and is after it ends.
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { agentBundle, collectorBundle, eventually, requireBundles, start, type Proc } from "../support/process.js";
import { standaloneCollector } from "../support/standalone.js";
import { quietMachine, type QuietMachine } from "../support/quiet-machine.js";

const CAP_SECONDS = 15;
let dir: string;
let machine: QuietMachine;
let wsLease: string;
const running: Proc[] = [];

function lease(args: string[]) {
  return spawnSync(process.execPath, [wsLease, ...args], {
    encoding: "utf8",
    timeout: 30_000,
    env: { ...process.env, WS_AGENT_SOCKET: machine.socket },
  });
}

beforeAll(async () => {
  requireBundles();
  dir = mkdtempSync(path.join(os.tmpdir(), "ws-lease-e2e-"));
  machine = await quietMachine();
  // The lease CLI is the agent file under another name, as the package installs it.
  wsLease = path.join(dir, "ws-lease");
  symlinkSync(agentBundle, wsLease);
});

afterAll(async () => {
  await Promise.all(running.map((p) => p.stop()));
  await machine.remove();
  rmSync(dir, { recursive: true, force: true });
});

describe("keep-running leases through the collector", () => {
  it("records a lease offline, clamps it on reconnection, and stops only after it ends", async () => {
    const setup = await standaloneCollector(dir, {
      policyDefaults: {
        autostop: "enabled",
        mode: "enforce",
        "idle-timeout": "4s",
        "grace-period": "3s",
        "max-keep-running": `${CAP_SECONDS}s`,
      },
      extra: `standalone:\n  stopCommand: ["touch", ${JSON.stringify(path.join(dir, "stopped-{name}"))}]`,
    });
    const token = setup.token("e2e", "leased");
    const grpcPort = setup.grpcPort;
    const marker = path.join(dir, "stopped-leased");

    const agent = start(
      agentBundle,
      [
        "run",
        "--insecure",
        "--collector",
        `127.0.0.1:${grpcPort}`,
        "--namespace",
        "e2e",
        "--name",
        "leased",
        "--report-interval",
        "1s",
        ...machine.flags,
      ],
      {
        WS_AGENT_TOKEN: token,
        WS_AGENT_CONFIG: path.join(dir, "none.yaml"),
      },
    );
    writeFileSync(path.join(dir, "none.yaml"), "");
    running.push(agent);
    await agent.waitFor(/agent started/);

    // No collector yet: the lease is kept locally, not yet confirmed.
    const taken = lease(["1h", "--reason", "training"]);
    expect(taken.status, taken.stderr + taken.stdout).toBe(0);
    expect(taken.stdout).toMatch(/collector is not reachable[\s\S]*confirmed when it reconnects/);
    const takenAtMs = Date.now();

    const collector = start(collectorBundle, ["serve", "--config", setup.configFile]);
    running.push(collector);
    await collector.waitFor(/collector serving/);

    const listed = await eventually(
      () => {
        const result = lease(["list", "--json"]);
        const leases = JSON.parse(result.stdout).leases as Array<{
          confirmed: boolean;
          clamped: boolean;
          reason: string;
          uid: number;
        }>;
        return leases[0]?.confirmed ? leases : undefined;
      },
      30_000,
      "the collector to confirm the lease",
    );
    expect(listed).toHaveLength(1);
    expect(listed[0]).toMatchObject({ confirmed: true, clamped: true, reason: "training", uid: 0 });
    const human = lease(["list"]);
    expect(human.stdout).toMatch(/clamp/i);
    const status = lease(["status"]);
    expect(status.status).toBe(0);
    expect(status.stdout).toMatch(/training/);

    // A lease over the cap is now refused by the CLI, naming the cap.
    const tooLong = lease(["2h"]);
    expect(tooLong.status).toBe(1);
    expect(tooLong.stderr + tooLong.stdout).toMatch(/15s/);

    await eventually(() => existsSync(marker), 90_000, "the stop after the lease ended");
    const stoppedAtMs = statSync(marker).mtimeMs;
    // The stop came after the clamped lease ended, never while it held.
    expect(stoppedAtMs).toBeGreaterThanOrEqual(takenAtMs + CAP_SECONDS * 1000 - 1000);
    await collector.waitFor(/leased: stop accepted/);
  });
});
