// Turns one Report into evidence on the collector's clock. Ages, not clocks:
// every time here is receivedAt − sample age − the age the agent reported;
// nothing the guest's clock says is used.
//
// Missing data is never idleness: a source that fails after showing something
// that could be activity (kernels, sessions, a busy GPU) holds the VM for a
// bounded time, and leases last seen are carried forward while the lease
// source cannot be read.

import { InputDeviceKind, type Report, SourceState } from "@ws/protocol";
import { formatDuration } from "@ws/protocol";
import { clampLease, describeLease, leaseView } from "./leases.js";
import { type EvidenceSource, isSignalName, thresholdOf } from "./signals.js";
import type {
  BlindSource,
  Evidence,
  EvidenceMemory,
  InhibitorView,
  TrackedLease,
  Policy,
  ReceivedReport,
  SignalReading,
  SourceMemory,
  Veto,
} from "./types.js";

export const EMPTY_MEMORY: EvidenceMemory = Object.freeze({
  sources: {},
  inhibitorsFirstSeenMs: {},
  leases: [],
}) as EvidenceMemory;

/** A code-server heartbeat younger than this means a browser is still connected (code-server writes it every minute). */
const CODE_SERVER_FRESH_SECONDS = 5 * 60;

/** Two ages of one report closer than this name the same moment (Jupyter rounds to the millisecond; the agent to its own ms). */
const SAME_TIME_MS = 1_000;

function safeAge(seconds: number | undefined): number | undefined {
  if (seconds === undefined || !Number.isFinite(seconds)) return undefined;
  return Math.max(0, seconds);
}

function percent(ratio: number): string {
  return `${Math.round(ratio * 100)}%`;
}

function bytesPerSecond(rate: number): string {
  if (rate >= 1e9) return `${(rate / 1e9).toFixed(1)} GB/s`;
  if (rate >= 1e6) return `${(rate / 1e6).toFixed(1)} MB/s`;
  if (rate >= 1e3) return `${(rate / 1e3).toFixed(0)} kB/s`;
  return `${Math.round(rate)} B/s`;
}

function sumDefined(...values: Array<number | undefined>): number | undefined {
  const defined = values.filter((value): value is number => value !== undefined && Number.isFinite(value));
  return defined.length === 0 ? undefined : defined.reduce((a, b) => a + b, 0);
}

/** How long a blind source that had live content holds the VM. */
export function blindHoldSeconds(policy: Policy): number {
  return Math.max(policy.weakActivityMaxSeconds, policy.idleTimeoutSeconds);
}

/** What one source contributes to the evidence of a report. */
interface SourceEvidence {
  readings: SignalReading[];
  vetoes: Veto[];
  /** The source holds something that could become activity (kernels, sessions, a busy GPU…): if it goes blind, that holds the VM for a while. */
  live: boolean;
}

/** The clock of one report: a reported age → a time on the collector's clock. */
interface ReportTime {
  sampledAtMs: number;
  at(age: number | undefined): number | undefined;
}

function reportTime(received: ReceivedReport): ReportTime {
  const sampledAtMs = received.receivedAtMs - (safeAge(received.report.sampleAgeSeconds) ?? 0) * 1000;
  return {
    sampledAtMs,
    at: (age) => {
      const clean = safeAge(age);
      return clean === undefined ? undefined : sampledAtMs - clean * 1000;
    },
  };
}

const none = (live = false): SourceEvidence => ({ readings: [], vetoes: [], live });

/** Terminals: keystrokes always; output only with tty-output-counts. */
function terminalEvidence(report: Report, policy: Policy, time: ReportTime): SourceEvidence {
  const readings: SignalReading[] = [];
  for (const session of report.sessions?.sessions ?? []) {
    const who = `${session.user || `uid ${session.uid}`}${session.remoteHost ? ` from ${session.remoteHost}` : ""}`;
    const inputAt = time.at(session.inputAgeSeconds);
    if (inputAt !== undefined)
      readings.push({
        signal: "tty-input",
        strength: "strong",
        atMs: inputAt,
        detail: `input on ${session.tty} (${who})`,
      });
    const outputAt = time.at(session.outputAgeSeconds);
    if (policy.thresholds.ttyOutputCounts && outputAt !== undefined) {
      readings.push({
        signal: "tty-output",
        strength: "strong",
        atMs: outputAt,
        detail: `output on ${session.tty} (${who})`,
      });
    }
  }
  return { readings, vetoes: [], live: (report.sessions?.sessions.length ?? 0) > 0 };
}

