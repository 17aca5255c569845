// Reports on change (docs/protocol.md, "Reports on change"): the agent samples every interval,
// but once the collector has sent a ReportWhen it sends a sample only when a kind of change the
// collector asked for happened since the last Report it sent, or when the collector's deadline
// would pass before the next sample. Pure: the runtime passes the samples, the Directive and the
// monotonic time; nothing here reads a clock.
import { ReportChange, type Report, type ReportWhen, type Thresholds } from "@ws/protocol";

/** What the last ReportWhen asked for, on the agent's monotonic clock. */
export interface ReportContract {
  /** Send at the latest by this monotonic time (ms). */
  deadlineMs: number;
  /** The kinds of change sent at the next sample. */
  atOnce: ReadonlySet<ReportChange>;
}

/** The longest deadline an agent accepts (a runaway collector must not silence it for a day). */
export const MAX_REPORT_WITHIN_SECONDS = 3_600;

/**
 * The contract a Directive's ReportWhen sets, received at `receivedAtMs` (monotonic); undefined
 * means "every sample" (no ReportWhen yet on this stream, or one without a usable deadline).
 */
export function contractFrom(when: ReportWhen, receivedAtMs: number): ReportContract | undefined {
  const seconds = when.nextReportWithinSeconds;
  if (seconds === undefined || !Number.isFinite(seconds) || seconds <= 0) return undefined;
  return {
    deadlineMs: receivedAtMs + Math.min(seconds, MAX_REPORT_WITHIN_SECONDS) * 1000,
    atOnce: new Set(when.reportAtOnce),
  };
}

/**
 * What of a sample the collector may need at once, kind by kind: each kind's state as a string
 * (two samples differ in a kind when the strings differ), and the newest activity's time.
 */
export interface SampleDigest {
  /** The newest activity any age names, on the monotonic clock (ms); undefined when none is known. */
  activityAtMs: number | undefined;
  kinds: Readonly<Record<KeyedChange, string>>;
}

type KeyedChange =
  | ReportChange.VETO
  | ReportChange.LEASE
  | ReportChange.SOURCE
  | ReportChange.SESSION
  | ReportChange.DISK;

const KEYED: readonly KeyedChange[] = [
  ReportChange.VETO,
  ReportChange.LEASE,
  ReportChange.SOURCE,
  ReportChange.SESSION,
  ReportChange.DISK,
];

/** Ages are read from file and event times at slightly different moments: closer than this is the same activity. */
export const ACTIVITY_TOLERANCE_MS = 2_000;

/** The disk alert thresholds (packaging/prometheus: filling, almost full, full): crossing one is a change. */
export const DISK_ALERT_RATIOS = [0.7, 0.85, 0.95] as const;

/** The digest of a sample taken at `takenAtMs` (monotonic), levels judged against the collector's thresholds. */
export function digestOf(report: Report, takenAtMs: number, thresholds: Thresholds | undefined): SampleDigest {
  const ages: Array<number | undefined> = [];
  for (const session of report.sessions?.sessions ?? []) {
    ages.push(session.inputAgeSeconds);
    if (thresholds?.ttyOutputCounts) ages.push(session.outputAgeSeconds);
  }
  for (const device of report.desktop?.devices ?? []) ages.push(device.inputAgeSeconds);
  for (const remote of report.remoteSessions?.sessions ?? []) {
    ages.push(remote.interactionAgeSeconds, remote.cadence?.lastBurstAgeSeconds);
  }
  for (const server of report.jupyter?.servers ?? []) {
    ages.push(server.lastActivityAgeSeconds);
    for (const kernel of server.kernels) ages.push(kernel.lastActivityAgeSeconds);
    for (const terminal of server.terminals) ages.push(terminal.lastActivityAgeSeconds);
  }
  for (const instance of report.codeServer?.instances ?? []) ages.push(instance.heartbeatAgeSeconds);
  let youngest: number | undefined;
  for (const age of ages) if (age !== undefined && (youngest === undefined || age < youngest)) youngest = age;
  return {
    activityAtMs: youngest === undefined ? undefined : takenAtMs - youngest * 1000,
    kinds: {
      [ReportChange.VETO]: vetoKey(report, thresholds),
      [ReportChange.LEASE]: sortedKey(report.leases?.leases.map((l) => `${l.id}:${l.confirmed}:${l.via}`)),
      [ReportChange.SOURCE]: sortedKey(report.sources.map((s) => `${s.source}:${s.state}`)),
      [ReportChange.SESSION]: sessionKey(report),
      [ReportChange.DISK]: sortedKey(
        report.disk?.mounts.map((m) => `${m.mountPoint}:${diskBand(m.usedBytes, m.sizeBytes)}`),
      ),
    },
  };
}

