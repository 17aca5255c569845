/**
 * growpart's verdict, read from what it prints and not only from its exit status
 * (exit 1 means both "NOCHANGE", a success for us, and plain usage errors).
 */
export type GrowpartResult =
  | { outcome: "changed"; oldSizeSectors: number; newSizeSectors: number; line: string }
  | { outcome: "nochange"; line: string }
  | { outcome: "failed"; line: string };

const CHANGED = /^CHANGED?:\s*partition=\d+\s+start=\d+\s+old:\s*size=(\d+)\s+end=\d+\s+new:\s*size=(\d+).*$/m;
const NOCHANGE = /^NOCHANGE:.*$/m;
const FAILED = /^FAILED:.*$/m;

/** Pure. `exitCode` breaks no ties: a FAILED line wins, then CHANGED, then NOCHANGE. */
export function parseGrowpartOutput(output: string, exitCode: number | null): GrowpartResult {
  const failed = FAILED.exec(output);
  if (failed) return { outcome: "failed", line: failed[0].trim() };
  const changed = CHANGED.exec(output);
  if (changed && exitCode === 0) {
    return {
      outcome: "changed",
      oldSizeSectors: Number(changed[1]),
      newSizeSectors: Number(changed[2]),
      line: changed[0].trim(),
    };
  }
  const nochange = NOCHANGE.exec(output);
  if (nochange) return { outcome: "nochange", line: nochange[0].trim() };
  const lastLine = output.trim().split("\n").pop() ?? "";
  return { outcome: "failed", line: `growpart exited ${exitCode ?? "by signal"} without a verdict: ${lastLine}` };
}
