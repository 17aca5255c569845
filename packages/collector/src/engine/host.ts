// Host-side evidence in the engine: KubeVirt's own per-VM metrics (read by
// hostside/ through Prometheus) enter decide() as part of the observation.
// Pure: the reading, the policy and the time are arguments.
//
// With an agent, the agent decides and the host readings are only shown beside
// its signals. Without one (lost, or never connected) for agent-lost-max, the
// host readings decide as agent evidence would: a busy vCPU, traffic or disk
// I/O above the policy's thresholds is background work (bounded by
// unattended-max like the agent's), an open VNC, console or port-forward
// connection is a person; the VM is idle only when unbroken ok readings show
// neither for idle-timeout. A reading that failed, is absent or is stale
// breaks that run: missing data is never idleness.
//
// What the host cannot see is not idleness either (docs/policy.md, "What the
// host cannot see"): a VM with passthrough GPUs is never judged idle
// without a reading of those GPUs, and after the agent last saw a person the
// host must show quiet for idle-timeout past that moment, not only past the
// agent's loss (someone typing over SSH moves less than any threshold).
//
// How the agent went matters (docs/policy.md, "An agent that said goodbye"). One that vanished
// (crash, SIGKILL, the network: no Goodbye) may come back and may have left a person typing:
// the rule waits agent-lost-max and counts the host's quiet from idle-timeout after the last
// person it saw. One that said goodbye was stopped on purpose by root (systemctl stop, package
// removal): the VM is knowingly unmanaged, there is nothing to wait for, and that act is the last
// person seen: the host's quiet counts from the goodbye, with no agent-lost-max wait.
import { formatDuration } from "@ws/protocol";
import { unattendedEndsAtMs } from "./activity.js";
import { interactiveTraffic, keepPacketWindows, packetWindow } from "./host-traffic.js";
import type { HostClock, HostExplanation, HostReading, Policy, Thresholds, VmRecord } from "./types.js";

const duration = (ms: number): string => formatDuration(Math.max(0, ms) / 1000);

/** "2 kB/s": decimal units, as the thresholds are written. */
export function formatRate(bytesPerSecond: number): string {
  const units = ["B/s", "kB/s", "MB/s", "GB/s"];
  let value = Math.max(0, bytesPerSecond);
  let unit = 0;
  while (value >= 1000 && unit < units.length - 1) {
    value /= 1000;
    unit++;
  }
  return `${value >= 10 || unit === 0 ? Math.round(value) : value.toFixed(1)} ${units[unit]}`;
}

const packetRate = (n: number): string => (n >= 10 ? String(Math.round(n)) : n.toFixed(1));

function percent(ratio: number): string {
  const value = ratio * 100;
  return `${value >= 10 ? Math.round(value) : value.toFixed(1)} %`;
}

function connections(reading: HostReading): string {
  const open: string[] = [];
  const count = (n: number | undefined, what: string) => {
    if (n !== undefined && n > 0) open.push(`${n} ${what}${n === 1 ? "" : "s"}`);
  };
  count(reading.vncConnections, "VNC connection");
  count(reading.consoleConnections, "console connection");
  count(reading.portForwardTunnels, "port-forward tunnel");
  return open.length > 0 ? `${open.join(", ")} open` : "no VNC connection";
}

/** "vCPU 0.3 %, network 2 kB/s, disk 0 B/s, no VNC connection" (an ok reading), or why there is none. */
export function describeHostReading(reading: HostReading): string {
  if (reading.state !== "ok") return `${reading.state}: ${reading.message ?? "no reading"}`;
  const parts: string[] = [];
  if (reading.vcpuBusyRatio !== undefined) parts.push(`vCPU ${percent(reading.vcpuBusyRatio)}`);
  if (reading.networkBytesPerSecond !== undefined) parts.push(`network ${formatRate(reading.networkBytesPerSecond)}`);
  if (reading.receivePacketsPerSecond !== undefined && reading.transmitPacketsPerSecond !== undefined)
    parts.push(
      `packets ${packetRate(reading.receivePacketsPerSecond)}/s in, ${packetRate(reading.transmitPacketsPerSecond)}/s out`,
    );
  if (reading.diskBytesPerSecond !== undefined) parts.push(`disk ${formatRate(reading.diskBytesPerSecond)}`);
  parts.push(connections(reading));
  const gpus = reading.passthroughGpus ?? 0;
  if (gpus > 0)
    parts.push(
      reading.gpuBusyRatio === undefined
        ? `${gpus} passthrough GPU${gpus === 1 ? "" : "s"} (not read: the host cannot see their work)`
        : `${gpus} passthrough GPU${gpus === 1 ? "" : "s"}, busiest ${percent(reading.gpuBusyRatio)}`,
    );
  return parts.join(", ");
}

