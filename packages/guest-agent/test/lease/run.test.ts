// `ws-lease run DURATION -- CMD...` as shipped (the bundle under the name
// ws-lease) against a real lease service: the VM is held while the command
// runs, released when it ends, the command's exit status is passed through,
// and killing ws-lease releases the lease too. Plus --version and --help.
import { spawn, spawnSync } from "node:child_process";
import { mkdtemp, readFile, rm, symlink } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { agentBundle, repoRoot, requireBundles } from "../../../../test/support/process.js";
import { readFileSync } from "node:fs";
import { eventually, startHarness, type Harness } from "./support/harness.js";

let h: Harness;
let dir: string;
let wsLease: string;

beforeAll(async () => {
  requireBundles();
  h = await startHarness();
  dir = await mkdtemp(path.join(os.tmpdir(), "ws17-run-"));
  wsLease = path.join(dir, "ws-lease");
  await symlink(agentBundle, wsLease);
});

afterAll(async () => {
  await h?.stop();
  await h?.remove();
  await rm(dir, { recursive: true, force: true });
});

function runLease(args: string[]) {
  const child = spawn(process.execPath, [wsLease, ...args], {
    env: { ...process.env, WS_AGENT_SOCKET: h.socketPath },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on("data", (chunk: Buffer) => (output += chunk.toString()));
  const exit = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
  return { child, exit, output: () => output };
}

const leases = () => h.service.status().leases;

describe("ws-lease run", () => {
  it("holds the VM while `sleep 2` runs, then releases it; exit status 0", async () => {
    const run = runLease(["run", "1m", "--", "sleep", "2"]);
    await eventually(() => leases().length === 1, "the lease while the command runs");
    expect(leases()[0]).toMatchObject({ reason: "while running: sleep 2", requestedSeconds: 60 });
    const code = await run.exit;
    expect(code, run.output()).toBe(0);
    expect(leases()).toEqual([]);
    const audit = await readFile(path.join(h.stateDir, "lease-audit.log"), "utf8");
    expect(audit).toMatch(/action=granted .*reason="while running: sleep 2"/);
    expect(audit).toMatch(/action=cancelled .*reason="while running: sleep 2"/);
  });

  it("passes the command's exit status through, and releases", async () => {
    const run = runLease(["run", "1m", "--reason", "failing build", "--", "sh", "-c", "exit 7"]);
    expect(await run.exit, run.output()).toBe(7);
    expect(leases()).toEqual([]);
  });

  it("killing ws-lease (SIGTERM, SIGINT) stops the command and releases the lease", async () => {
    for (const signal of ["SIGTERM", "SIGINT"] as const) {
      const run = runLease(["run", "1m", "--", "sleep", "30"]);
      await eventually(() => leases().length === 1, "the lease");
      run.child.kill(signal);
      const code = await run.exit;
      // The command died of the signal: 128 + its number, as a shell reports it.
      expect(code, run.output()).toBe(128 + os.constants.signals[signal]);
      await eventually(() => leases().length === 0, `the lease released after ${signal}`);
    }
  });

  it("a missing command: exit 127, lease released; usage errors exit 2 and take nothing", async () => {
    const missing = runLease(["run", "1m", "--", "/nonexistent/ws17-command"]);
    expect(await missing.exit).toBe(127);
    expect(missing.output()).toContain("command not found");
    expect(leases()).toEqual([]);
    for (const args of [
      ["run", "1m"],
      ["run", "--", "true"],
      ["run", "soon", "--", "true"],
    ]) {
      const bad = runLease(args);
      expect(await bad.exit, args.join(" ")).toBe(2);
    }
    expect(leases()).toEqual([]);
  });
});

describe("ws-lease as a native tool", () => {
  const cli = (args: string[]) =>
    spawnSync(process.execPath, [wsLease, ...args], {
      encoding: "utf8",
      env: { ...process.env, WS_AGENT_SOCKET: "/nonexistent" },
    });

  it("--version", () => {
    const result = cli(["--version"]);
    expect(result.status).toBe(0);
    const version = (JSON.parse(readFileSync(path.join(repoRoot, "package.json"), "utf8")) as { version: string })
      .version;
    expect(result.stdout.trim()).toBe(`ws-lease ${version}`);
  });

  it("--help fits a screen and points to the manual; --man is the manual", () => {
    const help = cli(["--help"]);
    expect(help.status).toBe(0);
    expect(help.stdout.split("\n").length).toBeLessThanOrEqual(15);
    expect(help.stdout).toContain("ws-lease run DURATION -- COMMAND");
    expect(help.stdout).toContain("man ws-lease");
    const man = cli(["--man"]);
    expect(man.stdout).toMatch(/^NAME\n/);
    expect(man.stdout).toContain("EXIT STATUS");
    expect(man.stdout).toContain("ws-lease run DURATION");
  });
});
