// The pages' money (docs/cost.md): per namespace, owner and profile, what the VMs held, used, gave
// back through ws's stops and would have given back in enforce mode; in money with prices, in
// resource-hours without. And each VM's configured size beside its p95 use, with the right-sizing
// hint. Pure: the spend report in, HTML out.
import type { SpendReport, VmSpendFigures, VmUsageRow } from "../outreach/money/fleet-spend.js";
import { type ResourceSeconds, SPEND_KINDS, type SpendKind } from "../outreach/money/spend.js";
import { RIGHT_SIZE_UNDER, USAGE_DAYS } from "../outreach/money/usage.js";
import { at, escapeHtml } from "./html.js";

const KIND_TITLE: Record<SpendKind, string> = {
  held: "Held (running)",
  inUse: "In use",
  givenBack: "Given back by ws",
  wouldGiveBack: "Enforce mode would give back",
};

const hours = (seconds: number) => (seconds / 3600).toFixed(1);

/** One figure: money with prices ("12.34 EUR"), else core-, GiB- and GPU-hours. */
export function spendFigure(figure: ResourceSeconds, currency: string | undefined): string {
  if (currency !== undefined) return `${figure.money.toFixed(2)}${currency ? ` ${escapeHtml(currency)}` : ""}`;
  const parts = [`${hours(figure.cpuCore)} core-h`, `${hours(figure.memoryGiB)} GiB-h`];
  if (figure.gpu > 0) parts.push(`${hours(figure.gpu)} GPU-h`);
  return parts.join(" · ");
}

const percent = (ratio: number | undefined) => (ratio === undefined ? "—" : `${Math.round(ratio * 100)}%`);

function usageCells(row: VmUsageRow): string {
  const gib = row.capacity.memoryBytes === null ? "?" : `${Math.round(row.capacity.memoryBytes / 2 ** 30)} GiB`;
  return `<td>${row.capacity.cpuCores ?? "?"} cores · p95 ${percent(row.p95.cpu)}</td><td>${gib} · p95 ${percent(row.p95.memory)}</td><td>${row.capacity.gpus ? `${row.capacity.gpus} · p95 ${percent(row.p95.gpu)}` : "—"}</td>`;
}

/** The fleet page's section: the sums, then the VMs' size beside their use (only VMs the caller lets through). */
export function spendSection(
  report: SpendReport,
  shown: (row: { namespace: string; owner: string }) => boolean,
): string {
  const rows = report.rows.filter(shown);
  const vms = report.vms.filter(shown);
  if (rows.length === 0 && vms.length === 0) return "";
  const unit = report.currency !== undefined ? "money" : "resource-hours";
  const body = rows
    .map(
      (r) =>
        `<tr data-group="${escapeHtml(`${r.namespace}/${r.owner}/${r.profile}`)}"><td>${escapeHtml(r.namespace)}</td><td>${escapeHtml(r.owner || "—")}</td><td>${escapeHtml(r.profile || "—")}</td><td>${r.vms}</td>${SPEND_KINDS.map((k) => `<td data-kind="${k}">${spendFigure(r.spend[k], report.currency)}</td>`).join("")}</tr>`,
    )
    .join("\n");
  const usage = vms
    .map(
      (v) =>
        `<tr data-sized-vm="${escapeHtml(`${v.namespace}/${v.name}`)}"><td>${escapeHtml(v.namespace)}/${escapeHtml(v.name)}</td>${usageCells(v)}<td class="hint">${v.hint ? escapeHtml(v.hint) : "—"}</td></tr>`,
    )
    .join("\n");
  return `<h2 id="spend-title">What the fleet holds${report.currency !== undefined ? " and costs" : ""}</h2>
<p>Since ${at(report.sinceMs)} (this collector's start; Prometheus keeps the month: <code>workstation_resource_seconds_total</code>${report.currency !== undefined ? ", <code>workstation_spend_total</code>" : ""}, docs/cost.md). In ${unit}${report.currency === undefined ? " (set <code>prices:</code> in the collector's config for money)" : ""}. <b>Enforce mode would give back</b>: observe-mode VMs past the moment enforce mode would have stopped them.</p>
<table id="spend" data-unit="${unit}"><thead><tr><th>Namespace</th><th>Owner</th><th>Profile</th><th>VMs</th>${SPEND_KINDS.map((k) => `<th>${KIND_TITLE[k]}</th>`).join("")}</tr></thead>
<tbody>
${body}
</tbody></table>
<h3>Configured size beside use</h3>
<p>p95 of the agent's readings over the last ${USAGE_DAYS} days this collector watched. A hint appears where a VM's p95 stays under ${Math.round(RIGHT_SIZE_UNDER * 100)}% of what it holds.</p>
<table id="right-sizing"><thead><tr><th>VM</th><th>CPU</th><th>Memory</th><th>GPUs</th><th>Hint</th></tr></thead>
<tbody>
${usage}
</tbody></table>`;
}

/** The VM page's box: this VM's figures and its size beside its use. */
export function vmSpendBox(figures: VmSpendFigures, currency: string | undefined): string {
  const group = figures.group;
  const list = SPEND_KINDS.map(
    (k) =>
      `<li data-kind="${k}">${KIND_TITLE[k]}: ${spendFigure(figures.spend[k], currency)} <small class="group">(${escapeHtml(group.namespace)} · ${escapeHtml(group.owner || "no owner")} · ${escapeHtml(group.profile || "no profile")}: ${spendFigure(group.spend[k], currency)})</small></li>`,
  ).join("");
  return `<h2>What this VM holds${currency !== undefined ? " and costs" : ""}</h2>
<div class="box" id="vm-spend"><p>This VM, and in brackets its namespace, owner and profile together.</p><ul>${list}</ul>
<table><thead><tr><th>CPU</th><th>Memory</th><th>GPUs</th></tr></thead><tbody><tr>${usageCells(figures.usage).replace(/<td>/, "<td>")}</tr></tbody></table>
<p id="right-sizing-hint">${figures.usage.hint ? escapeHtml(figures.usage.hint) : `No right-sizing hint (p95 over ${figures.usage.days} day(s) of readings).`}</p></div>`;
}
