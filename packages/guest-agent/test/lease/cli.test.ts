// leaseCommand in this process: usage, help, and what it says when the agent is not there.
import { spawn } from "node:child_process";
import { mkdtemp, rm, stat } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { leaseCommand } from "../../src/lease/cli.js";
import { eventually } from "./support/harness.js";

async function runCli(argv: string[], socket: string): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = "";
  let stderr = "";
  const code = await leaseCommand(argv, {
    stdout: { write: (text: string) => (stdout += text) },
    stderr: { write: (text: string) => (stderr += text) },
    env: { WS_AGENT_SOCKET: socket },
  });
  return { code, stdout, stderr };
}

const dirs: string[] = [];
afterAll(async () => {
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
});

describe("ws-lease without an agent", () => {
  it("no socket (ENOENT): says the agent is not running and how to check, exit 1", async () => {
    const result = await runCli(["8h"], "/nonexistent/ws-agent/agent.sock");
    expect(result.code).toBe(1);
    expect(result.stderr).toContain(
      "the ws agent is not running on this VM (nothing answers on /nonexistent/ws-agent/agent.sock)",
    );
    expect(result.stderr).toContain("systemctl status ws-agent");
  });

  it("a socket left by a dead agent (ECONNREFUSED): the same", async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), "ws-cli-"));
    dirs.push(dir);
    const socket = path.join(dir, "agent.sock");
    // A process that binds the socket and is killed leaves the file behind, with nobody listening.
    const child = spawn(process.execPath, [
      "-e",
      `require("net").createServer().listen(${JSON.stringify(socket)}); setInterval(() => {}, 1000)`,
    ]);
    await eventually(
      () =>
        stat(socket).then(
          () => true,
          () => false,
        ),
      "the socket to appear",
    );
    child.kill("SIGKILL");
    await new Promise((resolve) => child.once("exit", resolve));
    const result = await runCli(["status"], socket);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain("the ws agent is not running on this VM");
  });
});

describe("usage", () => {
  it("help for each command, exit 0", async () => {
    for (const argv of [
      ["--help"],
      ["-h"],
      ["help"],
      ["status", "--help"],
      ["list", "--help"],
      ["cancel", "--help"],
      ["8h", "--help"],
      ["help", "cancel"],
    ]) {
      const result = await runCli(argv, "/nonexistent");
      expect(result.code, argv.join(" ")).toBe(0);
      expect(result.stdout, argv.join(" ")).toMatch(/Usage: ws-lease|SYNOPSIS/);
    }
  });

  it("bad input: a clear message, exit 2, nothing sent", async () => {
    const cases: Array<[string[], string]> = [
      [["8"], "has no unit: write 8h, 8m or 8s"],
      [["eight"], 'unknown command "eight"'],
      [["8h", "extra"], "one duration please"],
      [["1h30"], "is not a duration"],
      [["8h", "--reason"], "--reason"],
      [["8h", "--bogus"], "--bogus"],
      [["8h", "--reason", "x".repeat(201)], "keep it under 200"],
      [["cancel", "nope"], "is not a lease ID"],
      [["cancel", "0a1b2c3d", "--all"], "not both"],
      [["list", "x"], "list takes no arguments"],
      [["take"], "take needs a duration"],
      [["0s"], "is zero: a duration must be positive"],
      [["0h"], "is zero"],
      [["0.5s"], '"0.5s" is shorter than 1s: a lease that short keeps nothing running'],
    ];
    for (const [argv, message] of cases) {
      const result = await runCli(argv, "/nonexistent");
      expect(result.code, argv.join(" ")).toBe(2);
      expect(result.stderr, argv.join(" ")).toContain(message);
      expect(result.stderr, argv.join(" ")).not.toContain("not running");
    }
  });
});