/** Keyboard, mouse and tablet input in the guest; none while the screen is locked. */
function desktopEvidence(report: Report, time: ReportTime): SourceEvidence {
  const desktop = report.desktop;
  if (!desktop || desktop.locked) return none();
  const readings: SignalReading[] = [];
  for (const device of desktop.devices) {
    const inputAt = time.at(device.inputAgeSeconds);
    if (inputAt === undefined) continue;
    const kind = INPUT_KIND_WORD[device.kind] ?? "input device";
    readings.push({
      signal: "desktop-input",
      strength: "strong",
      atMs: inputAt,
      detail: `desktop ${kind} input${device.name ? ` (${device.name})` : ""}`,
    });
  }
  // Whether it is live depends on the idle timeout: desktopLive, per policy.
  return { readings, vetoes: [], live: false };
}

/** Input within the idle timeout is use a blind desktop source would be hiding. */
function desktopLive(desktop: SourceEvidence, policy: Policy, time: ReportTime): boolean {
  return desktop.readings.some((reading) => reading.atMs > time.sampledAtMs - policy.idleTimeoutSeconds * 1000);
}

const INPUT_KIND_WORD: Record<number, string> = {
  [InputDeviceKind.KEYBOARD]: "keyboard",
  [InputDeviceKind.MOUSE]: "mouse",
  [InputDeviceKind.TABLET]: "tablet",
};

/**
 * SSH sessions without a terminal: open is weak ("connected"), a person's traffic is strong.
 * The agent judges the traffic (docs/signals/remote-sessions.md): a forward only to a service
 * ws reads is that service's client, and a regular cadence is a machine's; both stay weak here
 * and say why.
 */
function remoteSessionEvidence(report: Report, time: ReportTime): SourceEvidence {
  const readings: SignalReading[] = [];
  const sessions = report.remoteSessions?.sessions ?? [];
  for (const session of sessions) {
    const who = `${session.user || `uid ${session.uid}`}${session.remoteHost ? ` from ${session.remoteHost}` : ""}`;
    const what = session.command ? `running ${session.command}` : "forwarding ports";
    readings.push({
      signal: "remote-connected",
      strength: "weak",
      atMs: time.sampledAtMs,
      detail: `SSH session without a terminal is open (${who}, ${what})${connectedWhy(report, session)}`,
    });
    const interactionAt = time.at(session.interactionAgeSeconds);
    if (interactionAt !== undefined) {
      readings.push({
        signal: "remote-session",
        strength: "strong",
        atMs: interactionAt,
        detail: `traffic in an SSH session without a terminal (${who}, ${what})`,
      });
    }
  }
  return { readings, vetoes: [], live: sessions.length > 0 };
}

type RemoteSessionOf = NonNullable<Report["remoteSessions"]>["sessions"][number];

/** Why a session's traffic is not a person's: where its forwards go, or its cadence. "" when it is. */
function connectedWhy(report: Report, session: RemoteSessionOf): string {
  if (session.judgedByService) {
    return session.forwards
      .map((forward) => `: forward to ${serviceJudgement(report, forward)}`)
      .filter((text, i, all) => all.indexOf(text) === i)
      .join("");
  }
  const cadence = session.cadence;
  if (cadence && Number.isFinite(cadence.periodSeconds) && cadence.periodSeconds > 0)
    return `: regular traffic every ${formatDuration(Math.round(cadence.periodSeconds))} (a page reloading itself or a poller)`;
  return "";
}

function urlPort(url: string): number | undefined {
  try {
    const parsed = new URL(url);
    return Number(parsed.port || (parsed.protocol === "https:" ? 443 : 80));
  } catch {
    return undefined;
  }
}

