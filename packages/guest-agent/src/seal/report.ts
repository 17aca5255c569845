import type { OperationResult } from "./execute.js";
import type { SealAction } from "./plan.js";
import type { SealCheck } from "./verify.js";

export interface SealReport {
  root: string;
  live: boolean;
  dryRun: boolean;
  operations: OperationResult[];
  /** null on a dry run: there is nothing to verify yet. */
  verification: SealCheck[] | null;
  poweroff: "not requested" | "requested" | "done" | "failed" | "not done: sealing is incomplete";
  poweroffError?: string;
  ok: boolean;
}

const STATUS_WORD: Record<OperationResult["status"], string> = {
  done: "done",
  "nothing-to-do": "nothing to do",
  skipped: "skipped",
  failed: "FAILED",
  planned: "would do",
};

function counts(report: SealReport): string {
  const tally = new Map<string, number>();
  for (const operation of report.operations)
    tally.set(STATUS_WORD[operation.status], (tally.get(STATUS_WORD[operation.status]) ?? 0) + 1);
  const parts = [...tally].map(([word, count]) => `${count} ${word}`);
  if (report.verification) {
    const passed = report.verification.filter((check) => check.ok).length;
    parts.push(`verification ${passed}/${report.verification.length} passed`);
  }
  return parts.join(", ");
}

/** The human summary: every operation with each action and how it went. Pure. */
export function formatSealText(report: SealReport): string {
  const lines: string[] = [];
  lines.push(`ws-agent seal: ${report.live ? "the running system (/)" : `offline tree ${report.root}`}`);
  if (report.dryRun) lines.push("dry run: nothing is changed; this is what seal would do");
  for (const operation of report.operations) {
    lines.push(
      `[${STATUS_WORD[operation.status]}] ${operation.title}${operation.skipped ? `: ${operation.skipped}` : ""}`,
    );
    for (const action of operation.actions) {
      const mark = action.status === "failed" ? "FAILED " : action.status === "planned" ? "would " : "";
      lines.push(`    ${mark}${action.description}${action.error ? `: ${action.error}` : ""}`);
    }
    for (const problem of operation.problems) lines.push(`    problem: ${problem}`);
    for (const note of operation.notes) lines.push(`    note: ${note}`);
  }
  if (report.verification) {
    lines.push("verification:");
    for (const check of report.verification)
      lines.push(`    ${check.ok ? "ok    " : "FAILED"} ${check.id}: ${check.detail}`);
  }
  if (report.poweroff !== "not requested")
    lines.push(`poweroff: ${report.poweroff}${report.poweroffError ? `: ${report.poweroffError}` : ""}`);
  lines.push(
    `summary: ${counts(report)}${report.dryRun ? "" : report.ok ? " — sealed" : " — NOT sealed: see FAILED above"}`,
  );
  return `${lines.join("\n")}\n`;
}

/** Written files' contents are left out of the JSON; the description says what was written. */
function actionForJson(action: SealAction): Record<string, unknown> {
  if (action.kind === "write") return { kind: action.kind, path: action.path, mode: action.mode, why: action.why };
  return { ...action };
}

export function formatSealJson(report: SealReport): string {
  const operations = report.operations.map((operation) => ({
    ...operation,
    actions: operation.actions.map((result) => ({
      ...actionForJson(result.action),
      description: result.description,
      status: result.status,
      error: result.error,
    })),
  }));
  return `${JSON.stringify({ ...report, operations }, null, 2)}\n`;
}
