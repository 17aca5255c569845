// Running the real tools the packaging tests need, and failing with the Debian package to install
// when one is missing.
import { spawnSync, type SpawnSyncOptions } from "node:child_process";
import { accessSync, constants } from "node:fs";
import path from "node:path";

const SYSTEM_DIRS = ["/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"];

/** The absolute path of `command`, or an error naming the Debian package that provides it. */
export function requireCommand(command: string, debianPackage: string): string {
  const dirs = [...(process.env.PATH ?? "").split(":").filter((d) => d.startsWith("/")), ...SYSTEM_DIRS];
  for (const dir of dirs) {
    const candidate = path.join(dir, command);
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  throw new Error(
    `${command} is not installed: install the Debian package ${debianPackage} (scripts/install-test-deps.sh installs it)`,
  );
}

export interface RunResult {
  status: number | null;
  stdout: string;
  stderr: string;
  /** Both streams, for assertion messages. */
  output: string;
}

export function run(command: string, args: string[], options: SpawnSyncOptions = {}): RunResult {
  const result = spawnSync(command, args, { encoding: "utf8", maxBuffer: 64 * 1024 * 1024, ...options });
  if (result.error) throw new Error(`cannot run ${command}: ${result.error.message}`);
  const stdout = String(result.stdout ?? "");
  const stderr = String(result.stderr ?? "");
  return { status: result.status, stdout, stderr, output: `$ ${[command, ...args].join(" ")}\n${stdout}${stderr}` };
}

/** run(), throwing with the whole output unless it exits 0. */
export function runOk(command: string, args: string[], options: SpawnSyncOptions = {}): RunResult {
  const result = run(command, args, options);
  if (result.status !== 0) throw new Error(`exit ${result.status}:\n${result.output.slice(-6000)}`);
  return result;
}
