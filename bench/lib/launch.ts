// Starts a process for a benchmark, optionally pinned to CPUs with taskset
// (which execs the program, so the pid is the program's own), keeps the tail
// of its output and lets the caller wait for a line.
import { eventually } from "../../test/support/process.js";
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import path from "node:path";

export interface Launched {
  child: ChildProcess;
  pid: number;
  /** The tail of stdout and stderr together (keepBytes). */
  output(): string;
  waitFor(pattern: RegExp, timeoutMs?: number): Promise<RegExpMatchArray>;
  exited: Promise<number | null>;
  stop(signal?: NodeJS.Signals, graceMs?: number): Promise<number | null>;
}

export interface LaunchOptions {
  env?: Record<string, string>;
  /** taskset CPU list ("1", "0-1"); undefined: no pinning. */
  cpus?: string;
  /** Extra stdio slot for a Node IPC channel (child_process.fork-style messaging). */
  ipc?: boolean;
  /** How much of the output to keep (default 256 KiB). */
  keepBytes?: number;
  /**
   * Open-file limit (soft and hard) for the process, set with prlimit (which execs the program, so
   * the pid stays the program's): a collector holds a socket per agent, and a limit below the
   * fleet makes it fail on EMFILE, as a Deployment with a low nofile would. Raising the hard limit
   * needs root (CAP_SYS_RESOURCE).
   */
  openFiles?: number;
}

const TASKSET = "/usr/bin/taskset";
const PRLIMIT = "/usr/bin/prlimit";
const DEFAULT_KEEP_BYTES = 256 * 1024;

export function launch(file: string, args: string[], options: LaunchOptions = {}): Launched {
  if (options.cpus !== undefined && !existsSync(TASKSET))
    throw new Error(`${TASKSET} is missing: install the Debian package util-linux`);
  if (options.openFiles !== undefined && !existsSync(PRLIMIT))
    throw new Error(`${PRLIMIT} is missing: install the Debian package util-linux`);
  const pinned: [string, string[]] =
    options.cpus === undefined ? [file, args] : [TASKSET, ["-c", options.cpus, file, ...args]];
  const [command, argv]: [string, string[]] =
    options.openFiles === undefined
      ? pinned
      : [PRLIMIT, [`--nofile=${options.openFiles}:${options.openFiles}`, "--", pinned[0], ...pinned[1]]];
  const child = spawn(command, argv, {
    env: { ...process.env, ...options.env },
    stdio: options.ipc ? ["ignore", "pipe", "pipe", "ipc"] : ["ignore", "pipe", "pipe"],
  });
  const keepBytes = options.keepBytes ?? DEFAULT_KEEP_BYTES;
  let text = "";
  const listeners = new Set<() => void>();
  const onData = (chunk: Buffer) => {
    text += chunk.toString();
    if (text.length > keepBytes * 2) text = text.slice(-keepBytes);
    for (const listener of listeners) listener();
  };
  child.stdout!.on("data", onData);
  child.stderr!.on("data", onData);
  const exited = new Promise<number | null>((resolve) =>
    child.once("exit", (code, signal) => resolve(code ?? (signal ? -1 : null))),
  );
  let hasExited = false;
  void exited.then(() => {
    hasExited = true;
    for (const listener of listeners) listener();
  });
  return {
    child,
    pid: child.pid!,
    output: () => text,
    exited,
    waitFor(pattern, timeoutMs = 60_000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          const match = text.match(pattern);
          if (match) {
            finish();
            resolve(match);
          } else if (hasExited) {
            finish();
            reject(new Error(`${path.basename(file)} exited while waiting for ${pattern}:\n${text.slice(-4000)}`));
          }
        };
        const timer = setTimeout(() => {
          finish();
          reject(
            new Error(
              `timed out after ${timeoutMs} ms waiting for ${pattern} from ${path.basename(file)}:\n${text.slice(-4000)}`,
            ),
          );
        }, timeoutMs);
        const finish = () => {
          clearTimeout(timer);
          listeners.delete(check);
        };
        listeners.add(check);
        check();
      });
    },
    async stop(signal = "SIGTERM", graceMs = 5_000) {
      if (!hasExited) child.kill(signal);
      const timer = setTimeout(() => child.kill("SIGKILL"), graceMs);
      const code = await exited;
      clearTimeout(timer);
      return code;
    },
  };
}

export function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Polls until check() gives a value (not undefined/false) or the time is up: the tests' eventually(). */
export function pollFor<T>(
  what: string,
  check: () => Promise<T | undefined | false> | T | undefined | false,
  timeoutMs = 60_000,
  everyMs = 200,
): Promise<T> {
  return eventually(check, timeoutMs, what, everyMs);
}
