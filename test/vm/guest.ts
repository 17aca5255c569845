/**
 * One booted guest: QEMU with software emulation (TCG: KVM is present on these machines but a
 * guest kernel hangs in early boot under it), the image's own kernel booted directly, the disk
 * as a qcow2 overlay on the cached image (or on a copy), the cloud-init seed as a second virtio
 * disk, user networking with the guest's SSH port forwarded to a host port, the serial console
 * in a file, and two QMP sockets: one for the harness (block_resize, quit) and one for the
 * collector's stop command (system_powerdown).
 *
 * Every QEMU this module starts is killed when the test process exits, whatever happens.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import type { PtySession } from "../support/pty.js";
import { freePort } from "../support/process.js";
import { execOk, type ExecResult } from "./exec.js";
import { tool } from "./host-tools.js";
import type { VmImage } from "./image.js";
import { QmpClient } from "./qmp.js";
import { sshHostKeys, sshRun, sshTerminal, type SshTarget } from "./ssh.js";

export interface QemuSpec {
  kernel: string;
  initrd: string;
  kernelCommandLine: string;
  disk: string;
  seedIso: string;
  mac: string;
  sshPort: number;
  serialLog: string;
  qmpSockets: string[];
  cpus?: number;
  memoryMiB?: number;
  /** -machine value (default q35; "q35,i8042=off" leaves the guest without PS/2 keyboard and mouse). */
  machine?: string;
  /** More QEMU arguments (input devices: "-device", "qemu-xhci", "-device", "usb-tablet"). */
  extraArgs?: string[];
}

/** The name QMP's block_resize knows the root disk by. */
export const ROOT_DRIVE = "root";

export function qemuArgs(spec: QemuSpec): string[] {
  return [
    "-accel",
    "tcg",
    "-cpu",
    "max",
    "-machine",
    spec.machine ?? "q35",
    "-smp",
    String(spec.cpus ?? 2),
    "-m",
    String(spec.memoryMiB ?? 1024),
    "-nodefaults",
    "-display",
    "none",
    // A guest that reboots or panics (panic=-1) ends QEMU instead of looping.
    "-no-reboot",
    "-kernel",
    spec.kernel,
    "-initrd",
    spec.initrd,
    "-append",
    spec.kernelCommandLine,
    "-drive",
    `file=${spec.disk},if=none,id=${ROOT_DRIVE},format=qcow2,discard=unmap`,
    "-device",
    `virtio-blk-pci,drive=${ROOT_DRIVE}`,
    "-drive",
    `file=${spec.seedIso},if=none,id=seed,format=raw,readonly=on`,
    "-device",
    "virtio-blk-pci,drive=seed",
    "-netdev",
    `user,id=net0,hostfwd=tcp:127.0.0.1:${spec.sshPort}-:22`,
    "-device",
    `virtio-net-pci,netdev=net0,mac=${spec.mac}`,
    "-serial",
    `file:${spec.serialLog}`,
    ...spec.qmpSockets.flatMap((socket) => ["-qmp", `unix:${socket},server=on,wait=off`]),
    ...(spec.extraArgs ?? []),
  ];
}

/** A qcow2 disk whose unwritten blocks come from `base` (never written to). */
export async function createOverlay(base: string, overlay: string, baseFormat: "raw" | "qcow2" = "raw"): Promise<void> {
  await execOk(tool("qemuImg"), ["create", "-q", "-f", "qcow2", "-b", base, "-F", baseFormat, overlay]);
}

/** Grows a disk image while no QEMU has it open. */
export async function resizeImageOffline(disk: string, sizeBytes: number): Promise<void> {
  await execOk(tool("qemuImg"), ["resize", "-q", disk, String(sizeBytes)]);
}

export async function imageVirtualSize(disk: string): Promise<number> {
  const info = JSON.parse((await execOk(tool("qemuImg"), ["info", "--output=json", "-U", disk])).stdout) as {
    "virtual-size": number;
  };
  return info["virtual-size"];
}

const live = new Set<ChildProcess>();
process.on("exit", () => {
  for (const child of live) child.kill("SIGKILL");
});

export interface GuestOptions {
  /** Names this boot in file names and messages ("vm1-boot2"). */
  label: string;
  /** Where the console log and the QMP socket go. */
  dir: string;
  image: VmImage;
  disk: string;
  seedIso: string;
  mac: string;
  user: string;
  sshKey: string;
  /** The QMP socket the collector's stop command presses the power button through. */
  stopSocket: string;
  machine?: string;
  extraArgs?: string[];
}

export interface GuestExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export class Guest {
  readonly exited: Promise<GuestExit>;
  private exit: GuestExit | undefined;
  private qemuOutput = "";
  private qmpClient: QmpClient | undefined;
  private readonly terminals: PtySession[] = [];

