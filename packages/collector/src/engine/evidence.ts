// Turns one Report into evidence on the collector's clock. Ages, not clocks:
// every time here is receivedAt − sample age − the age the agent reported;
// nothing the guest's clock says is used.
//
// Missing data is never idleness: a source that fails after showing something
// that could be activity (kernels, sessions, a busy GPU) holds the VM for a
// bounded time, and leases last seen are carried forward while the lease
// source cannot be read.

import { type Report, SourceState } from "@ws/protocol";
import { formatDuration } from "@ws/protocol";
import { clampLease, describeLease, leaseView } from "./leases.js";
import type {
  BlindSource,
  Evidence,
  EvidenceMemory,
  InhibitorView,
  LeaseView,
  Policy,
  ReceivedReport,
  SignalReading,
  SourceMemory,
  Veto,
} from "./types.js";

export const EMPTY_MEMORY: EvidenceMemory = Object.freeze({ sources: {}, inhibitorsFirstSeenMs: {}, leases: [] }) as EvidenceMemory;

/** A code-server heartbeat younger than this means a browser is still connected (code-server writes it every minute). */
const CODE_SERVER_FRESH_SECONDS = 5 * 60;

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

export function extractEvidence(received: ReceivedReport, policy: Policy, memory: EvidenceMemory = EMPTY_MEMORY): Evidence {
  const { report, receivedAtMs } = received;
  const sampledAtMs = receivedAtMs - (safeAge(report.sampleAgeSeconds) ?? 0) * 1000;
  const at = (age: number | undefined): number | undefined => {
    const clean = safeAge(age);
    return clean === undefined ? undefined : sampledAtMs - clean * 1000;
  };
  const thresholds = policy.thresholds;
  const readings: SignalReading[] = [];
  const vetoes: Veto[] = [];
  const live = new Map<string, boolean>();

  // --- terminals
  for (const session of report.sessions?.sessions ?? []) {
    const who = `${session.user || `uid ${session.uid}`}${session.remoteHost ? ` from ${session.remoteHost}` : ""}`;
    const inputAt = at(session.inputAgeSeconds);
    if (inputAt !== undefined) readings.push({ signal: "tty-input", strength: "strong", atMs: inputAt, detail: `input on ${session.tty} (${who})` });
    const outputAt = at(session.outputAgeSeconds);
    if (thresholds.ttyOutputCounts && outputAt !== undefined) {
      readings.push({ signal: "tty-output", strength: "strong", atMs: outputAt, detail: `output on ${session.tty} (${who})` });
    }
  }
  live.set("sessions", (report.sessions?.sessions.length ?? 0) > 0);

  // --- Jupyter
  let jupyterLive = false;
  const serverMemory: Array<[string, { reachable: boolean; live: boolean; message: string }]> = [];
  for (const server of report.jupyter?.servers ?? []) {
    const owner = server.user ? ` (${server.user})` : "";
    const serverLive = server.kernels.length + server.terminals.length > 0;
    jupyterLive ||= serverLive;
    serverMemory.push([`jupyter ${server.url}`, { reachable: server.reachable, live: serverLive, message: server.error }]);
    if (!server.reachable) continue;
    for (const kernel of server.kernels) {
      const name = `kernel ${kernel.name || "?"} ${kernel.id.slice(0, 8)} on ${server.url}${owner}`;
      if (kernel.executionState === "busy") {
        readings.push({ signal: "jupyter-busy", strength: "strong", atMs: sampledAtMs, detail: `${name} is busy` });
        vetoes.push({ kind: "jupyter-busy", detail: `${name} is busy` });
      }
      const activityAt = at(kernel.lastActivityAgeSeconds);
      if (activityAt !== undefined) readings.push({ signal: "jupyter-kernel", strength: "strong", atMs: activityAt, detail: `${name} activity` });
      if (kernel.connections > 0) {
        readings.push({
          signal: "jupyter-connected",
          strength: "weak",
          atMs: sampledAtMs,
          detail: `${name} has ${kernel.connections} browser connection${kernel.connections === 1 ? "" : "s"}`,
        });
      }
    }
    for (const terminal of server.terminals) {
      const activityAt = at(terminal.lastActivityAgeSeconds);
      if (activityAt !== undefined) {
        readings.push({ signal: "jupyter-terminal", strength: "strong", atMs: activityAt, detail: `terminal ${terminal.name} on ${server.url}${owner}` });
      }
    }
    const serverAt = at(server.lastActivityAgeSeconds);
    if (serverAt !== undefined) readings.push({ signal: "jupyter-server", strength: "weak", atMs: serverAt, detail: `API traffic on ${server.url}${owner}` });
  }
  live.set("jupyter", jupyterLive);

  // --- code-server
  let codeServerLive = false;
  for (const instance of report.codeServer?.instances ?? []) {
    const heartbeatAt = at(instance.heartbeatAgeSeconds);
    if (heartbeatAt === undefined) continue;
    codeServerLive ||= (safeAge(instance.heartbeatAgeSeconds) ?? Infinity) < CODE_SERVER_FRESH_SECONDS;
    readings.push({ signal: "code-server", strength: "weak", atMs: heartbeatAt, detail: `code-server browser connected (${instance.user || `uid ${instance.uid}`})` });
  }
  live.set("code_server", codeServerLive);

  // --- GPU
  let gpuLive = false;
  if (report.gpu) {
    const gpuAt = sampledAtMs - (safeAge(report.gpu.sampleAgeSeconds) ?? 0) * 1000;
    const processes = report.gpu.processes;
    gpuLive = processes.length > 0;
    for (const gpu of report.gpu.gpus) {
      const label = `GPU ${gpu.index}${gpu.name ? ` (${gpu.name})` : ""}`;
      const utilization = gpu.utilizationRatio;
      if (utilization !== undefined && Number.isFinite(utilization)) {
        if (utilization >= thresholds.gpuUtilizationRatio) {
          const detail = `${label} at ${percent(utilization)} (threshold ${percent(thresholds.gpuUtilizationRatio)})`;
          readings.push({ signal: "gpu", strength: "strong", atMs: gpuAt, detail });
          vetoes.push({ kind: "gpu", detail });
          gpuLive = true;
        }
        continue;
      }
      // [N/A] (MIG, some vGPUs): the device cannot say whether it works. Processes holding it are
      // taken as work, because unreadable is not idle.
      const holders = processes.filter((process) => !gpu.uuid || !process.gpuUuid || process.gpuUuid === gpu.uuid);
      if (holders.length > 0) {
        const names = holders.map((process) => `${process.processName || process.pid}${process.user ? ` (${process.user})` : ""}`).join(", ");
        const detail = `${label} utilization unreadable and held by ${names}: counted as busy`;
        readings.push({ signal: "gpu", strength: "strong", atMs: gpuAt, detail });
        vetoes.push({ kind: "gpu", detail });
      }
    }
  }
  live.set("gpu", gpuLive);

  // --- background work
  let systemLive = false;
  const system = report.system;
  if (system) {
    const background = (signal: "cpu" | "user-cpu" | "network" | "disk", value: number | undefined, threshold: number, describe: (v: number) => string) => {
      if (value === undefined || !Number.isFinite(value) || value < threshold) return;
      const detail = describe(value);
      readings.push({ signal, strength: "strong", atMs: sampledAtMs, detail });
      vetoes.push({ kind: signal, detail });
      systemLive = true;
    };
    background("cpu", system.cpuBusyRatio, thresholds.cpuBusyRatio, (v) => `CPU ${percent(v)} busy (threshold ${percent(thresholds.cpuBusyRatio)})`);
    background("user-cpu", system.userProcessCpuCores, thresholds.userProcessCpuCores, (v) => {
      const top = system.topProcesses[0];
      const busiest = top ? `; busiest ${top.command} (${top.user || `uid ${top.uid}`}) ${top.cpuCores.toFixed(2)}` : "";
      return `users' processes use ${v.toFixed(2)} cores (threshold ${thresholds.userProcessCpuCores})${busiest}`;
    });
    background(
      "network",
      sumDefined(system.networkReceiveBytesPerSecond, system.networkTransmitBytesPerSecond),
      thresholds.networkBytesPerSecond,
      (v) => `network ${bytesPerSecond(v)} (threshold ${bytesPerSecond(thresholds.networkBytesPerSecond)})`,
    );
    background(
      "disk",
      sumDefined(system.diskReadBytesPerSecond, system.diskWriteBytesPerSecond),
      thresholds.diskBytesPerSecond,
      (v) => `disk ${bytesPerSecond(v)} (threshold ${bytesPerSecond(thresholds.diskBytesPerSecond)})`,
    );
  }
  live.set("system", systemLive);

  const sourceStates = new Map(report.sources.map((status) => [status.source, status]));

  // --- idle inhibitor locks: no age on the wire, so the cap counts from the first time the collector saw the lock
  const inhibitors: InhibitorView[] = [];
  const inhibitorsFirstSeenMs: Record<string, number> = {};
  const inhibitorsReadable = sourceStates.get("inhibitors")?.state !== SourceState.FAILED;
  for (const lock of report.inhibitors?.locks ?? []) {
    if (!lock.what.split(":").includes("idle")) continue;
    const key = `${lock.uid}/${lock.pid}/${lock.who}/${lock.why}`;
    const firstSeenAtMs = memory.inhibitorsFirstSeenMs[key] ?? sampledAtMs;
    inhibitorsFirstSeenMs[key] = firstSeenAtMs;
    inhibitors.push({ key, who: lock.who, why: lock.why, uid: lock.uid, firstSeenAtMs, expiresAtMs: firstSeenAtMs + policy.maxKeepRunningSeconds * 1000 });
  }
  live.set("inhibitors", inhibitors.length > 0);
  for (const view of inhibitors) {
    vetoes.push({ kind: "inhibitor", detail: `idle inhibitor lock by ${view.who || `uid ${view.uid}`}${view.why ? ` ("${view.why}")` : ""}`, untilMs: view.expiresAtMs });
  }

  // --- leases
  const leaseSourceFailed = sourceStates.get("leases")?.state === SourceState.FAILED;
  let leases: LeaseView[];
  let leasesCarried = false;
  if (leaseSourceFailed && (report.leases?.leases.length ?? 0) === 0) {
    leases = memory.leases.map((view) => clampLease(view, policy));
    leasesCarried = leases.length > 0;
  } else {
    leases = (report.leases?.leases ?? []).map((lease) => leaseView(lease, sampledAtMs, policy));
  }
  for (const view of leases) {
    if (!view.accepted) continue;
    vetoes.push({
      kind: "lease",
      detail: `${describeLease(view)}${view.clamped ? ` (clamped to ${formatDuration(policy.maxKeepRunningSeconds)})` : ""}${leasesCarried ? " — last known; leases unreadable now" : ""}`,
      untilMs: view.expiresAtMs,
    });
  }
  live.set("leases", false);

  // --- blind sources
  const sources: Record<string, SourceMemory> = { ...memory.sources };
  const blind: BlindSource[] = [];
  const holdMs = blindHoldSeconds(policy) * 1000;
  const noteBlind = (key: string, message: string) => {
    // Read the memory from before this report: server entries were just cleared above.
    const previous = memory.sources[key] ?? { liveAtLastOk: false };
    const sinceMs = previous.blindSinceMs ?? sampledAtMs;
    sources[key] = { ...previous, blindSinceMs: sinceMs, lastMessage: message };
    const entry: BlindSource = { source: key, message, sinceMs };
    if (previous.liveAtLastOk) {
      entry.holdsUntilMs = sinceMs + holdMs;
      vetoes.push({ kind: "blind-source", detail: `${key} cannot be read (${message || "no reason given"}) and had activity to show when last read`, untilMs: entry.holdsUntilMs });
    }
    blind.push(entry);
  };
  const noteOk = (key: string, isLive: boolean) => {
    sources[key] = { liveAtLastOk: isLive, lastOkAtMs: sampledAtMs };
  };
  for (const status of report.sources) {
    if (status.source === "disk") continue;
    if (status.state === SourceState.OK) noteOk(status.source, live.get(status.source) ?? false);
    else if (status.state === SourceState.FAILED) noteBlind(status.source, status.message);
    else sources[status.source] = { liveAtLastOk: false };
  }
  if (report.jupyter && sourceStates.get("jupyter")?.state !== SourceState.FAILED) {
    // Servers that went away are gone, not blind.
    for (const key of Object.keys(sources)) if (key.startsWith("jupyter ")) delete sources[key];
  }
  for (const [key, server] of serverMemory) {
    if (server.reachable) noteOk(key, server.live);
    else noteBlind(key, server.message || "unreachable");
  }

  return {
    sampledAtMs,
    receivedAtMs,
    readings,
    vetoes,
    blind,
    leases,
    inhibitors,
    memory: {
      sources,
      inhibitorsFirstSeenMs: inhibitorsReadable ? inhibitorsFirstSeenMs : { ...memory.inhibitorsFirstSeenMs, ...inhibitorsFirstSeenMs },
      leases: leaseSourceFailed ? (leases.length > 0 ? leases : memory.leases) : leases,
    },
  };
}

/** The vetoes that hold at `nowMs` (leases and capped holds end on their own). */
export function vetoesAt(evidence: Evidence | undefined, nowMs: number): Veto[] {
  if (!evidence) return [];
  return evidence.vetoes.filter((veto) => veto.untilMs === undefined || veto.untilMs > nowMs);
}

/** Signal names active at the time of the report, for status and metrics. */
export function activeSignalNames(evidence: Evidence | undefined, nowMs: number, windowSeconds: number): string[] {
  if (!evidence) return [];
  const names = new Set<string>();
  const since = evidence.sampledAtMs - windowSeconds * 1000;
  for (const reading of evidence.readings) if (reading.atMs >= since) names.add(reading.signal);
  for (const veto of vetoesAt(evidence, nowMs)) {
    if (veto.kind === "lease" || veto.kind === "inhibitor" || veto.kind === "blind-source") names.add(veto.kind);
  }
  return [...names].sort();
}
