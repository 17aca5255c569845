// /vm/NAMESPACE/NAME: why this VM is where it is. Each signal of the last
// report with whether it counted and why, the idle clock, the scheduled stop
// ("would stop" in observe mode), leases, the last transitions and a chart.
// Pure: the VM's detail and history in, HTML out.
import { formatDuration } from "@ws/protocol";
import type { ChartPoint, HistoryTransition } from "../outreach/history.js";
import type { VmDetail } from "../model/vm-view.js";
import { renderChart } from "./chart.js";
import { measuredRows } from "./signal-rows.js";
import { at, escapeHtml, page, when } from "./html.js";

export interface VmPageInput {
  detail: VmDetail;
  transitions: HistoryTransition[];
  points: ChartPoint[];
  chartSpanMs: number;
  nowMs: number;
  /** The VM's start link, shown while it is stopped (docs/coming-back.md). */
  startUrl?: string;
  /** What this VM holds and costs, its size beside its use (docs/cost.md); absent: not counted yet. */
  spend?: { html: string };
  /** The VM's start schedule (comeback/schedule/schedules.ts), when it has one. */
  schedule?: {
    line: string;
    valid: boolean;
    error?: string;
    description?: string;
    nextStart?: string;
    nextStopBy?: string;
  };
  /** The VM's learned warm starts, when it opted in or has a record of them (comeback/warm/plan.ts WarmStatus). */
  warmStart?: {
    on: boolean;
    now: string;
    waitingSinceMs?: number;
    lastWeek: { used: number; wasted: number };
    returns: number;
  };
}

/** How the agent went, after "not connected": said goodbye (on purpose) or vanished (docs/policy.md). */
function agentGoneText(view: VmPageInput["detail"]["view"], now: number): string {
  const gone = view.agentGone;
  if (!gone) return "";
  if (gone.how === "vanished")
    return ` <span id="agent-gone" data-how="vanished">— vanished without a goodbye (a crash, a kill or the network)</span>`;
  return ` <span id="agent-gone" data-how="stopped-on-purpose">— stopped on purpose ${when(gone.atMs, now)} (${escapeHtml(gone.reason)}): the VM is unmanaged</span>`;
}

/** "next start: Mon 7 Dec 08:45 CET", or why the schedule is not applied; a link to change it. */
function scheduleRow(input: VmPageInput): string {
  const { schedule } = input;
  const change = `<a href="../..${`/schedule/${encodeURIComponent(input.detail.view.namespace)}/${encodeURIComponent(input.detail.view.name)}`}" id="schedule-link">${schedule ? "change" : "set one"}</a>`;
  if (!schedule) return `<dt>Schedule</dt><dd id="schedule" data-valid="none">none (${change})</dd>`;
  if (!schedule.valid)
    return `<dt>Schedule</dt><dd id="schedule" data-valid="false"><b>invalid, not applied</b>: <code>${escapeHtml(schedule.line)}</code>: ${escapeHtml(schedule.error ?? "")} (${change})</dd>`;
  return `<dt>Schedule</dt><dd id="schedule" data-valid="true">${schedule.nextStart ? `next start: <strong id="next-start">${escapeHtml(schedule.nextStart)}</strong>; ` : ""}${escapeHtml(schedule.description ?? schedule.line)}${schedule.nextStopBy ? `; stop by ${escapeHtml(schedule.nextStopBy)} (notice and grace; activity or a lease keeps it running)` : ""} (${change})</dd>`;
}

/** "on: not yet: usual arrival 08:49, start from 08:44; last 7 days 2 used, 1 wasted; 14 returns learned from". */
function warmStartRow(input: VmPageInput): string {
  const warm = input.warmStart;
  if (!warm) return "";
  const waiting =
    warm.waitingSinceMs !== undefined
      ? `<strong id="warm-waiting">warm-started ${when(warm.waitingSinceMs, input.nowMs)}, waiting for you</strong>; `
      : "";
  const week = `last 7 days: ${warm.lastWeek.used} used, ${warm.lastWeek.wasted} wasted`;
  return `<dt>Warm start</dt><dd id="warm-start" data-on="${warm.on}">${warm.on ? "on" : "off"}: ${waiting}${escapeHtml(warm.now)}; ${week}; ${warm.returns} returns learned from</dd>`;
}