function serviceJudgement(report: Report, forward: RemoteSessionOf["forwards"][number]): string {
  if (forward.service === "code-server") return `code-server ${forward.destinationPort}: judged by its heartbeat`;
  const servers = report.jupyter?.servers ?? [];
  const server =
    servers.find((s) => s.pid !== 0 && s.pid === forward.listenerPid) ??
    servers.find((s) => urlPort(s.url) === forward.destinationPort);
  const name = `Jupyter server ${forward.destinationPort}`;
  if (!server) return `${name}: judged by its kernels`;
  if (server.kernels.some((kernel) => kernel.executionState === "busy")) return `${name}: judged by the kernel, busy`;
  const ages = server.kernels
    .map((kernel) => safeAge(kernel.lastActivityAgeSeconds))
    .filter((age): age is number => age !== undefined);
  if (ages.length === 0) return `${name}: judged by its kernels, none running`;
  return `${name}: judged by the kernel, idle ${formatDuration(Math.round(Math.min(...ages)))}`;
}

/** Jupyter servers: kernels and terminals; each server also gets its own blind-source memory entry. */
function jupyterEvidence(
  report: Report,
  policy: Policy,
  time: ReportTime,
): SourceEvidence & { servers: Array<[string, { reachable: boolean; live: boolean; message: string }]> } {
  const readings: SignalReading[] = [];
  const vetoes: Veto[] = [];
  const servers: Array<[string, { reachable: boolean; live: boolean; message: string }]> = [];
  let live = false;
  for (const server of report.jupyter?.servers ?? []) {
    const owner = server.user ? ` (${server.user})` : "";
    const serverLive = server.kernels.length + server.terminals.length > 0;
    live ||= serverLive;
    servers.push([`jupyter ${server.url}`, { reachable: server.reachable, live: serverLive, message: server.error }]);
    if (!server.reachable) continue;
    for (const kernel of server.kernels) {
      const name = `kernel ${kernel.name || "?"} ${kernel.id.slice(0, 8)} on ${server.url}${owner}`;
      if (kernel.executionState === "busy") {
        // A busy kernel's last_activity moves with its own output: the busy reading says all there is.
        readings.push({
          signal: "jupyter-busy",
          strength: "strong",
          atMs: time.sampledAtMs,
          detail: `${name} is busy`,
        });
        vetoes.push({ kind: "jupyter-busy", detail: `${name} is busy` });
      } else {
        const activityAt = time.at(kernel.lastActivityAgeSeconds);
        if (activityAt !== undefined)
          readings.push({ signal: "jupyter-kernel", strength: "strong", atMs: activityAt, detail: `${name} activity` });
      }
      if (kernel.connections > 0) {
        readings.push({
          signal: "jupyter-connected",
          strength: "weak",
          atMs: time.sampledAtMs,
          detail: `${name} has ${kernel.connections} browser connection${kernel.connections === 1 ? "" : "s"}`,
        });
      }
    }
    // A terminal's last_activity moves with its output (`watch nvidia-smi` keeps it fresh): it is
    // output, counted only with tty-output-counts. Typing into it shows as tty-input on its pty.
    if (policy.thresholds.ttyOutputCounts) {
      for (const terminal of server.terminals) {
        const activityAt = time.at(terminal.lastActivityAgeSeconds);
        if (activityAt !== undefined) {
          readings.push({
            signal: "jupyter-terminal",
            strength: "strong",
            atMs: activityAt,
            detail: `output of terminal ${terminal.name} on ${server.url}${owner}`,
          });
        }
      }
    }
    const serverAt = time.at(server.lastActivityAgeSeconds);
    // /api/status takes the latest of API traffic, kernels and terminals: when it is a terminal's
    // time, it is that terminal's output again, counted only as output.
    const terminalOutput = server.terminals.some((terminal) => {
      const terminalAt = time.at(terminal.lastActivityAgeSeconds);
      return terminalAt !== undefined && serverAt !== undefined && Math.abs(terminalAt - serverAt) <= SAME_TIME_MS;
    });
    if (serverAt !== undefined && !(terminalOutput && !policy.thresholds.ttyOutputCounts)) {
      readings.push({
        signal: "jupyter-server",
        strength: "weak",
        atMs: serverAt,
        detail: `server activity on ${server.url}${owner} (API traffic, kernel messages or terminal output)`,
      });
    }
  }
  return { readings, vetoes, live, servers };
}

