// The fleet page: one row per VM, sortable and filterable by state, namespace
// and owner through the query string (links and a GET form: no JavaScript).
// Pure: views and the query in, HTML out.
import type { WrongStopRate } from "../outreach/rates/ledger.js";
import { ratesSection } from "./rates-section.js";
import type { DormantVm } from "../outreach/dormant/report.js";
import { dormantSection } from "./dormant-section.js";
import type { GivenBackRow } from "../outreach/adoption/given-back.js";
import { countAgentVersions } from "../metrics/agent-versions.js";
import { formatDuration } from "@ws/protocol";
import type { VmView } from "../model/vm-view.js";
import { escapeHtml, page, when } from "./html.js";

export interface FleetQuery {
  state?: string;
  namespace?: string;
  owner?: string;
  sort: SortKey;
  descending: boolean;
}

export const SORT_KEYS = ["vm", "owner", "state", "idle", "stop", "report"] as const;
export type SortKey = (typeof SORT_KEYS)[number];

export function parseFleetQuery(params: URLSearchParams): FleetQuery {
  const sort = params.get("sort") ?? "vm";
  const pick = (key: string) => {
    const value = params.get(key);
    return value ? value.slice(0, 253) : undefined;
  };
  return {
    ...(pick("state") ? { state: pick("state")! } : {}),
    ...(pick("namespace") ? { namespace: pick("namespace")! } : {}),
    ...(pick("owner") !== undefined ? { owner: pick("owner")! } : {}),
    sort: (SORT_KEYS as readonly string[]).includes(sort) ? (sort as SortKey) : "vm",
    descending: params.get("dir") === "desc",
  };
}

const vmName = (v: VmView) => `${v.namespace}/${v.name}`;
const NO_VALUE = Number.POSITIVE_INFINITY;

function sortValue(v: VmView, key: SortKey): string | number {
  switch (key) {
    case "vm":
      return vmName(v);
    case "owner":
      return v.owner ?? "";
    case "state":
      return v.state;
    case "idle":
      return v.idleSeconds ?? -1;
    case "stop":
      return v.stopDeadlineMs ?? NO_VALUE;
    case "report":
      return v.lastReportAtMs ?? 0;
  }
}

export function selectVms(views: VmView[], query: FleetQuery): VmView[] {
  const shown = views.filter(
    (v) =>
      (query.state === undefined || v.state === query.state) &&
      (query.namespace === undefined || v.namespace === query.namespace) &&
      (query.owner === undefined || (v.owner ?? "") === query.owner),
  );
  const direction = query.descending ? -1 : 1;
  return shown.sort((a, b) => {
    const x = sortValue(a, query.sort);
    const y = sortValue(b, query.sort);
    const order = typeof x === "number" && typeof y === "number" ? x - y : String(x).localeCompare(String(y));
    return order !== 0 ? order * direction : vmName(a).localeCompare(vmName(b));
  });
}

/** The stop column: a countdown in enforce mode, "would stop" in observe mode, nothing when autostop is off. */
export function stopText(v: VmView, nowMs: number): string {
  if (v.stopDeadlineMs === undefined) return "—";
  return v.mode === "observe"
    ? `would stop ${when(v.stopDeadlineMs, nowMs)} <small>(observe: nothing is stopped)</small>`
    : `stops ${when(v.stopDeadlineMs, nowMs)}`;
}

function queryString(query: FleetQuery, change: Partial<FleetQuery>): string {
  const next = { ...query, ...change };
  const params = new URLSearchParams();
  if (next.state) params.set("state", next.state);
  if (next.namespace) params.set("namespace", next.namespace);
  if (next.owner !== undefined) params.set("owner", next.owner);
  if (next.sort !== "vm") params.set("sort", next.sort);
  if (next.descending) params.set("dir", "desc");
  const text = params.toString();
  return text ? `?${text}` : "./";
}

