// SSH into a guest through QEMU's forwarded port: commands, and a real terminal (`ssh -tt`
// under node-pty, as a person's terminal emulator runs it).
import { readFile } from "node:fs/promises";
import path from "node:path";
import { spawnPty, type PtySession } from "../support/pty.js";
import { exec, execOk, type ExecResult } from "./exec.js";
import { tool } from "./host-tools.js";

export interface SshTarget {
  port: number;
  user: string;
  /** Private key file (its .pub is in the guest's authorized_keys via cloud-init). */
  key: string;
}

export interface SshKeyPair {
  privateKey: string;
  publicKey: string;
}

export async function makeSshKey(dir: string): Promise<SshKeyPair> {
  const privateKey = path.join(dir, "id_ed25519");
  await execOk(tool("sshKeygen"), ["-q", "-t", "ed25519", "-N", "", "-C", "ws-vm-test", "-f", privateKey]);
  return { privateKey, publicKey: await readFile(`${privateKey}.pub`, "utf8") };
}

/** Every guest boots with new host keys (that is part of what the seal test checks): none are pinned. */
export function sshArgs(target: SshTarget, extra: string[] = []): string[] {
  return [
    "-F",
    "/dev/null",
    "-i",
    target.key,
    "-o",
    "IdentitiesOnly=yes",
    "-o",
    "BatchMode=yes",
    "-o",
    "StrictHostKeyChecking=no",
    "-o",
    "UserKnownHostsFile=/dev/null",
    "-o",
    "LogLevel=ERROR",
    "-o",
    "ConnectTimeout=15",
    "-o",
    "ServerAliveInterval=5",
    "-o",
    "ServerAliveCountMax=12",
    "-p",
    String(target.port),
    ...extra,
    `${target.user}@127.0.0.1`,
  ];
}

/** Runs a fixed command line of the test's own in the guest's login shell. */
export function sshRun(target: SshTarget, command: string, timeoutMs = 120_000): Promise<ExecResult> {
  return exec(tool("ssh"), [...sshArgs(target), "--", command], { timeoutMs });
}

export function sshTerminal(target: SshTarget): PtySession {
  return spawnPty(tool("ssh"), sshArgs(target, ["-tt"]), { cols: 160, rows: 48 });
}

/** The server's host public keys as a client sees them ("ssh-ed25519 AAAA…"), sorted. */
export async function sshHostKeys(port: number): Promise<string[]> {
  const result = await execOk(tool("sshKeyscan"), ["-T", "15", "-p", String(port), "127.0.0.1"], { timeoutMs: 60_000 });
  return result.stdout
    .split("\n")
    .filter((line) => line.trim() !== "" && !line.startsWith("#"))
    .map((line) => line.split(/\s+/).slice(1, 3).join(" "))
    .sort();
}
