import { spawn } from "node:child_process";

export interface CommandResult {
  /** null when the command could not start or was killed. */
  exitCode: number | null;
  stdout: string;
  stderr: string;
  /** Why it did not run to an exit status (ENOENT, timeout, signal). */
  error?: string;
}

/** Runs argv[0] with the rest as arguments, never through a shell. Never throws. */
export type CommandRunner = (argv: readonly string[], options?: { input?: string }) => Promise<CommandResult>;

/** Output past this is cut: a tool that floods must not take the agent's memory. */
const MAX_OUTPUT = 1 << 20;

export function spawnRunner(env: Record<string, string | undefined>, timeoutMs = 10 * 60_000): CommandRunner {
  return (argv, options = {}) =>
    new Promise((resolve) => {
      const [file, ...args] = argv;
      if (!file) {
        resolve({ exitCode: null, stdout: "", stderr: "", error: "empty command" });
        return;
      }
      let stdout = "";
      let stderr = "";
      let settled = false;
      const finish = (result: CommandResult) => {
        if (settled) return;
        settled = true;
        resolve(result);
      };
      // LANG=C: the parsers read English output; LVM_SUPPRESS_FD_WARNINGS: lvm's noise about inherited fds.
      const child = spawn(file, args, {
        env: { ...env, LANG: "C", LC_ALL: "C", LVM_SUPPRESS_FD_WARNINGS: "1" },
        stdio: ["pipe", "pipe", "pipe"],
        timeout: timeoutMs,
      });
      child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
        if (stdout.length < MAX_OUTPUT) stdout += chunk;
      });
      child.stderr.setEncoding("utf8").on("data", (chunk: string) => {
        if (stderr.length < MAX_OUTPUT) stderr += chunk;
      });
      child.on("error", (error) => finish({ exitCode: null, stdout, stderr, error: error.message }));
      child.on("close", (code, signal) =>
        finish(
          signal
            ? { exitCode: null, stdout, stderr, error: `killed by ${signal}` }
            : { exitCode: code, stdout, stderr },
        ),
      );
      child.stdin.on("error", () => undefined);
      child.stdin.end(options.input ?? "");
    });
}

export function describeFailure(argv: readonly string[], result: CommandResult): string {
  const how = result.error ?? `exit status ${result.exitCode}`;
  const output = (result.stderr.trim() || result.stdout.trim()).split("\n").slice(-3).join(" | ");
  return `${argv.join(" ")}: ${how}${output ? `: ${output}` : ""}`;
}
