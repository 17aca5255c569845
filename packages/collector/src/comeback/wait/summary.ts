// The fleet page's "Waiting to come back" table (issue 36 item 3): p50 and p95 of each stage of
// the returns of the last 7 days, per trigger and in all. From the collector's own record of the
// returns it saw become ready (in memory: since this collector started, at most 7 days; a restart
// or a failover starts it again — Prometheus keeps the same as workstation_return_wait_seconds).
// Pure: the waits in, the figures and their HTML out.
import { formatDuration } from "@ws/protocol";
import { escapeHtml } from "../../web/html.js";
import { WAIT_STAGES, type WaitSplit, type WaitStage, type WaitTrigger } from "./stages.js";

export interface RecordedWait {
  atMs: number;
  trigger: WaitTrigger;
  split: WaitSplit;
}

export const SUMMARY_WINDOW_MS = 7 * 24 * 3600_000;

/** The nearest-rank quantile of sorted `values`. */
function quantile(sorted: readonly number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))] ?? 0;
}

export interface WaitRow {
  trigger: WaitTrigger | "all";
  returns: number;
  stages: Record<WaitStage, { p50: number; p95: number }>;
}

/** One row per trigger seen in the window, then "all"; none when no return is in the window. */
export function summarizeWaits(waits: readonly RecordedWait[], nowMs: number): WaitRow[] {
  const recent = waits.filter((w) => nowMs - w.atMs <= SUMMARY_WINDOW_MS && w.atMs <= nowMs);
  if (recent.length === 0) return [];
  const groups = new Map<WaitTrigger | "all", RecordedWait[]>();
  for (const w of recent) groups.set(w.trigger, [...(groups.get(w.trigger) ?? []), w]);
  const row = (trigger: WaitTrigger | "all", group: readonly RecordedWait[]): WaitRow => {
    const stages = {} as WaitRow["stages"];
    for (const stage of WAIT_STAGES) {
      const sorted = group.map((w) => w.split[stage]).sort((a, b) => a - b);
      stages[stage] = { p50: quantile(sorted, 0.5), p95: quantile(sorted, 0.95) };
    }
    return { trigger, returns: group.length, stages };
  };
  return [...[...groups.keys()].sort().map((t) => row(t, groups.get(t)!)), row("all", recent)];
}

const secs = (seconds: number) => (seconds < 10 ? `${seconds.toFixed(1)}s` : formatDuration(Math.round(seconds)));

export function waitSummaryHtml(rows: readonly WaitRow[]): string {
  if (rows.length === 0) return "";
  const head = WAIT_STAGES.map((stage) => `<th>${stage} p50 / p95</th>`).join("");
  const body = rows
    .map(
      (r) =>
        `<tr data-trigger="${escapeHtml(r.trigger)}"><td>${escapeHtml(r.trigger)}</td><td>${r.returns}</td>${WAIT_STAGES.map((stage) => `<td>${secs(r.stages[stage].p50)} / ${secs(r.stages[stage].p95)}</td>`).join("")}</tr>`,
    )
    .join("\n");
  return `<h2>Waiting to come back (7 days)</h2>
<p><small>Each return's wait from the request to Ready, by stage: placement (waiting for a node or a GPU), boot, guest, report. Since this collector started (at most 7 days); Prometheus has the same as <code>workstation_return_wait_seconds</code>.</small></p>
<table id="return-waits"><thead><tr><th>Trigger</th><th>Returns</th>${head}</tr></thead>
<tbody>
${body}
</tbody></table>`;
}
