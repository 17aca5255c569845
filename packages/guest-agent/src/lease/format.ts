// What ws-lease prints for people. Pure: the agent's answer, the moment and
// the time zone in; text out.
import { formatDuration, sentence, terminalText } from "@ws/protocol";
import { formatSpan, formatStopIn } from "../notice/format.js";
import type { CapSource, WireLease, StatusView } from "./wire.js";

/**
 * A duration as people say it, in the form ws-lease accepts: "24h" rather
 * than "1d" below two days, "1h30m", "3d".
 */
export function formatLeaseDuration(seconds: number): string {
  const total = Math.max(0, Math.round(seconds));
  if (total < 3600 || total >= 48 * 3600) return formatDuration(total);
  const hours = Math.floor(total / 3600);
  const rest = total - hours * 3600;
  return `${hours}h${rest > 0 ? formatDuration(rest) : ""}`;
}

export interface Moment {
  nowMs: number;
  timeZone?: string;
}

function parts(wallMs: number, timeZone?: string): { day: string; weekday: string; date: string; time: string } {
  const formatted = new Intl.DateTimeFormat("en-GB", {
    timeZone,
    year: "numeric",
    month: "short",
    day: "numeric",
    weekday: "short",
    hour: "2-digit",
    minute: "2-digit",
    hourCycle: "h23",
  }).formatToParts(new Date(wallMs));
  const get = (type: string): string => formatted.find((part) => part.type === type)?.value ?? "";
  return {
    day: `${get("year")}-${get("month")}-${get("day")}`,
    weekday: get("weekday"),
    date: `${get("day")} ${get("month")}`,
    time: `${get("hour")}:${get("minute")}`,
  };
}

/** "14:32" today, "Sat 14:32" within the week, "Sat 6 Dec 14:32" beyond. */
export function formatWhen(wallMs: number, moment: Moment): string {
  const then = parts(wallMs, moment.timeZone);
  const now = parts(moment.nowMs, moment.timeZone);
  if (then.day === now.day) return then.time;
  if (Math.abs(wallMs - moment.nowMs) < 6 * 86_400_000) return `${then.weekday} ${then.time}`;
  return `${then.weekday} ${then.date} ${then.time}`;
}

/** One word or phrase for where a lease stands with the collector. */
export function leaseState(lease: WireLease): string {
  const via = lease.via === "link" ? "via link, " : "";
  return via + confirmationState(lease);
}

function confirmationState(lease: WireLease): string {
  if (lease.refused) return `refused by the collector${lease.message ? `: ${terminalText(lease.message, 120)}` : ""}`;
  if (lease.clamped) {
    const cap = lease.maxKeepRunningSeconds ?? lease.holdSeconds;
    return `clamped to ${formatLeaseDuration(cap)} (asked ${formatLeaseDuration(lease.requestedSeconds)})`;
  }
  return lease.confirmed ? "confirmed" : "not yet confirmed";
}

function table(rows: string[][]): string {
  const widths = rows[0]!.map((_, column) => Math.max(...rows.map((row) => (row[column] ?? "").length)));
  return `${rows
    .map((row) =>
      row
        .map((cell, column) => (column === row.length - 1 ? cell : cell.padEnd(widths[column]!)))
        .join("  ")
        .trimEnd(),
    )
    .join("\n")}\n`;
}

export function formatLeaseList(leases: WireLease[], moment: Moment): string {
  if (leases.length === 0)
    return `No leases: nothing is keeping this VM running on purpose.\nTake one with: ws-lease 8h --reason "what you are running"\n`;
  const rows = [["ID", "USER", "UNTIL", "LEFT", "STATE", "REASON"]];
  for (const lease of leases) {
    rows.push([
      lease.id,
      terminalText(lease.user, 32),
      formatWhen(Date.parse(lease.expiresAt), moment),
      formatSpan(lease.remainingSeconds),
      leaseState(lease),
      terminalText(lease.reason, 80) || "-",
    ]);
  }
  return table(rows);
}

export function formatTaken(lease: WireLease, collectorConnected: boolean, moment: Moment): string {
  const until = formatWhen(Date.parse(lease.expiresAt), moment);
  const lines = [
    `Lease ${lease.id} taken: this VM keeps running until ${until} (${formatSpan(lease.remainingSeconds)})${lease.reason ? `, for "${terminalText(lease.reason)}"` : ""}.`,
  ];
  if (lease.refused) {
    lines.push(
      `The collector refused it${lease.message ? `: ${terminalText(lease.message)}` : ""}. It does not keep the VM running.`,
    );
  } else if (lease.clamped) {
    lines.push(
      `The collector clamped it: you asked for ${formatLeaseDuration(lease.requestedSeconds)}, this VM's max-keep-running is ${formatLeaseDuration(lease.maxKeepRunningSeconds ?? lease.holdSeconds)}.`,
      `Take a new lease when this one runs out if you still need the VM.`,
    );
  } else if (lease.confirmed) {
    lines.push("The collector confirmed it.");
  } else if (collectorConnected) {
    lines.push("The collector has not confirmed it yet; it will at the next report (see: ws-lease status).");
  } else {
    lines.push(
      "The collector is not reachable right now: the lease is recorded on this VM and will be confirmed when it reconnects.",
    );
  }
  lines.push(`Cancel it early with: ws-lease cancel ${lease.id}`);
  return `${lines.join("\n")}\n`;
}