/** Why the host alone cannot call this VM idle, whatever its readings; undefined: it can. */
export function hostCannotSee(reading: HostReading): string | undefined {
  const gpus = reading.passthroughGpus ?? 0;
  if (gpus > 0 && reading.gpuBusyRatio === undefined)
    return `the VM holds ${gpus} passthrough GPU${gpus === 1 ? "" : "s"} and no GPU metric source reads ${gpus === 1 ? "it" : "them"}: a job feeding a GPU can leave the vCPU under cpu-busy-threshold`;
  return undefined;
}

/** The background work an ok reading shows at the policy's thresholds, in words; empty: none. */
export function hostBackground(reading: HostReading, thresholds: Thresholds): string[] {
  if (reading.state !== "ok") return [];
  const busy: string[] = [];
  if ((reading.vcpuBusyRatio ?? 0) >= thresholds.cpuBusyRatio)
    busy.push(`vCPU ${percent(reading.vcpuBusyRatio!)} ≥ ${percent(thresholds.cpuBusyRatio)}`);
  if ((reading.networkBytesPerSecond ?? 0) >= thresholds.networkBytesPerSecond)
    busy.push(
      `network ${formatRate(reading.networkBytesPerSecond!)} ≥ ${formatRate(thresholds.networkBytesPerSecond)}`,
    );
  if ((reading.diskBytesPerSecond ?? 0) >= thresholds.diskBytesPerSecond)
    busy.push(`disk ${formatRate(reading.diskBytesPerSecond!)} ≥ ${formatRate(thresholds.diskBytesPerSecond)}`);
  if (reading.gpuBusyRatio !== undefined && reading.gpuBusyRatio >= thresholds.gpuUtilizationRatio)
    busy.push(`GPU ${percent(reading.gpuBusyRatio)} ≥ ${percent(thresholds.gpuUtilizationRatio)}`);
  return busy;
}

/** Open connections of an ok reading, in words; undefined: none. */
export function hostConnection(reading: HostReading): string | undefined {
  if (reading.state !== "ok") return undefined;
  const total = (reading.vncConnections ?? 0) + (reading.consoleConnections ?? 0) + (reading.portForwardTunnels ?? 0);
  return total > 0 ? connections(reading) : undefined;
}

/** Takes a reading into the host clock (once: the same reading again changes nothing). */
export function advanceHostClock(
  previous: HostClock | undefined,
  reading: HostReading | undefined,
  policy: Policy,
): HostClock | undefined {
  if (!reading || (previous && reading.atMs <= previous.lastReadingAtMs)) return previous;
  const next: HostClock = { ...previous, lastReadingAtMs: reading.atMs };
  if (reading.state !== "ok") {
    next.coveredSinceMs = undefined;
    return next;
  }
  const windowStartMs = reading.atMs - reading.windowSeconds * 1000;
  const unbroken =
    previous?.coveredSinceMs !== undefined && previous.lastOkAtMs !== undefined && windowStartMs <= previous.lastOkAtMs;
  next.coveredSinceMs = unbroken ? previous.coveredSinceMs : windowStartMs;
  next.lastOkAtMs = reading.atMs;
  const background = hostBackground(reading, policy.thresholds);
  if (background.length > 0) {
    next.lastBackgroundAtMs = reading.atMs;
    next.lastBackgroundDetail = `host: ${background.join(", ")}`;
  }
  // A person's remote shell on the wire counts as a person, as an open connection does.
  const packets = packetWindow(reading);
  const windows = packets ? keepPacketWindows(previous?.packetWindows, packets) : undefined;
  if (windows) next.packetWindows = windows;
  const person = hostConnection(reading) ?? (windows ? interactiveTraffic(windows) : undefined);
  if (person) {
    next.lastConnectionAtMs = reading.atMs;
    next.lastConnectionDetail = `host: ${person}`;
  }
  return next;
}

/** A reading older than its own window no longer says anything about now. */
export function hostReadingFresh(reading: HostReading, nowMs: number): boolean {
  return reading.state === "ok" && nowMs - reading.atMs <= Math.max(reading.windowSeconds, 1) * 1000;
}

/**
 * The host-side idle clock's origin: the last activity the host saw (background work only up to
 * unattended-max after the last person, as for the agent), the agent's own last activity, the
 * start of the unbroken run of readings, or idle-timeout after the last person the agent saw,
 * whichever is latest. Undefined while the run is broken.
 *
 * The last term is the longer requirement after recent human evidence: a person the agent saw
 * just before it went away may still be there, typing over SSH at a few kB/s that no host
 * threshold tells from nothing. The host's quiet counts only from idle-timeout after them, so
 * a VM abandoned by its person when its agent died is stopped idle-timeout later than one
 * abandoned long before (docs/policy.md has the cost).
 */