function select(name: string, label: string, values: string[], chosen: string | undefined): string {
  const options = [
    `<option value="">all</option>`,
    ...values.map(
      (v) => `<option value="${escapeHtml(v)}"${v === chosen ? " selected" : ""}>${escapeHtml(v || "(none)")}</option>`,
    ),
  ];
  return `<label>${label} <select name="${name}">${options.join("")}</select></label>`;
}

/** Which agent versions are connected; more than one is skew to finish (docs/install.md, Upgrade). */
function agentVersionsLine(views: VmView[]): string {
  const counts = countAgentVersions(views);
  if (counts.length === 0) return "";
  const list = counts.map((c) => `${escapeHtml(c.version)} × ${c.agents}`).join(", ");
  const skew = counts.length > 1 ? " — more than one version: finish the agents' upgrade" : "";
  return `<p id="agent-versions">Agents: ${list}${skew}</p>`;
}

const hours = (seconds: number) => (seconds / 3600).toFixed(1);

/**
 * What ws's own stops gave back, per namespace and owner (the page's filters apply), beside the
 * GPUs those VMs are configured with: the figure a site reports, next to configured capacity.
 */
export function givenBackSection(rows: readonly GivenBackRow[], views: VmView[], query: FleetQuery): string {
  const shown = rows.filter(
    (r) =>
      (!query.namespace || r.namespace === query.namespace) && (query.owner === undefined || r.owner === query.owner),
  );
  if (shown.length === 0) return "";
  const configuredGpus = (r: GivenBackRow) =>
    views
      .filter((v) => v.namespace === r.namespace && (v.owner ?? "") === r.owner)
      .reduce((sum, v) => sum + (v.gpuCount ?? 0), 0);
  const body = shown
    .map(
      (r) =>
        `<tr><td>${escapeHtml(r.namespace)}</td><td>${escapeHtml(r.owner || "—")}</td><td>${r.stoppedNow}</td><td>${hours(r.vmSeconds)}</td><td>${hours(r.cpuCoreSeconds)}</td><td>${hours(r.memoryByteSeconds / 2 ** 30)}</td><td>${hours(r.gpuSeconds)}</td><td>${configuredGpus(r)}</td></tr>`,
    )
    .join("\n");
  return `<h2>Given back by ws's stops</h2>
<p>Hours VMs that ws stopped stayed stopped, since this collector started (Prometheus keeps the history: <code>workstation_freed_*_total</code>). VMs stopped by someone else or created Halted are not counted.</p>
<table id="given-back"><thead><tr><th>Namespace</th><th>Owner</th><th>Stopped by ws now</th><th>VM-hours</th><th>CPU core-hours</th><th>Memory GiB-hours</th><th>GPU-hours</th><th>GPUs configured</th></tr></thead>
<tbody>
${body}
</tbody></table>`;
}