function stopBox(input: VmPageInput): string {
  const { view, policy, notice, explanation } = input.detail;
  const now = input.nowMs;
  const observe = view.mode === "observe";
  const warned = observe
    ? policy.observeNotices
      ? "users are warned (observe-notices is enabled)"
      : "nobody is warned"
    : "the VM's users are warned";
  if (!view.autostop)
    return `<div class="box" id="stop">Autostop is off for this VM: it is never stopped for being idle.</div>`;
  const stopAt = explanation?.stopAtMs ?? view.stopDeadlineMs;
  if (stopAt === undefined) {
    return `<div class="box ok" id="stop"><b>No stop scheduled.</b> ${escapeHtml(explanation?.reason ?? view.explanation)}</div>`;
  }
  const lead = observe
    ? `<b>Would stop at ${at(stopAt)}</b> (${when(stopAt, now)}) — observe mode: nothing is stopped, ${warned}.`
    : `<b>Stops at ${at(stopAt)}</b> (${when(stopAt, now)}) if nothing changes; ${warned}.`;
  const pending = notice
    ? `<br>${observe ? "Would-be notice" : "Notice"} since the idle timeout: ${escapeHtml(notice.reason)}.`
    : "";
  return `<div class="box warn" id="stop" data-mode="${escapeHtml(view.mode)}">${lead}${pending}</div>`;
}

function signalsTable(input: VmPageInput): string {
  const explanation = input.detail.explanation;
  if (!explanation) return `<p id="signals-none">No decision yet: the agent has not reported.</p>`;
  const now = input.nowMs;
  const rows = explanation.readings.map(
    (r) => `<tr class="reading" data-signal="${escapeHtml(r.signal)}" data-counted="${r.counted}">
<td>${escapeHtml(r.signal)}</td><td>${r.strength}</td><td>${escapeHtml(r.detail)}</td><td>${when(r.atMs, now)}</td>
<td class="${r.counted ? "counted" : "ignored"}">${r.counted ? "counted" : "not counted"}</td><td>${escapeHtml(r.note ?? (r.counted ? "fresh enough to move the idle clock" : ""))}</td></tr>`,
  );
  const vetoes = explanation.vetoes.map(
    (v) =>
      `<tr class="veto" data-signal="${escapeHtml(v.kind)}"><td>${escapeHtml(v.kind)}</td><td>veto</td><td>${escapeHtml(v.detail)}</td><td>${v.untilMs !== undefined ? `until ${when(v.untilMs, now)}` : "now"}</td><td class="counted">holds the VM</td><td>a stop is not allowed while this lasts</td></tr>`,
  );
  const blind = explanation.blind.map(
    (b) =>
      `<tr class="blind" data-signal="${escapeHtml(b.source)}"><td>${escapeHtml(b.source)}</td><td>unreadable</td><td>${escapeHtml(b.message)}</td><td>since ${when(b.sinceMs, now)}</td><td class="${b.holdsUntilMs !== undefined ? "counted" : "ignored"}">${b.holdsUntilMs !== undefined ? "holds the VM" : "not counted"}</td><td>${b.holdsUntilMs !== undefined ? `it had live content when last read: missing data is not idleness (until ${when(b.holdsUntilMs, now)})` : "nothing was running there when last read"}</td></tr>`,
  );
  const shown = new Set<string>([
    ...explanation.readings.map((r) => r.signal),
    ...explanation.vetoes.map((v) => v.kind),
  ]);
  const measured = input.detail.view.readings
    ? measuredRows(input.detail.view.readings, input.detail.policy.thresholds, shown).map(
        (m) =>
          `<tr class="measured" data-signal="${escapeHtml(m.signal)}" data-counted="${m.counted}"><td>${escapeHtml(m.signal)}</td><td>measured</td><td>${escapeHtml(m.reading)}</td><td>last report</td><td class="${m.counted ? "counted" : "ignored"}">${m.counted ? "counted" : "not counted"}</td><td>${escapeHtml(m.why)}</td></tr>`,
      )
    : [];
  const sources = input.detail.sources
    .filter((s) => s.state !== "ok")
    .map(
      (s) =>
        `<tr class="source" data-signal="${escapeHtml(s.source)}"><td>${escapeHtml(s.source)}</td><td>source</td><td>${escapeHtml(s.state)}${s.message ? `: ${escapeHtml(s.message)}` : ""}</td><td>last report</td><td class="ignored">not counted</td><td>${s.state === "absent" ? "nothing of this kind on the VM: not an error" : s.state === "disabled" ? "turned off in the agent's configuration" : "unreadable: see the blind sources above, missing data is never idleness"}</td></tr>`,
    );
  const all = [...vetoes, ...rows, ...blind, ...measured, ...sources];
  return `<table id="signals"><thead><tr><th>Signal</th><th>Kind</th><th>Latest reading</th><th>When</th><th>Counted?</th><th>Why</th></tr></thead><tbody>
${all.join("\n") || `<tr><td colspan="6">No signal shows any use in the latest report: every source was read and found idle.</td></tr>`}
</tbody></table>
<p class="muted">Decision: ${escapeHtml(explanation.reason)}</p>`;
}

