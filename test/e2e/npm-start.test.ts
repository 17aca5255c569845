// Ctrl-C on `npm start` (issue 40, item 9): the terminal signals its whole foreground process
// group. The agent used to be in that group, got the SIGINT, then start.mjs's SIGTERM a few
// milliseconds later, and said "shutdown took longer than 5s" at once. Now the children are out
// of the terminal's group, get one SIGTERM from start.mjs, and the agent shuts down cleanly.
import { spawn } from "node:child_process";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { eventually, freePort, repoRoot, requireBundles } from "../support/process.js";

describe("npm start", () => {
  it("stops collector and agent on Ctrl-C with one signal each, and the agent says nothing of a slow shutdown", async () => {
    requireBundles();
    const [grpcPort, httpPort] = [await freePort(), await freePort()];
    // detached: start.mjs leads a process group of its own, as a shell's foreground job does.
    const child = spawn(process.execPath, [path.join(repoRoot, "scripts/start.mjs")], {
      cwd: repoRoot,
      env: { ...process.env, WS_START_GRPC_PORT: String(grpcPort), WS_START_HTTP_PORT: String(httpPort) },
      stdio: ["ignore", "pipe", "pipe"],
      detached: true,
    });
    let output = "";
    child.stdout.on("data", (chunk) => (output += chunk));
    child.stderr.on("data", (chunk) => (output += chunk));
    const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
    await eventually(
      () => /\[collector\].*agent connected/.test(output) || child.exitCode !== null,
      120_000,
      "the agent to connect",
    );
    expect(output).toMatch(/ws is running/);

    process.kill(-child.pid!, "SIGINT"); // what Ctrl-C does: the whole foreground group
    expect(await exited).toBe(0);
    expect(output).toMatch(/\[agent\].*received SIGTERM, shutting down/);
    expect(output).not.toMatch(/\[agent\].*received SIGINT/);
    expect(output).not.toMatch(/shutdown took longer than|while shutting down/);
  }, 180_000);
});
