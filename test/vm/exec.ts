// Running host programs with argv arrays (never a shell), with their output in the error.
import { spawn } from "node:child_process";

export interface ExecResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

export interface ExecOptions {
  timeoutMs?: number;
  env?: Record<string, string>;
  input?: string;
  cwd?: string;
}

const BASE_ENV = { PATH: "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", LANG: "C.UTF-8" };

/** Runs to the end; never throws for an exit status (see execOk). */
export function exec(file: string, args: readonly string[], options: ExecOptions = {}): Promise<ExecResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, {
      env: { ...BASE_ENV, ...options.env },
      cwd: options.cwd,
      stdio: [options.input === undefined ? "ignore" : "pipe", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout!.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr!.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    const timer =
      options.timeoutMs === undefined ? undefined : setTimeout(() => child.kill("SIGKILL"), options.timeoutMs);
    child.on("error", (error) => {
      clearTimeout(timer);
      reject(new Error(`${file}: ${error.message}`));
    });
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
    if (options.input !== undefined) child.stdin!.end(options.input);
  });
}

/** Runs and throws, with the command and the end of its output, unless it exits 0. */
export async function execOk(file: string, args: readonly string[], options: ExecOptions = {}): Promise<ExecResult> {
  const result = await exec(file, args, options);
  if (result.code !== 0) {
    const status = result.signal
      ? `was killed by ${result.signal}${options.timeoutMs ? ` (timeout ${options.timeoutMs} ms?)` : ""}`
      : `exited ${result.code}`;
    throw new Error(`${[file, ...args].join(" ")} ${status}:\n${(result.stdout + result.stderr).slice(-4000)}`);
  }
  return result;
}