function codeServerEvidence(report: Report, time: ReportTime): SourceEvidence {
  const readings: SignalReading[] = [];
  let live = false;
  for (const instance of report.codeServer?.instances ?? []) {
    const heartbeatAt = time.at(instance.heartbeatAgeSeconds);
    if (heartbeatAt === undefined) continue;
    live ||= (safeAge(instance.heartbeatAgeSeconds) ?? Infinity) < CODE_SERVER_FRESH_SECONDS;
    readings.push({
      signal: "code-server",
      strength: "weak",
      atMs: heartbeatAt,
      detail: `code-server browser connected (${instance.user || `uid ${instance.uid}`})`,
    });
  }
  return { readings, vetoes: [], live };
}

function gpuEvidence(report: Report, policy: Policy, time: ReportTime): SourceEvidence {
  if (!report.gpu) return none();
  const readings: SignalReading[] = [];
  const vetoes: Veto[] = [];
  const threshold = thresholdOf("gpu", policy.thresholds);
  const gpuAt = time.sampledAtMs - (safeAge(report.gpu.sampleAgeSeconds) ?? 0) * 1000;
  const processes = report.gpu.processes;
  let live = processes.length > 0;
  for (const gpu of report.gpu.gpus) {
    const label = `GPU ${gpu.index}${gpu.name ? ` (${gpu.name})` : ""}`;
    const utilization = gpu.utilizationRatio;
    if (utilization !== undefined && Number.isFinite(utilization)) {
      if (utilization >= threshold) {
        const detail = `${label} at ${percent(utilization)} (threshold ${percent(threshold)})`;
        readings.push({ signal: "gpu", strength: "strong", atMs: gpuAt, detail });
        vetoes.push({ kind: "gpu", detail });
        live = true;
      }
      continue;
    }
    // [N/A] (MIG, some vGPUs): the device cannot say whether it works. Processes holding it are
    // taken as work, because unreadable is not idle.
    const holders = processes.filter((process) => !gpu.uuid || !process.gpuUuid || process.gpuUuid === gpu.uuid);
    if (holders.length > 0) {
      const names = holders
        .map((process) => `${process.processName || process.pid}${process.user ? ` (${process.user})` : ""}`)
        .join(", ");
      const detail = `${label} utilization unreadable and held by ${names}: counted as busy`;
      readings.push({ signal: "gpu", strength: "strong", atMs: gpuAt, detail });
      vetoes.push({ kind: "gpu", detail });
    }
  }
  return { readings, vetoes, live };
}

function systemEvidence(report: Report, policy: Policy, time: ReportTime): SourceEvidence {
  const system = report.system;
  if (!system) return none();
  const thresholds = policy.thresholds;
  const result = none();
  /** A level at or above the threshold its descriptor names is background work, and a veto. */
  const background = (
    signal: "cpu" | "user-cpu" | "network" | "disk",
    value: number | undefined,
    describe: (v: number, threshold: number) => string,
  ) => {
    const threshold = thresholdOf(signal, thresholds);
    if (value === undefined || !Number.isFinite(value) || value < threshold) return;
    const detail = describe(value, threshold);
    result.readings.push({ signal, strength: "strong", atMs: time.sampledAtMs, detail });
    result.vetoes.push({ kind: signal, detail });
    result.live = true;
  };
  background("cpu", system.cpuBusyRatio, (v, t) => `CPU ${percent(v)} busy (threshold ${percent(t)})`);
  background("user-cpu", system.userProcessCpuCores, (v, t) => {
    const top = system.topProcesses[0];
    const busiest = top ? `; busiest ${top.command} (${top.user || `uid ${top.uid}`}) ${top.cpuCores.toFixed(2)}` : "";
    return `users' processes use ${v.toFixed(2)} cores (threshold ${t})${busiest}`;
  });
  background(
    "network",
    sumDefined(system.networkReceiveBytesPerSecond, system.networkTransmitBytesPerSecond),
    (v, t) => `network ${bytesPerSecond(v)} (threshold ${bytesPerSecond(t)})`,
  );
  background(
    "disk",
    sumDefined(system.diskReadBytesPerSecond, system.diskWriteBytesPerSecond),
    (v, t) => `disk ${bytesPerSecond(v)} (threshold ${bytesPerSecond(t)})`,
  );
  return result;
}