export function hostIdleSinceMs(record: VmRecord, clock: HostClock | undefined, policy: Policy): number | undefined {
  if (clock?.coveredSinceMs === undefined) return undefined;
  const humanAtMs = Math.max(record.lastHumanAtMs ?? record.firstSeenMs, clock.lastConnectionAtMs ?? -Infinity);
  const unattendedOverAtMs = unattendedEndsAtMs(humanAtMs, policy) ?? Infinity;
  const backgroundAtMs = Math.min(clock.lastBackgroundAtMs ?? -Infinity, unattendedOverAtMs);
  return Math.max(
    clock.coveredSinceMs,
    record.clock.lastActivityAtMs ?? -Infinity,
    clock.lastConnectionAtMs ?? -Infinity,
    backgroundAtMs,
    recentHumanHoldEndsAtMs(record, policy),
  );
}

/**
 * Until when the last person the agent saw holds the host-side clock back (-Infinity: no person
 * seen). After a goodbye, the goodbye: root stopped the agent then, and knowingly left the VM unmanaged.
 */
export function recentHumanHoldEndsAtMs(record: VmRecord, policy: Policy): number {
  if (record.goodbye) return record.goodbye.atMs;
  return record.lastHumanAtMs === undefined ? -Infinity : record.lastHumanAtMs + policy.idleTimeoutSeconds * 1000;
}

/** From when the host rule may judge a VM with no agent: at once after a goodbye, else after agent-lost-max. */
export function hostRuleFromMs(record: VmRecord, policy: Policy, agentGoneSinceMs: number): number {
  return record.goodbye ? agentGoneSinceMs : agentGoneSinceMs + policy.agentLostMaxSeconds * 1000;
}

/** What the last host activity was, for the explanation. */
function lastHostActivity(clock: HostClock | undefined, nowMs: number): string {
  const seen: Array<[number, string]> = [];
  if (clock?.lastConnectionAtMs !== undefined && clock.lastConnectionDetail)
    seen.push([clock.lastConnectionAtMs, clock.lastConnectionDetail]);
  if (clock?.lastBackgroundAtMs !== undefined && clock.lastBackgroundDetail)
    seen.push([clock.lastBackgroundAtMs, clock.lastBackgroundDetail]);
  if (seen.length === 0) return "none seen";
  const [atMs, detail] = seen.sort((a, b) => b[0] - a[0])[0]!;
  return `${detail}, ${duration(nowMs - atMs)} ago`;
}

/** What the rule decided; decide.ts carries it out with its own notice and stop machinery. */
export type HostVerdict =
  /** The rule does not apply (the agent is there, or it is not gone for agent-lost-max yet). */
  | { kind: "hold"; reason: string }
  /** The host cannot be read: missing data. The older stop-when-agent-lost-after rule may still apply. */
  | { kind: "blind"; reason: string }
  /** Host activity: a pending notice is cancelled. */
  | { kind: "active"; reason: string }
  /** Idle on the host for idle-timeout: send the notice (or keep it pending), stop at its deadline. */
  | { kind: "idle"; reason: string; idleSinceMs: number };

export interface HostRuleInput {
  nowMs: number;
  policy: Policy;
  record: VmRecord;
  reading: HostReading;
  /** Since when the VM has had no agent (the last report, or when it was first seen running without one). */
  agentGoneSinceMs: number;
}