/** The host-side source beside the agent: its state, its reading and what it did to the decision. */
function hostRow(input: VmPageInput): string {
  const host = input.detail.view.host;
  if (!host) return "";
  const role = input.detail.explanation?.host?.role;
  const disagree = host.disagreements.length
    ? ` <b class="disagree">The agent says idle, the host does not: ${escapeHtml(host.disagreements.join(", "))}.</b>`
    : "";
  return `<dt>Host side</dt><dd id="host" data-state="${escapeHtml(host.state)}">KubeVirt via Prometheus, ${escapeHtml(host.state)} ${when(host.atMs, input.nowMs)}: ${escapeHtml(host.summary)}${role ? `<br><small>${escapeHtml(role)}</small>` : ""}${disagree}</dd>`;
}

export function renderVmPage(input: VmPageInput): string {
  const { view, policy, explanation } = input.detail;
  const now = input.nowMs;
  const name = `${view.namespace}/${view.name}`;
  const leases = view.leases.length
    ? `<table id="leases"><thead><tr><th>Lease</th><th>Owner</th><th>Until</th><th>Reason</th></tr></thead><tbody>${view.leases
        .map(
          (l) =>
            `<tr><td><code>${escapeHtml(l.id)}</code></td><td>${escapeHtml(l.user)} <small>(uid ${l.uid})</small></td><td>${at(l.expiresAtMs)} (${when(l.expiresAtMs, now)})${l.clamped ? " <small>clamped to max-keep-running</small>" : ""}</td><td class="lease-reason">${escapeHtml(l.reason || "—")}</td></tr>`,
        )
        .join("")}</tbody></table>`
    : `<p id="leases">No lease holds this VM.</p>`;
  const transitions = input.transitions.length
    ? `<table id="transitions"><thead><tr><th>When</th><th>What</th><th>Why</th></tr></thead><tbody>${input.transitions
        .map(
          (t) =>
            `<tr><td>${at(t.atMs)} <small>(${when(t.atMs, now)})</small></td><td>${escapeHtml(t.what)}</td><td>${escapeHtml(t.reason)}</td></tr>`,
        )
        .join("")}</tbody></table>`
    : `<p id="transitions">No transitions recorded since this collector started.</p>`;
  const idle =
    view.idleSeconds !== undefined
      ? `${formatDuration(view.idleSeconds)} of ${formatDuration(view.idleTimeoutSeconds)}`
      : "unknown (no activity seen yet)";
  return page(
    `${name} — ws-collector`,
    `<p><a href="../../">← all workstations</a></p>
<h1>${escapeHtml(name)}</h1>
<dl>
<dt>Owner</dt><dd id="owner">${escapeHtml(view.owner || "—")}</dd>
<dt>State</dt><dd id="state">${escapeHtml(view.state)}${view.mode === "observe" ? " <b>(observe mode)</b>" : ""}</dd>
<dt>Agent</dt><dd>${view.connected ? `connected${view.agentVersion ? ` (ws-agent ${escapeHtml(view.agentVersion)})` : ""}` : `not connected${agentGoneText(view, now)}`}; last report ${when(view.lastReportAtMs, now)}</dd>
${hostRow(input)}
${scheduleRow(input)}
${warmStartRow(input)}
<dt>Idle clock</dt><dd id="idle">${idle}${explanation?.lastActivity ? `; last activity: ${escapeHtml(explanation.lastActivity)}` : ""}</dd>
<dt>Policy</dt><dd>${policy.autostopEnabled ? "autostop enabled" : "autostop off"}, ${escapeHtml(policy.mode)} mode${policy.profile ? `, profile ${escapeHtml(policy.profile)}` : ""}; idle-timeout ${formatDuration(policy.idleTimeoutSeconds)}, grace-period ${formatDuration(policy.gracePeriodSeconds)}, max-keep-running ${formatDuration(policy.maxKeepRunningSeconds)}</dd>
${view.policyErrors.length ? `<dt>Policy errors</dt><dd>${escapeHtml(view.policyErrors.join("; "))}</dd>` : ""}
</dl>
${stopBox(input)}
${input.startUrl && (view.state === "Stopped" || view.state === "Stopping") ? `<div class="box" id="start-link">Stopped. To start it again: <a href="${escapeHtml(input.startUrl)}">the start link</a> (a page with a Start button; it works until it expires, and a start that is under way just shows its progress).</div>` : ""}
<h2>Signals of the last report</h2>
${signalsTable(input)}
<h2>Leases</h2>
${leases}
<h2>Idle clock and activity</h2>
${renderChart(input.points, { nowMs: now, spanMs: input.chartSpanMs, idleTimeoutSeconds: view.idleTimeoutSeconds })}
<p class="muted">Blue: the idle clock (time since the last activity). Dashed red: the idle timeout. Green ticks: a signal showed use. Yellow: a stop was pending.</p>
${input.spend?.html ?? ""}
<h2>Last transitions</h2>
${transitions}
<p class="muted"><a href="../../api/vms">/api/vms</a> has the same data as JSON.</p>`,
    { refreshSeconds: 10 },
  );
}