/** The kinds of change between the last Report sent and a new sample. */
export function changesBetween(sent: SampleDigest, now: SampleDigest): Set<ReportChange> {
  const changes = new Set<ReportChange>();
  for (const kind of KEYED) if (sent.kinds[kind] !== now.kinds[kind]) changes.add(kind);
  if (
    now.activityAtMs !== undefined &&
    (sent.activityAtMs === undefined || now.activityAtMs > sent.activityAtMs + ACTIVITY_TOLERANCE_MS)
  )
    changes.add(ReportChange.ACTIVITY);
  return changes;
}

export type SendReason = "every-sample" | "first" | "deadline" | "change";

/**
 * Whether the sample just taken (at `nowMs`, monotonic) is sent: always without a contract; with
 * one, when a kind it asks for changed since the last Report sent, or when the next sample
 * (`intervalMs` from now) would come after the deadline. undefined: keep it back.
 */
export function sendReason(
  contract: ReportContract | undefined,
  lastSent: SampleDigest | undefined,
  current: SampleDigest,
  nowMs: number,
  intervalMs: number,
): SendReason | undefined {
  if (!contract) return "every-sample";
  if (!lastSent) return "first";
  if (nowMs + intervalMs > contract.deadlineMs) return "deadline";
  for (const change of changesBetween(lastSent, current)) if (contract.atOnce.has(change)) return "change";
  return undefined;
}

function sortedKey(items: readonly string[] | undefined): string {
  return items && items.length > 0 ? [...items].sort().join("|") : "";
}

function diskBand(used: bigint, size: bigint): number {
  if (size <= 0n) return 0;
  const ratio = Number(used) / Number(size);
  let band = 0;
  for (const threshold of DISK_ALERT_RATIOS) if (ratio >= threshold) band++;
  return band;
}

const atOrAbove = (value: number | undefined, threshold: number | undefined): boolean =>
  value !== undefined && threshold !== undefined && threshold > 0 && value >= threshold;

/** Which levels are at or above their thresholds, and the idle inhibitors: what vetoes a stop. */
function vetoKey(report: Report, t: Thresholds | undefined): string {
  const system = report.system;
  const levels = [
    report.gpu?.gpus.some((gpu) => atOrAbove(gpu.utilizationRatio, t?.gpuUtilizationRatio)) ? "gpu" : "",
    report.gpu && report.gpu.processes.length > 0 ? "gpu-process" : "",
    atOrAbove(system?.cpuBusyRatio, t?.cpuBusyRatio) ? "cpu" : "",
    atOrAbove(system?.userProcessCpuCores, t?.userProcessCpuCores) ? "user-cpu" : "",
    atOrAbove(
      (system?.networkReceiveBytesPerSecond ?? 0) + (system?.networkTransmitBytesPerSecond ?? 0),
      t?.networkBytesPerSecond,
    )
      ? "network"
      : "",
    atOrAbove((system?.diskReadBytesPerSecond ?? 0) + (system?.diskWriteBytesPerSecond ?? 0), t?.diskBytesPerSecond)
      ? "disk"
      : "",
  ];
  const kernels = (report.jupyter?.servers ?? []).flatMap((server) => server.kernels);
  if (kernels.some((kernel) => kernel.executionState === "busy")) levels.push("jupyter-busy");
  if (kernels.some((kernel) => kernel.connections > 0)) levels.push("jupyter-connected");
  const locks = sortedKey(report.inhibitors?.locks.map((l) => `${l.who}:${l.what}:${l.mode}:${l.pid}`));
  return `${levels.filter(Boolean).join(",")}#${locks}`;
}

/** Who is logged in and what the start page waits for: sessions, servers, the desktop lock, sshd's ports. */
function sessionKey(report: Report): string {
  return [
    sortedKey(report.sessions?.sessions.map((s) => `${s.kind}:${s.user}:${s.tty}:${s.pid}`)),
    sortedKey(report.remoteSessions?.sessions.map((s) => `${s.user}:${s.pid}`)),
    sortedKey(report.remoteSessions?.sshdListeningPorts.map(String)),
    sortedKey(report.jupyter?.servers.map((s) => `${s.url}:${s.reachable}`)),
    sortedKey(report.codeServer?.instances.map((i) => `${i.user}:${i.heartbeatFile}`)),
    report.desktop?.locked ? "locked" : "",
  ].join("#");
}