/** The agent-lost rule with host-side evidence, for a VM with no agent. */
export function judgeWithoutAgent(input: HostRuleInput): HostVerdict {
  const { nowMs, policy, record, reading, agentGoneSinceMs } = input;
  const goneMs = nowMs - agentGoneSinceMs;
  const goodbye = record.goodbye;
  const noAgent = goodbye
    ? `no agent for ${duration(goneMs)}: stopped on purpose ${duration(nowMs - goodbye.atMs)} ago (${goodbye.reason}), the VM is unmanaged`
    : `no agent for ${duration(goneMs)}`;
  if (nowMs < hostRuleFromMs(record, policy, agentGoneSinceMs))
    return {
      kind: "hold",
      reason: `${noAgent} (agent-lost-max ${formatDuration(policy.agentLostMaxSeconds)}): not stopped yet; host: ${describeHostReading(reading)}`,
    };
  if (!hostReadingFresh(reading, nowMs)) {
    const why =
      reading.state === "ok"
        ? `the last host-side reading is ${duration(nowMs - reading.atMs)} old (window ${formatDuration(reading.windowSeconds)})`
        : `host-side evidence ${reading.state}: ${reading.message ?? "no reading"}`;
    return { kind: "blind", reason: `${noAgent} and ${why}: missing data is not idleness, not stopped` };
  }
  const unseen = hostCannotSee(reading);
  if (unseen) return { kind: "blind", reason: `${noAgent}; ${unseen}: the host alone does not stop it` };
  const idleSinceMs = hostIdleSinceMs(record, record.host, policy);
  if (idleSinceMs === undefined)
    return { kind: "blind", reason: `${noAgent} and no unbroken host-side readings yet: not stopped` };
  const idleMs = nowMs - idleSinceMs;
  const host = describeHostReading(reading);
  if (idleMs < policy.idleTimeoutSeconds * 1000) {
    const held =
      goodbye && idleSinceMs === goodbye.atMs
        ? "; the host's quiet counts from the goodbye"
        : idleSinceMs === recentHumanHoldEndsAtMs(record, policy)
          ? `; the agent last saw a person ${duration(nowMs - record.lastHumanAtMs!)} ago: the host's quiet counts from idle-timeout after that (a person over SSH moves less than any threshold)`
          : "";
    return {
      kind: "active",
      reason: `${noAgent}; host: ${host}; host idle ${duration(Math.max(0, idleMs))} of ${formatDuration(policy.idleTimeoutSeconds)}, last host activity: ${lastHostActivity(record.host, nowMs)}${held}`,
    };
  }
  return { kind: "idle", idleSinceMs, reason: `${noAgent}; host: ${host}` };
}

/** Host activity after `sinceMs` (a pending notice or a decided stop), in words. */
export function hostActivityAfter(clock: HostClock | undefined, sinceMs: number): string | undefined {
  if (clock?.lastConnectionAtMs !== undefined && clock.lastConnectionAtMs > sinceMs) return clock.lastConnectionDetail;
  if (clock?.lastBackgroundAtMs !== undefined && clock.lastBackgroundAtMs > sinceMs) return clock.lastBackgroundDetail;
  return undefined;
}

/** The next instants the rule can change its verdict with no new reading. */
export function hostWakeTimes(
  record: VmRecord,
  policy: Policy,
  agentGoneSinceMs: number | undefined,
  reading: HostReading | undefined,
): number[] {
  if (agentGoneSinceMs === undefined || !reading) return [];
  const times = [hostRuleFromMs(record, policy, agentGoneSinceMs)];
  const idleSinceMs = hostIdleSinceMs(record, record.host, policy);
  if (idleSinceMs !== undefined) times.push(idleSinceMs + policy.idleTimeoutSeconds * 1000);
  return times;
}

export function explainHost(
  reading: HostReading,
  record: VmRecord,
  policy: Policy,
  role: string | undefined,
): HostExplanation {
  const idleSinceMs = hostIdleSinceMs(record, record.host, policy);
  return {
    state: reading.state,
    atMs: reading.atMs,
    summary: describeHostReading(reading),
    ...(idleSinceMs !== undefined ? { idleSinceMs } : {}),
    ...(role ? { role } : {}),
  };
}

/** When the rule would stop the VM if nothing changes, and the instants to wake at for it. */
export function hostSchedule(
  record: VmRecord,
  policy: Policy,
  agentGoneSinceMs: number,
  reading: HostReading,
  nowMs: number,
): { stopAtMs: number | undefined; wakeAtMs: number[] } {
  const wakeAtMs = hostWakeTimes(record, policy, agentGoneSinceMs, reading);
  const notice = record.notice;
  if (notice) {
    wakeAtMs.push(notice.deadlineMs, notice.lastSentAtMs + policy.noticeRepeatSeconds * 1000);
    return { stopAtMs: notice.wouldStopAtMs === undefined ? notice.deadlineMs : undefined, wakeAtMs };
  }
  const idleSinceMs = hostIdleSinceMs(record, record.host, policy);
  if (
    !policy.autostopEnabled ||
    idleSinceMs === undefined ||
    !hostReadingFresh(reading, nowMs) ||
    hostCannotSee(reading)
  )
    return { stopAtMs: undefined, wakeAtMs };
  const noticeAtMs = Math.max(
    hostRuleFromMs(record, policy, agentGoneSinceMs),
    idleSinceMs + policy.idleTimeoutSeconds * 1000,
    nowMs,
  );
  return { stopAtMs: noticeAtMs + policy.gracePeriodSeconds * 1000, wakeAtMs };
}
