// A Debian root booted with systemd as PID 1 (systemd-nspawn), so maintainer scripts and units
// run as they do on a VM: `deb-systemd-invoke start` really starts the service, and
// `systemctl is-active` is systemd's answer. Commands run inside with nsenter.
import { spawn, type ChildProcess } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { eventually } from "../../support/process.js";
import { requireCommand, run, type RunResult } from "./tools.js";

const INSIDE_ENV = ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8", "HOME=/root"];

export class Container {
  private constructor(
    private readonly nspawn: ChildProcess,
    private readonly leader: number,
    private readonly console: () => string,
  ) {}

  /** Boots `root` and waits until systemd has finished starting (running or degraded). */
  static async boot(root: string, machine: string): Promise<Container> {
    requireCommand("systemd-nspawn", "systemd-container");
    requireCommand("nsenter", "util-linux");
    // Shares the host's network: the agent inside reaches a collector on 127.0.0.1.
    const nspawn = spawn(
      "systemd-nspawn",
      ["-q", "-D", root, `--machine=${machine}`, "--register=no", "--keep-unit", "--console=read-only", "-b"],
      {
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    let text = "";
    nspawn.stdout!.on("data", (chunk: Buffer) => (text += chunk.toString()));
    nspawn.stderr!.on("data", (chunk: Buffer) => (text += chunk.toString()));
    const leader = await eventually(
      () => {
        if (nspawn.exitCode !== null)
          throw new Error(`systemd-nspawn exited ${nspawn.exitCode}:\n${text.slice(-3000)}`);
        return childrenOf(nspawn.pid!)[0];
      },
      30_000,
      "the container's init process",
    );
    const container = new Container(nspawn, leader, () => text);
    await eventually(
      () => {
        if (nspawn.exitCode !== null)
          throw new Error(`systemd-nspawn exited ${nspawn.exitCode}:\n${text.slice(-3000)}`);
        const state = container.exec(["systemctl", "is-system-running"]).stdout.trim();
        return state === "running" || state === "degraded" ? state : undefined;
      },
      180_000,
      "systemd in the container to finish booting",
    );
    return container;
  }

  /** Runs argv inside the container (its namespaces and root, a clean environment). */
  exec(argv: string[], options: { input?: string } = {}): RunResult {
    return run("nsenter", ["-t", String(this.leader), "-a", "-r", "-w", "/usr/bin/env", "-i", ...INSIDE_ENV, ...argv], {
      ...(options.input !== undefined ? { input: options.input } : {}),
      timeout: 300_000,
    });
  }

  /** The console output so far (boot messages), for failure messages. */
  bootLog(): string {
    return this.console();
  }

  /** Powers the container off; kills it if it does not stop within a minute. */
  async stop(): Promise<void> {
    if (this.nspawn.exitCode !== null || this.nspawn.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => this.nspawn.once("exit", () => resolve()));
    this.nspawn.kill("SIGTERM"); // nspawn asks the container's systemd to halt
    const timer = setTimeout(() => this.nspawn.kill("SIGKILL"), 60_000);
    await exited;
    clearTimeout(timer);
  }
}

function childrenOf(pid: number): number[] {
  const children: number[] = [];
  for (const task of readdirSync(`/proc/${pid}/task`)) {
    try {
      children.push(
        ...readFileSync(`/proc/${pid}/task/${task}/children`, "utf8").trim().split(/\s+/).filter(Boolean).map(Number),
      );
    } catch {
      // the task ended
    }
  }
  return children;
}
