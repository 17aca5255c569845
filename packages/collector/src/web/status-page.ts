// The plain status page: one row per VM, readable without JavaScript. Pure.
import { formatDuration } from "@ws/protocol";
import type { VmView } from "../view.js";

const escapeHtml = (text: string) =>
  text.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c] ?? c);

const when = (ms: number | undefined, nowMs: number) =>
  ms === undefined ? "—" : ms >= nowMs ? `in ${formatDuration((ms - nowMs) / 1000)}` : `${formatDuration((nowMs - ms) / 1000)} ago`;

export function renderStatusPage(views: VmView[], nowMs: number, info: { version: string; mode: string; leader: boolean }): string {
  const rows = views
    .map((v) => {
      const leases = v.leases.map((l) => `${escapeHtml(l.user)} ${when(l.expiresAtMs, nowMs)}${l.clamped ? " (clamped)" : ""}`).join("<br>") || "—";
      return `<tr class="${escapeHtml(v.state)}">
<td>${escapeHtml(v.namespace)}/${escapeHtml(v.name)}${v.owner !== undefined ? `<br><small>owner ${escapeHtml(v.owner)}</small>` : ""}</td>
<td>${escapeHtml(v.state)}${v.mode === "observe" ? " <small>(observe)</small>" : ""}</td>
<td>${v.connected ? "yes" : "no"}</td>
<td>${v.idleSeconds === undefined ? "—" : formatDuration(v.idleSeconds)} / ${formatDuration(v.idleTimeoutSeconds)}</td>
<td>${escapeHtml(v.activeSignals.join(", ") || "none")}</td>
<td>${when(v.stopDeadlineMs, nowMs)}</td>
<td>${leases}</td>
<td>${when(v.lastReportAtMs, nowMs)}</td>
<td>${escapeHtml(v.explanation)}${v.policyErrors.length ? `<br><b>policy errors:</b> ${escapeHtml(v.policyErrors.join("; "))}` : ""}</td>
</tr>`;
    })
    .join("\n");
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta http-equiv="refresh" content="5">
<title>ws-collector — workstations</title>
<style>
body{font-family:system-ui,sans-serif;margin:1.5rem;color:#222}
table{border-collapse:collapse;width:100%}th,td{border-bottom:1px solid #ddd;padding:.4rem .6rem;text-align:left;vertical-align:top;font-size:.9rem}
th{background:#f4f4f4}.StoppingPending{background:#fff4d6}.Stopping,.Stopped{background:#eee}.AgentLost{background:#fde2e2}
small{color:#666}
</style></head><body>
<h1>Workstations</h1>
<p>ws-collector ${escapeHtml(info.version)} · ${escapeHtml(info.mode)} mode · ${info.leader ? "leader" : "standby"} · ${views.length} VM(s) · <a href="metrics">/metrics</a> · <a href="api/vms">/api/vms</a></p>
<table><thead><tr><th>VM</th><th>State</th><th>Agent</th><th>Idle / timeout</th><th>Active signals</th><th>Stop</th><th>Leases</th><th>Last report</th><th>Why</th></tr></thead>
<tbody>
${rows || '<tr><td colspan="9">No VMs yet: agents appear here when they connect.</td></tr>'}
</tbody></table>
</body></html>
`;
}