/** Idle inhibitor locks carry no age on the wire, so the cap counts from the first time the collector saw the lock. */
function inhibitorEvidence(
  report: Report,
  policy: Policy,
  time: ReportTime,
  memory: EvidenceMemory,
  readable: boolean,
) {
  const inhibitors: InhibitorView[] = [];
  const firstSeen: Record<string, number> = {};
  for (const lock of report.inhibitors?.locks ?? []) {
    if (!lock.what.split(":").includes("idle")) continue;
    const key = `${lock.uid}/${lock.pid}/${lock.who}/${lock.why}`;
    const firstSeenAtMs = memory.inhibitorsFirstSeenMs[key] ?? time.sampledAtMs;
    firstSeen[key] = firstSeenAtMs;
    inhibitors.push({
      key,
      who: lock.who,
      why: lock.why,
      uid: lock.uid,
      firstSeenAtMs,
      expiresAtMs: firstSeenAtMs + policy.maxKeepRunningSeconds * 1000,
    });
  }
  const vetoes: Veto[] = inhibitors.map((view) => ({
    kind: "inhibitor",
    detail: `idle inhibitor lock by ${view.who || `uid ${view.uid}`}${view.why ? ` ("${view.why}")` : ""}`,
    untilMs: view.expiresAtMs,
  }));
  return {
    inhibitors,
    vetoes,
    live: inhibitors.length > 0,
    firstSeenMs: readable ? firstSeen : { ...memory.inhibitorsFirstSeenMs, ...firstSeen },
  };
}

/** Leases; while the lease source cannot be read, the last known ones are carried forward. */
function leaseEvidence(
  report: Report,
  policy: Policy,
  time: ReportTime,
  memory: EvidenceMemory,
  sourceFailed: boolean,
) {
  let leases: TrackedLease[];
  let carried = false;
  if (sourceFailed && (report.leases?.leases.length ?? 0) === 0) {
    leases = memory.leases.map((view) => clampLease(view, policy));
    carried = leases.length > 0;
  } else {
    leases = (report.leases?.leases ?? []).map((lease) => leaseView(lease, time.sampledAtMs, policy));
  }
  const vetoes: Veto[] = leases
    .filter((view) => view.accepted)
    .map((view) => ({
      kind: "lease",
      detail: `${describeLease(view)}${view.clamped ? ` (clamped to ${formatDuration(policy.maxKeepRunningSeconds)})` : ""}${carried ? " — last known; leases unreadable now" : ""}`,
      untilMs: view.expiresAtMs,
    }));
  return { leases, vetoes, remembered: sourceFailed ? (leases.length > 0 ? leases : memory.leases) : leases };
}

/**
 * Sources that failed: one that had something live when last read holds the VM for
 * blindHoldSeconds; the rest are listed. Also the source memory for the next report.
 */
function blindEvidence(
  report: Report,
  policy: Policy,
  time: ReportTime,
  memory: EvidenceMemory,
  live: ReadonlyMap<string, boolean>,
  servers: ReadonlyArray<[string, { reachable: boolean; live: boolean; message: string }]>,
  jupyterRead: boolean,
) {
  const sources: Record<string, SourceMemory> = { ...memory.sources };
  const blind: BlindSource[] = [];
  const vetoes: Veto[] = [];
  const holdMs = blindHoldSeconds(policy) * 1000;
  const noteBlind = (key: string, message: string) => {
    // Read the memory from before this report: server entries were just cleared above.
    const previous = memory.sources[key] ?? { liveAtLastOk: false };
    const sinceMs = previous.blindSinceMs ?? time.sampledAtMs;
    sources[key] = { ...previous, blindSinceMs: sinceMs, lastMessage: message };
    const entry: BlindSource = { source: key, message, sinceMs };
    if (previous.liveAtLastOk) {
      entry.holdsUntilMs = sinceMs + holdMs;
      vetoes.push({
        kind: "blind-source",
        detail: `${key} cannot be read (${message || "no reason given"}) and had activity to show when last read`,
        untilMs: entry.holdsUntilMs,
      });
    }
    blind.push(entry);
  };
  const noteOk = (key: string, isLive: boolean) => {
    sources[key] = { liveAtLastOk: isLive, lastOkAtMs: time.sampledAtMs };
  };
  for (const status of report.sources) {
    if (status.source === "disk") continue;
    if (status.state === SourceState.OK) noteOk(status.source, live.get(status.source) ?? false);
    else if (status.state === SourceState.FAILED) noteBlind(status.source, status.message);
    else sources[status.source] = { liveAtLastOk: false };
  }
  if (jupyterRead) {
    // Servers that went away are gone, not blind.
    for (const key of Object.keys(sources)) if (key.startsWith("jupyter ")) delete sources[key];
  }
  for (const [key, server] of servers) {
    if (server.reachable) noteOk(key, server.live);
    else noteBlind(key, server.message || "unreachable");
  }
  return { sources, blind, vetoes };
}