  private constructor(
    readonly options: GuestOptions,
    readonly sshPort: number,
    readonly serialLogPath: string,
    readonly qmpSocket: string,
    private readonly child: ChildProcess,
  ) {
    live.add(child);
    child.stdout!.on("data", (chunk: Buffer) => (this.qemuOutput += chunk.toString()));
    child.stderr!.on("data", (chunk: Buffer) => (this.qemuOutput += chunk.toString()));
    this.exited = new Promise((resolve) =>
      child.on("exit", (code, signal) => {
        live.delete(child);
        this.exit = { code, signal };
        resolve(this.exit);
      }),
    );
  }

  static async boot(options: GuestOptions): Promise<Guest> {
    const sshPort = await freePort();
    const serialLog = path.join(options.dir, `${options.label}.serial.log`);
    const qmpSocket = path.join(options.dir, `${options.label}.qmp`);
    const args = qemuArgs({
      kernel: options.image.kernel,
      initrd: options.image.initrd,
      kernelCommandLine: options.image.kernelCommandLine,
      disk: options.disk,
      seedIso: options.seedIso,
      mac: options.mac,
      sshPort,
      serialLog,
      qmpSockets: [qmpSocket, options.stopSocket],
      ...(options.machine ? { machine: options.machine } : {}),
      ...(options.extraArgs ? { extraArgs: options.extraArgs } : {}),
    });
    const child = spawn(tool("qemu"), args, { stdio: ["ignore", "pipe", "pipe"] });
    const guest = new Guest(options, sshPort, serialLog, qmpSocket, child);
    await new Promise<void>((resolve, reject) => {
      child.once("spawn", resolve);
      child.once("error", (error) => reject(new Error(`cannot start ${tool("qemu")}: ${error.message}`)));
    });
    return guest;
  }

  get name(): string {
    return this.options.label;
  }

  get running(): boolean {
    return this.exit === undefined;
  }

  get target(): SshTarget {
    return { port: this.sshPort, user: this.options.user, key: this.options.sshKey };
  }

  serialLog(): string {
    return existsSync(this.serialLogPath) ? readFileSync(this.serialLogPath, "utf8") : "";
  }

  /** The end of the console and of QEMU's own output: what a failure message needs. */
  diagnostics(lines = 60): string {
    const serial = this.serialLog().split("\n").slice(-lines).join("\n");
    const state = this.exit ? `QEMU exited (code ${this.exit.code}, signal ${this.exit.signal})` : "QEMU running";
    return `--- ${this.name}: ${state}; serial console (last ${lines} lines):\n${serial}\n--- QEMU output:\n${this.qemuOutput.slice(-2000)}`;
  }

  /** Polls until a login as the test user runs a command; resolves with the time it did (ms). */
  async waitForSsh(timeoutMs: number): Promise<number> {
    const deadline = Date.now() + timeoutMs;
    let last: ExecResult | undefined;
    while (Date.now() < deadline) {
      if (!this.running) throw new Error(`${this.name} stopped before SSH came up\n${this.diagnostics()}`);
      last = await sshRun(this.target, "true", 30_000);
      if (last.code === 0) return Date.now();
      await new Promise((resolve) => setTimeout(resolve, 2_000));
    }
    throw new Error(
      `${this.name}: no SSH login within ${timeoutMs / 1000} s (last: ${last?.stderr.trim()})\n${this.diagnostics()}`,
    );
  }

  ssh(command: string, timeoutMs?: number): Promise<ExecResult> {
    return sshRun(this.target, command, timeoutMs);
  }

  /** Runs and returns stdout; throws with the output and the guest's state unless it exits 0. */
  async sshOk(command: string, timeoutMs?: number): Promise<string> {
    const result = await this.ssh(command, timeoutMs);
    if (result.code !== 0) {
      throw new Error(
        `${this.name}: \`${command}\` exited ${result.code ?? result.signal}:\n${result.stdout}${result.stderr}`,
      );
    }
    return result.stdout;
  }

  /** An interactive login on a pseudo-terminal; closed with the guest. */
  terminal(): PtySession {
    const session = sshTerminal(this.target);
    this.terminals.push(session);
    return session;
  }

  hostKeys(): Promise<string[]> {
    return sshHostKeys(this.sshPort);
  }

  async qmp(): Promise<QmpClient> {
    this.qmpClient ??= await QmpClient.connect(this.qmpSocket);
    return this.qmpClient;
  }

  /** Waits for QEMU to end by itself (the guest powered off). */
  async waitForExit(timeoutMs: number, what: string): Promise<GuestExit> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () =>
          reject(new Error(`${this.name}: still running ${timeoutMs / 1000} s after ${what}\n${this.diagnostics()}`)),
        timeoutMs,
      );
    });
    try {
      return await Promise.race([this.exited, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Ends everything this guest started: terminals, the QMP connection, QEMU itself. */
  async destroy(): Promise<void> {
    await Promise.all(this.terminals.map((t) => t.close()));
    this.qmpClient?.close();
    if (!this.running) return;
    this.child.kill("SIGTERM");
    const gone = await Promise.race([
      this.exited.then(() => true),
      new Promise<boolean>((resolve) => setTimeout(() => resolve(false), 10_000)),
    ]);
    if (!gone) {
      this.child.kill("SIGKILL");
      await this.exited;
    }
  }
}
