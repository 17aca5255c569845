// Start the shipped artifacts as real processes and watch their output.
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
export const agentBundle = path.join(repoRoot, "packages/guest-agent/dist/ws-agent.cjs");
export const collectorBundle = path.join(repoRoot, "packages/collector/dist/ws-collector.cjs");

export function requireBundles(): void {
  for (const file of [agentBundle, collectorBundle]) {
    if (!existsSync(file)) throw new Error(`${file} is missing: run 'npm run build' (npm test builds it first)`);
  }
}

/** util-linux's prlimit, which the tests that run the collector under a small open-file limit need. */
export function requirePrlimit(): void {
  try {
    execFileSync("prlimit", ["--version"], { stdio: "ignore" });
  } catch {
    throw new Error("prlimit is missing: install util-linux (apt-get install util-linux)");
  }
}

export interface Proc {
  child: ChildProcess;
  output(): string;
  waitFor(pattern: RegExp, timeoutMs?: number, since?: number): Promise<RegExpMatchArray>;
  /** Current length of the output, to wait only for lines printed after now. */
  mark(): number;
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/**
 * Runs `node FILE ARGS` (env added to this process's). `launcher` goes in front, a command that
 * execs the rest, e.g. `["prlimit", "--nofile=128:128", "--"]`: the child is then node itself.
 */
export function start(
  file: string,
  args: string[],
  env: Record<string, string> = {},
  options: { launcher?: readonly string[] } = {},
): Proc {
  const argv = [...(options.launcher ?? []), process.execPath, file, ...args];
  const child = spawn(argv[0]!, argv.slice(1), {
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let text = "";
  const listeners = new Set<() => void>();
  const onData = (chunk: Buffer) => {
    text += chunk.toString();
    for (const listener of listeners) listener();
  };
  child.stdout!.on("data", onData);
  child.stderr!.on("data", onData);
  let exitedEarly = false;
  const exited = new Promise<number | null>((resolve) =>
    child.on("exit", (code) => {
      exitedEarly = true;
      for (const listener of listeners) listener();
      resolve(code);
    }),
  );
  return {
    child,
    output: () => text,
    mark: () => text.length,
    waitFor(pattern, timeoutMs = 30_000, since = 0) {
      return new Promise((resolve, reject) => {
        const check = () => {
          const match = text.slice(since).match(pattern);
          if (match) {
            cleanup();
            resolve(match);
          } else if (exitedEarly) {
            cleanup();
            reject(
              new Error(
                `${path.basename(file)} exited (code ${child.exitCode ?? child.signalCode}) before printing ${pattern}:\n${text.slice(-4000)}`,
              ),
            );
          }
        };
        const timer = setTimeout(() => {
          cleanup();
          reject(
            new Error(
              `timed out after ${timeoutMs} ms waiting for ${pattern} in output of ${path.basename(file)}:\n${text.slice(-4000)}`,
            ),
          );
        }, timeoutMs);
        const cleanup = () => {
          clearTimeout(timer);
          listeners.delete(check);
        };
        listeners.add(check);
        check();
      });
    },
    async stop(signal = "SIGTERM") {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      const timer = setTimeout(() => child.kill("SIGKILL"), 5_000);
      const code = await exited;
      clearTimeout(timer);
      return code;
    },
  };
}

export { freePort } from "./ports.js";

export async function getText(url: string): Promise<{ status: number; body: string }> {
  const response = await fetch(url);
  return { status: response.status, body: await response.text() };
}

/** Polls until check() returns a value (not undefined/false) or the time is up. */
export async function eventually<T>(
  check: () => Promise<T | undefined | false> | T | undefined | false,
  timeoutMs = 30_000,
  what = "condition",
  everyMs = 200,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value !== undefined && value !== false) return value;
    } catch (error) {
      lastError = error;
    }
    if (Date.now() > deadline)
      throw new Error(`timed out waiting for ${what}${lastError ? `: ${(lastError as Error).message}` : ""}`);
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
}

/**
 * Bundles a TypeScript entry point into one ESM file Node runs as a child process (the
 * load generator, a fake API server in its own process), with `require` defined for the
 * CommonJS dependencies esbuild inlines.
 */
export async function bundleNodeScript(entryPoint: string, outfile: string): Promise<void> {
  const { build } = await import("esbuild");
  await build({
    entryPoints: [entryPoint],
    outfile,
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    banner: {
      js: 'import { createRequire as __wsCreateRequire } from "node:module"; const require = __wsCreateRequire(import.meta.url);',
    },
    logLevel: "warning",
  });
}