/** What the sources of one report show under one policy's thresholds: no evidence memory involved. */
interface ReportEvidence {
  time: ReportTime;
  jupyter: ReturnType<typeof jupyterEvidence>;
  desktop: SourceEvidence;
  /** The sources the report says failed. */
  failed: ReadonlySet<string>;
  /** Each source's liveness (the desktop's is per policy: desktopLive). */
  live: ReadonlyMap<string, boolean>;
  readings: SignalReading[];
  vetoes: Veto[];
}

/**
 * The policy-free half of extractEvidence: the sources' readings and vetoes read from the report. It
 * depends on the report and on the policy's thresholds (policyEvidenceKey), not on its timeouts,
 * never on the VM's evidence memory, so replays of one report under several policies can share it.
 */
function reportEvidence(received: ReceivedReport, policy: Policy): ReportEvidence {
  const { report } = received;
  const time = reportTime(received);
  const jupyter = jupyterEvidence(report, policy, time);
  const desktop = desktopEvidence(report, time);
  // In this order: the readings and vetoes are listed by source, as the explanation shows them.
  const perSource: ReadonlyArray<readonly [EvidenceSource, SourceEvidence]> = [
    ["sessions", terminalEvidence(report, policy, time)],
    ["desktop", desktop],
    ["remote_sessions", remoteSessionEvidence(report, time)],
    ["jupyter", jupyter],
    ["code_server", codeServerEvidence(report, time)],
    ["gpu", gpuEvidence(report, policy, time)],
    ["system", systemEvidence(report, policy, time)],
  ];
  // Plain loops, not entries/flatMap: a replay reads a Report's evidence at every step of a week.
  const live = new Map<string, boolean>();
  const readings: SignalReading[] = [];
  const vetoes: Veto[] = [];
  for (const [source, evidence] of perSource) {
    live.set(source, evidence.live);
    for (const reading of evidence.readings) readings.push(reading);
    for (const veto of evidence.vetoes) vetoes.push(veto);
  }
  const failed = new Set<string>();
  // A source listed twice is read by its last status.
  for (const status of report.sources)
    if (status.state === SourceState.FAILED) failed.add(status.source);
    else failed.delete(status.source);
  return { time, jupyter, desktop, failed, live, readings, vetoes };
}

/** Thresholds as one string, equal exactly when they are (numbers typed, so Infinity and null differ). */
export function thresholdsKey(thresholds: Policy["thresholds"]): string {
  return JSON.stringify(thresholds, (_, value) =>
    typeof value === "number" ? `n${value}` : value === undefined ? "u" : value,
  );
}

/** The policy's thresholds (all reportEvidence reads of it) as thresholdsKey, once per policy. */
const evidenceKeys = new WeakMap<Policy, string>();
function policyEvidenceKey(policy: Policy): string {
  let key = evidenceKeys.get(policy);
  if (key === undefined) {
    key = thresholdsKey(policy.thresholds);
    evidenceKeys.set(policy, key);
  }
  return key;
}

/** Reports whose policy-free evidence is shared between policies (a sweep's), by policyEvidenceKey. */
const sharedReports = new WeakMap<ReceivedReport, Map<string, ReportEvidence>>();

