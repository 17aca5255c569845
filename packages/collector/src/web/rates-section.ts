// The fleet page's "How often ws is wrong" section (issue 38 item 2): per profile, over 7 and 30
// days, ws's stops followed by a return within 15 minutes and the stops their user disputed, per
// 100 stops. Pure.
import type { WrongStopRate } from "../outreach/rates/ledger.js";
import { escapeHtml } from "./html.js";

/** Above this many per 100 stops a rate asks for tuning (the default budget of whatif --sweep). */
export const WRONG_STOP_BUDGET_PER_100 = 1;

const cell = (rate: number | null, count: number, cls: string) =>
  rate === null
    ? `<td class="${cls}">—</td>`
    : rate > WRONG_STOP_BUDGET_PER_100
      ? `<td class="${cls} over" title="over ${WRONG_STOP_BUDGET_PER_100} per 100 stops: tune"><strong>${rate}</strong> <small>(${count})</small></td>`
      : `<td class="${cls}">${rate} <small>(${count})</small></td>`;

export function ratesSection(rates: readonly WrongStopRate[] | undefined, nowMs: number): string {
  if (rates === undefined) return "";
  const rows = rates
    .map(
      (r) =>
        `<tr data-profile="${escapeHtml(r.profile)}" data-window="${r.window}"><td>${escapeHtml(r.profile || "(defaults)")}</td><td>${r.window}${r.sinceMs > nowMs - (r.window === "7d" ? 7 : 30) * 86_400_000 ? ` <small>(since ${new Date(r.sinceMs).toISOString().slice(0, 16).replace("T", " ")} UTC)</small>` : ""}</td><td class="stops">${r.stops}</td>${cell(r.quickReturnsPer100, r.quickReturns, "returns")}${cell(r.disputesPer100, r.disputes, "disputes")}</tr>`,
    )
    .join("\n");
  return `<h2 id="rates-heading">How often ws is wrong</h2>
<p>Per 100 of ws's stops: VMs active again within 15 minutes, and stops their user disputed. Above ${WRONG_STOP_BUDGET_PER_100} per 100, tune (<code>ws-collector whatif --sweep</code>). As this collector saw it since it started; the recording rules in Prometheus keep the full history (<a href="api/rates">/api/rates</a>).</p>
<table id="rates"><thead><tr><th>Profile</th><th>Window</th><th>Stops</th><th>Returns within 15 min per 100 stops</th><th>Disputes per 100 stops</th></tr></thead>
<tbody>
${rows || '<tr><td colspan="5">No stops yet.</td></tr>'}
</tbody></table>`;
}
