// Standalone stop action: a configured command run with argv entries, never
// through a shell. "{namespace}" and "{name}" are replaced inside each entry.
import { execFile } from "node:child_process";

export interface StopCommandResult {
  ok: boolean;
  message: string;
}

export function expandStopCommand(template: readonly string[], vm: { namespace: string; name: string }): string[] {
  return template.map((arg) => arg.replaceAll("{namespace}", vm.namespace).replaceAll("{name}", vm.name));
}

export function runStopCommand(
  template: readonly string[],
  vm: { namespace: string; name: string },
  timeoutMs = 60_000,
): Promise<StopCommandResult> {
  const [file, ...args] = expandStopCommand(template, vm);
  if (!file) return Promise.resolve({ ok: false, message: "stop command is empty" });
  return new Promise((resolve) => {
    execFile(file, args, { timeout: timeoutMs, maxBuffer: 64 * 1024, shell: false }, (error, stdout, stderr) => {
      if (error) {
        const detail = (stderr || error.message).toString().trim().split("\n").slice(-3).join(" | ");
        resolve({ ok: false, message: `${file} failed: ${detail}` });
      } else {
        resolve({ ok: true, message: `${file} ok${stdout.trim() ? `: ${stdout.trim().split("\n")[0]}` : ""}` });
      }
    });
  });
}