/**
 * Lets every extractEvidence of this report (under any policy) share the policy-free half with the
 * others under a policy with the same thresholds: a sweep replays one report
 * under each swept value. The result is the same as without; only the work is shared. The report
 * must not change afterwards (it does not: a Report is read, never written, by the engine).
 */
export function shareReportEvidence(received: ReceivedReport): void {
  if (!sharedReports.has(received)) sharedReports.set(received, new Map());
}

function reportEvidenceFor(received: ReceivedReport, policy: Policy): ReportEvidence {
  const shared = sharedReports.get(received);
  if (!shared) return reportEvidence(received, policy);
  const key = policyEvidenceKey(policy);
  let evidence = shared.get(key);
  if (!evidence) {
    evidence = reportEvidence(received, policy);
    shared.set(key, evidence);
  }
  return evidence;
}

/**
 * What extractEvidence says of use, without the blind sources (and no memory for the next report): the
 * readings and the other vetoes, in extractEvidence's order. A replay asks it of each report while a
 * VM it stopped waits for its user; a blind source there does not bring anyone back.
 */
export function useEvidence(
  received: ReceivedReport,
  policy: Policy,
  memory: EvidenceMemory,
): Pick<Evidence, "readings" | "vetoes"> {
  const { report } = received;
  const { time, failed, readings, vetoes } = reportEvidenceFor(received, policy);
  const inhibitors = inhibitorEvidence(report, policy, time, memory, !failed.has("inhibitors"));
  const leases = leaseEvidence(report, policy, time, memory, failed.has("leases"));
  return { readings, vetoes: [...vetoes, ...inhibitors.vetoes, ...leases.vetoes] };
}

export function extractEvidence(
  received: ReceivedReport,
  policy: Policy,
  memory: EvidenceMemory = EMPTY_MEMORY,
): Evidence {
  const { report, receivedAtMs } = received;
  // The policy-free half (shared between a sweep's values); the rest reads this VM's evidence memory.
  const { time, jupyter, desktop, failed, live: sourcesLive, readings, vetoes } = reportEvidenceFor(received, policy);
  const inhibitors = inhibitorEvidence(report, policy, time, memory, !failed.has("inhibitors"));
  const leases = leaseEvidence(report, policy, time, memory, failed.has("leases"));
  const live = new Map(sourcesLive);
  live.set("desktop", desktopLive(desktop, policy, time));
  live.set("inhibitors", inhibitors.live);
  live.set("leases", false);
  const blind = blindEvidence(
    report,
    policy,
    time,
    memory,
    live,
    jupyter.servers,
    report.jupyter !== undefined && !failed.has("jupyter"),
  );

  return {
    sampledAtMs: time.sampledAtMs,
    receivedAtMs,
    readings: [...readings],
    vetoes: [...vetoes, ...inhibitors.vetoes, ...leases.vetoes, ...blind.vetoes],
    blind: blind.blind,
    leases: leases.leases,
    inhibitors: inhibitors.inhibitors,
    memory: { sources: blind.sources, inhibitorsFirstSeenMs: inhibitors.firstSeenMs, leases: leases.remembered },
  };
}

/** The vetoes that hold at `nowMs` (leases and capped holds end on their own). */
export function vetoesAt(evidence: Pick<Evidence, "vetoes"> | undefined, nowMs: number): Veto[] {
  if (!evidence) return [];
  return evidence.vetoes.filter((veto) => veto.untilMs === undefined || veto.untilMs > nowMs);
}

/** Signal names active at the time of the report, for status and metrics. */
export function activeSignalNames(evidence: Evidence | undefined, nowMs: number, windowSeconds: number): string[] {
  if (!evidence) return [];
  const names = new Set<string>();
  const since = evidence.sampledAtMs - windowSeconds * 1000;
  for (const reading of evidence.readings) if (reading.atMs >= since) names.add(reading.signal);
  // A signal's own veto is named by its reading; the other vetoes are named here.
  for (const veto of vetoesAt(evidence, nowMs)) if (!isSignalName(veto.kind)) names.add(veto.kind);
  return [...names].sort();
}