export function renderFleetPage(
  views: VmView[],
  nowMs: number,
  info: { version: string; mode: string; leader: boolean },
  query: FleetQuery,
  /** The signed-in viewer (pages behind the site's login): named on the page, and what they see. */
  viewer?: { user: string; admin: boolean },
  givenBack: readonly GivenBackRow[] = [],
  /** The money section (web/spend-section.ts), already filtered to what the viewer may see. */
  spendHtml = "",
  /** Dormant VMs (Kubernetes mode; undefined: no section). */
  dormant?: readonly DormantVm[],
  /** How often ws is wrong, per profile (undefined: no section). */
  rates?: readonly WrongStopRate[],
): string {
  const rows = selectVms(views, query)
    .map((v) => {
      const leases =
        v.leases
          .map(
            (l) =>
              `${escapeHtml(l.user)} ${when(l.expiresAtMs, nowMs)}${l.clamped ? " (clamped)" : ""}${l.reason ? `<br><small>${escapeHtml(l.reason)}</small>` : ""}`,
          )
          .join("<br>") || "—";
      return `<tr class="${escapeHtml(v.state)}" data-vm="${escapeHtml(vmName(v))}">
<td><a href="vm/${encodeURIComponent(v.namespace)}/${encodeURIComponent(v.name)}">${escapeHtml(v.namespace)}/${escapeHtml(v.name)}</a></td>
<td>${escapeHtml(v.owner || "—")}</td>
<td>${escapeHtml(v.state)}${v.mode === "observe" ? " <small>(observe)</small>" : ""}${v.autostop ? "" : " <small>(autostop off)</small>"}</td>
<td>${v.connected ? `yes${v.agentVersion ? ` <small>${escapeHtml(v.agentVersion)}</small>` : ""}` : "no"}</td>
<td>${v.idleSeconds === undefined ? "—" : formatDuration(v.idleSeconds)} / ${formatDuration(v.idleTimeoutSeconds)}</td>
<td>${escapeHtml(v.activeSignals.join(", ") || "none")}</td>
<td>${stopText(v, nowMs)}</td>
<td>${leases}</td>
<td>${when(v.lastReportAtMs, nowMs)}</td>
<td>${escapeHtml(v.explanation)}${v.policyErrors.length ? `<br><b>policy errors:</b> ${escapeHtml(v.policyErrors.join("; "))}` : ""}</td>
</tr>`;
    })
    .join("\n");
  const distinct = (pick: (v: VmView) => string) => [...new Set(views.map(pick))].sort();
  const header = (key: SortKey | undefined, label: string) => {
    if (!key) return `<th>${label}</th>`;
    const active = query.sort === key;
    const arrow = active ? (query.descending ? " ▼" : " ▲") : "";
    return `<th${active ? ` aria-sort="${query.descending ? "descending" : "ascending"}"` : ""}><a href="${escapeHtml(queryString(query, { sort: key, descending: active && !query.descending }))}">${label}${arrow}</a></th>`;
  };
  const observeCount = views.filter((v) => v.mode === "observe").length;
  return page(
    "ws-collector — workstations",
    `<h1>Workstations</h1>
<p>ws-collector ${escapeHtml(info.version)} · ${escapeHtml(info.mode)} mode · ${info.leader ? "leader" : "standby"} · ${views.length} VM(s) · ${viewer ? "" : '<a href="metrics">/metrics</a> · '}<a href="api/vms">/api/vms</a></p>
${viewer ? `<p id="viewer">Signed in as <strong>${escapeHtml(viewer.user)}</strong>${viewer.admin ? " (admin: every VM)" : ": your VMs"}</p>` : ""}
${agentVersionsLine(views)}
${observeCount ? `<p class="box" id="observe-note">${observeCount} VM(s) in <b>observe mode</b>: they would be stopped as shown, but nothing is stopped and nobody is warned (unless their policy sets observe-notices).</p>` : ""}
<form class="filters" method="get" action="">
${select(
  "state",
  "State",
  distinct((v) => v.state),
  query.state,
)}
${select(
  "namespace",
  "Namespace",
  distinct((v) => v.namespace),
  query.namespace,
)}
${select(
  "owner",
  "Owner",
  distinct((v) => v.owner ?? ""),
  query.owner,
)}
${query.sort !== "vm" ? `<input type="hidden" name="sort" value="${escapeHtml(query.sort)}">` : ""}${query.descending ? `<input type="hidden" name="dir" value="desc">` : ""}
<button type="submit">Filter</button> <a href="./">clear</a>
</form>
<table id="fleet"><thead><tr>${header("vm", "VM")}${header("owner", "Owner")}${header("state", "State")}${header(undefined, "Agent")}${header("idle", "Idle / timeout")}${header(undefined, "Active signals")}${header("stop", "Stop")}${header(undefined, "Leases")}${header("report", "Last report")}${header(undefined, "Why")}</tr></thead>
<tbody>
${rows || `<tr><td colspan="10">${views.length ? "No VM matches the filter." : "No VMs yet: agents appear here when they connect."}</td></tr>`}
</tbody></table>
${givenBackSection(givenBack, views, query)}
${spendHtml}

${ratesSection(rates, nowMs)}
${dormantSection(dormant, nowMs)}`,
    { refreshSeconds: 10 },
  );
}
