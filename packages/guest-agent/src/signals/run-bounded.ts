/**
 * Runs an executable without a shell under a hard timeout and an output cap: what the GPU
 * signal runs nvidia-smi with. The answer is a value (exited, not found, could not start, timed
 * out, too much output), never a throw; `gone` says when the process has really ended.
 */
import { spawn } from "node:child_process";
import { errorMessage } from "@ws/protocol";

export type CommandResult =
  | { kind: "exited"; code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string }
  | { kind: "not-found"; message: string }
  | { kind: "spawn-failed"; message: string }
  | { kind: "timed-out"; timeoutMs: number }
  | { kind: "output-too-large"; maxBytes: number };

export interface RunningCommand {
  /** Settles at exit, or at the timeout even if the process has not died yet. */
  result: Promise<CommandResult>;
  /** Settles once the process is really gone (a process stuck in the driver may outlive SIGKILL for a while). */
  gone: Promise<void>;
}

/** Runs an executable without a shell, killing it with SIGKILL after timeoutMs. */
export function runBounded(file: string, args: string[], timeoutMs: number, maxBytes: number): RunningCommand {
  let settle!: (result: CommandResult) => void;
  let markGone!: () => void;
  const result = new Promise<CommandResult>((resolve) => (settle = resolve));
  const gone = new Promise<void>((resolve) => (markGone = resolve));
  let settled = false;
  const finish = (outcome: CommandResult): void => {
    if (settled) return;
    settled = true;
    clearTimeout(timer);
    settle(outcome);
  };

  const child = spawn(file, args, { stdio: ["ignore", "pipe", "pipe"] });
  const stdout: Buffer[] = [];
  const stderr: Buffer[] = [];
  let bytes = 0;
  const collect = (chunks: Buffer[]) => (chunk: Buffer) => {
    bytes += chunk.length;
    if (bytes > maxBytes) {
      child.kill("SIGKILL");
      finish({ kind: "output-too-large", maxBytes });
      return;
    }
    chunks.push(chunk);
  };
  child.stdout.on("data", collect(stdout));
  child.stderr.on("data", collect(stderr));
  const timer = setTimeout(() => {
    child.kill("SIGKILL");
    finish({ kind: "timed-out", timeoutMs });
  }, timeoutMs);

  child.on("error", (error: NodeJS.ErrnoException) => {
    finish(
      error.code === "ENOENT"
        ? { kind: "not-found", message: errorMessage(error) }
        : { kind: "spawn-failed", message: errorMessage(error) },
    );
    if (child.pid === undefined) markGone();
  });
  child.on("close", (code, signal) => {
    finish({
      kind: "exited",
      code,
      signal,
      stdout: Buffer.concat(stdout).toString("utf8"),
      stderr: Buffer.concat(stderr).toString("utf8"),
    });
    markGone();
  });
  return { result, gone };
}
