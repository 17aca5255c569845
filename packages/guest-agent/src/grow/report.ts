import type { MountResult, StepResult } from "./execute.js";
import { formatBytes } from "./plan.js";

const OUTCOME_WORD: Record<StepResult["outcome"], string> = {
  changed: "changed",
  unchanged: "no change",
  failed: "FAILED",
  planned: "would run",
};

function sizeChange(before: number | null, after: number | null): string {
  if (before === null) return "";
  if (after === null || after === before) return ` (${formatBytes(before)})`;
  return ` (${formatBytes(before)} → ${formatBytes(after)})`;
}

/** The human summary: per mount, what was done, not done and why. Pure. */
export function formatGrowText(results: MountResult[], dryRun: boolean): string {
  const lines: string[] = [];
  if (dryRun) lines.push("dry run: nothing is changed; this is what grow would do");
  for (const result of results) {
    const what = result.mountPoint
      ? `${result.mountPoint} (${result.fsType} on ${result.device ?? "?"})`
      : result.requested;
    const size = result.device ? sizeChange(result.filesystemBytesBefore, result.filesystemBytesAfter) : "";
    lines.push(`${what}: ${result.status}${size}`);
    for (const step of result.steps) {
      lines.push(
        `  ${OUTCOME_WORD[step.outcome].padEnd(9)} ${step.description}${sizeChange(step.bytesBefore, step.bytesAfter)}`,
      );
      for (const command of step.commands) lines.push(`            $ ${command.join(" ")}`);
      if (step.detail) lines.push(`            ${step.detail}`);
    }
    for (const refusal of result.refusals) lines.push(`  refused   ${refusal}`);
    for (const note of result.notes) lines.push(`  note      ${note}`);
  }
  return `${lines.join("\n")}\n`;
}

export function formatGrowJson(results: MountResult[], dryRun: boolean, exitCode: number): string {
  return `${JSON.stringify({ dryRun, ok: exitCode === 0, mounts: results }, null, 2)}\n`;
}
