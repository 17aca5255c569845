// What `whatif --sweep` prints: a table with text bars for people, JSON for scripts. Every text
// it prints is one it made (numbers, durations, knob values that parseKnobs accepted, the prefix).
import { formatDuration } from "@ws/protocol";
import type { Recommendation, SweepRow, SweptKnob } from "./sweep.js";

export interface SweepResult {
  fromMs: number;
  toMs: number;
  stepSeconds: number;
  falseStopWindowSeconds: number;
  falseStopBudget: number;
  vms: number;
  knobs: readonly SweptKnob[];
  rows: readonly SweepRow[];
  recommendation: Recommendation;
}

const iso = (ms: number) => new Date(ms).toISOString().replace(/\.000Z$/, "Z");
const hours = (value: number | undefined) => (value === undefined ? "?" : value.toFixed(1));
const BAR_WIDTH = 30;

/** A bar of `value` against `max`, BAR_WIDTH characters at most; a value above 0 shows at least one. */
export function bar(value: number, max: number, width = BAR_WIDTH): string {
  if (max <= 0 || value <= 0) return "";
  return "#".repeat(Math.max(1, Math.round((value / max) * width)));
}

function label(row: SweepRow): string {
  return Object.entries(row.overrides)
    .map(([name, value]) => `${name}=${value}`)
    .join(" ");
}

function table(rows: string[][]): string[] {
  const widths = rows[0]!.map((_, column) => Math.max(...rows.map((row) => row[column]!.length)));
  return rows.map((row) =>
    row
      .map((cell, column) => (column === 0 ? cell.padEnd(widths[column]!) : cell.padStart(widths[column]!)))
      .join("  ")
      .trimEnd(),
  );
}

export function formatSweepText(result: SweepResult): string {
  const lines: string[] = [];
  lines.push(
    `What-if sweep ${iso(result.fromMs)} … ${iso(result.toMs)}, one step every ${formatDuration(result.stepSeconds)}, ${result.vms} VM${result.vms === 1 ? "" : "s"}, ${result.rows.length} replays`,
  );
  lines.push(
    `Likely false stop: used again within ${formatDuration(result.falseStopWindowSeconds)}; budget ${result.falseStopBudget} per 100 stops`,
  );
  lines.push("");
  const disputes = result.rows.some((row) => row.disputedStillStopped !== undefined);
  const header = [
    "value",
    "stops",
    "VM-h",
    "core-h",
    "GiB-h",
    "GPU-h",
    "likely false",
    "/100 stops",
    ...(disputes ? ["disputed still stopped"] : []),
    "longest notice",
  ];
  const rows = [header];
  for (const row of result.rows)
    rows.push([
      label(row),
      String(row.stops),
      hours(row.vmHours),
      hours(row.coreHours),
      hours(row.memoryGiBHours),
      hours(row.gpuHours),
      String(row.likelyFalseStops),
      `${row.likelyFalsePer100.toFixed(1)}${row.withinBudget ? "" : " !"}`,
      ...(disputes ? [String(row.disputedStillStopped ?? 0)] : []),
      row.longestNoticeSeconds > 0 ? formatDuration(row.longestNoticeSeconds) : "-",
    ]);
  lines.push(...table(rows));
  lines.push("");
  // The chart: what each value reclaims (#) and its likely false stops (x), each against its own largest.
  lines.push("VM-hours reclaimed (#) and likely false stops (x):");
  const maxHours = Math.max(0, ...result.rows.map((row) => row.vmHours));
  const maxFalse = Math.max(0, ...result.rows.map((row) => row.likelyFalseStops));
  const width = Math.max(...result.rows.map((row) => label(row).length));
  for (const row of result.rows) {
    lines.push(`  ${label(row).padEnd(width)}  ${bar(row.vmHours, maxHours).padEnd(BAR_WIDTH)} ${hours(row.vmHours)}`);
    const falseBar = bar(row.likelyFalseStops, maxFalse).replace(/#/g, "x");
    if (falseBar) lines.push(`  ${"".padEnd(width)}  ${falseBar.padEnd(BAR_WIDTH)} ${row.likelyFalseStops}`);
  }
  lines.push("");
  const rec = result.recommendation;
  if (rec.overrides) {
    lines.push(
      `Recommended: ${Object.entries(rec.overrides)
        .map(([name, value]) => `${name} ${value}`)
        .join(", ")} — ${rec.why}.`,
    );
    lines.push(`  In the collector config: ${rec.config}`);
    lines.push(`  Or on the VMs: ${rec.annotate}`);
  } else lines.push(`No recommendation: ${rec.why}.`);
  lines.push("Values marked ! exceed the budget.");
  return `${lines.join("\n")}\n`;
}

export function formatSweepJson(result: SweepResult): string {
  return `${JSON.stringify(
    {
      from: iso(result.fromMs),
      to: iso(result.toMs),
      stepSeconds: result.stepSeconds,
      falseStopWindowSeconds: result.falseStopWindowSeconds,
      falseStopBudgetPer100: result.falseStopBudget,
      vms: result.vms,
      knobs: result.knobs,
      rows: result.rows,
      recommendation: result.recommendation,
    },
    null,
    2,
  )}\n`;
}