export function formatCancelled(cancelled: WireLease[]): string {
  if (cancelled.length === 0) return "No leases to cancel.\n";
  return `${cancelled
    .map(
      (lease) =>
        `Cancelled lease ${lease.id} of ${terminalText(lease.user, 32)}${lease.reason ? ` ("${terminalText(lease.reason, 80)}")` : ""}.`,
    )
    .join("\n")}\n`;
}

export function capExplanation(capSeconds: number, capSource: CapSource): string {
  return capSource === "policy"
    ? `${formatLeaseDuration(capSeconds)} (max-keep-running in this VM's policy)`
    : `${formatLeaseDuration(capSeconds)} (the default max-keep-running; the collector has not sent this VM's policy yet)`;
}

export function formatOverCap(requestedSeconds: number, capSeconds: number, capSource: CapSource): string {
  return (
    `ws-lease: ${formatLeaseDuration(requestedSeconds)} is longer than this VM allows: a lease can last at most ${capExplanation(capSeconds, capSource)}.\n` +
    `Ask for ${formatLeaseDuration(capSeconds)} or less (ws-lease ${formatLeaseDuration(capSeconds)}), and take a new lease when it runs out if you still need the VM.\n`
  );
}

const STATE_WORDS: Record<string, string> = {
  Active: "in use",
  StoppingPending: "idle, stop pending",
  Stopping: "stopping",
  Stopped: "stopped",
  AgentLost: "not heard from (agent lost)",
  Unknown: "not yet known",
};

export function formatStatus(status: StatusView, moment: Moment): string {
  const out: string[] = [];
  if (status.notice) {
    const notice = status.notice;
    const at = formatWhen(Date.parse(notice.stopAt), moment);
    if (notice.mode === "observe") {
      out.push(
        `WOULD STOP ${formatStopIn(notice.stopInSeconds).toUpperCase()} (at ${at}), but this VM is in observe mode: nothing will be stopped.`,
      );
    } else {
      out.push(`STOP PENDING: this VM will stop ${formatStopIn(notice.stopInSeconds)} (at ${at}).`);
    }
    const why = terminalText(notice.reason) || `no activity for ${formatSpan(notice.idleSeconds)}`;
    out.push(
      sentence(`  Why: ${why}`),
      `  To keep it running: ws-lease 2h (or any activity: type in a terminal, run a notebook cell).`,
      "",
    );
  }

  if (status.vm) {
    const vm = status.vm;
    const fresh = vm.ageSeconds < 120 ? "" : ` (last heard ${formatSpan(vm.ageSeconds)} ago)`;
    out.push(
      `VM:          ${STATE_WORDS[vm.state] ?? terminalText(vm.state, 40)}${vm.mode === "observe" ? " — observe mode: nothing is ever stopped" : ""}${fresh}`,
    );
    out.push(
      vm.activeSignals.length > 0
        ? `Activity:    seen in use now by: ${vm.activeSignals.map((signal) => terminalText(signal, 40)).join(", ")}`
        : `Activity:    idle for ${formatSpan(vm.idleSeconds)} (no signal shows use)`,
    );
    if (vm.stopInSeconds !== undefined && vm.stopAt !== undefined) {
      out.push(
        `Stop:        would stop ${formatStopIn(vm.stopInSeconds)} (at ${formatWhen(Date.parse(vm.stopAt), moment)}) if nothing changes`,
      );
    } else {
      out.push(`Stop:        none scheduled`);
    }
    if (vm.explanation) out.push(`             ${terminalText(vm.explanation)}`);
  } else {
    out.push(`VM:          the collector has not said anything about this VM yet`);
  }
  if (status.policy) {
    const policy = status.policy;
    out.push(
      policy.autostopEnabled
        ? `Policy:      stops after ${formatLeaseDuration(policy.idleTimeoutSeconds)} idle, with a ${formatLeaseDuration(policy.gracePeriodSeconds)} warning${policy.profile ? ` (profile ${terminalText(policy.profile, 40)})` : ""}`
        : `Policy:      autostop is off for this VM`,
    );
  }

  const collector = status.collector;
  const since = collector.sinceSeconds !== undefined ? ` for ${formatSpan(collector.sinceSeconds)}` : "";
  if (collector.connected) {
    out.push(`Collector:   connected${collector.address ? ` to ${terminalText(collector.address, 200)}` : ""}${since}`);
  } else {
    out.push(
      `Collector:   NOT connected${collector.address ? ` (${terminalText(collector.address, 200)})` : ""}${since}: leases are recorded here and confirmed when it reconnects`,
    );
  }

  out.push("");
  if (status.leases.length === 0) {
    out.push(`Leases:      none`);
  } else {
    out.push(`Leases:      ${status.leases.length}`);
    for (const lease of status.leases) {
      const until = formatWhen(Date.parse(lease.expiresAt), moment);
      out.push(
        `  ${lease.id}  ${terminalText(lease.user, 32)} (uid ${lease.uid})  until ${until} (${formatSpan(lease.remainingSeconds)} left)  ${leaseState(lease)}${lease.reason ? `  "${terminalText(lease.reason, 80)}"` : ""}`,
      );
    }
  }
  out.push(`Cap:         a lease lasts at most ${capExplanation(status.capSeconds, status.capSource)}`);
  out.push("");
  out.push(`Keep this VM running: ws-lease 8h --reason "what you are running"    More: ws-lease --help`);
  return `${out.join("\n")}\n`;
}
