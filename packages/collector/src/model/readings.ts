// The few values of a Report that decide idleness, both ways:
//   readingsFromReport: Report → values /metrics exports (so Prometheus keeps them)
//   reportFromReadings: values read back from Prometheus → a Report the engine accepts
// A round trip keeps every reading, veto and threshold comparison the engine
// makes (packages/collector/test/offline/whatif/whatif-readings.test.ts checks it), which is what lets `whatif`
// replay history under other thresholds.
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { type RemoteSessionSchema, ReportSchema, SourceState, type Report } from "@ws/protocol";
import type { ActivitySignal } from "../engine/signals.js";

export interface ReportReadings {
  /** Whole-machine CPU busy share, 0..1. */
  cpuBusyRatio?: number;
  /** CPU of non-system users' processes, in cores. */
  userProcessCpuCores?: number;
  /** Receive + transmit, loopback excluded. */
  networkBytesPerSecond?: number;
  /** Read + write. */
  diskBytesPerSecond?: number;
  gpuCount: number;
  /** By GPU index; GPUs whose utilization is unreadable ([N/A]) are absent. */
  gpuUtilization: Record<string, number>;
  /** Processes holding a GPU (they count as work on a GPU whose utilization is unreadable). */
  gpuProcesses: number;
  jupyterBusyKernels: number;
  /** Kernels with at least one browser connection (weak evidence). */
  jupyterConnectedKernels: number;
  /** logind idle inhibitor locks held. */
  idleInhibitors: number;
  /** The youngest activity of each kind, on the collector's clock (ms since the epoch). */
  lastActivityAtMs: Partial<Record<ActivitySignal, number>>;
  /** The destination port of an SSH forward judged by the Jupyter server it reaches (machine traffic). */
  remoteForwardJupyterPort?: number;
  /** The shortest regular cadence of an SSH session's traffic, in seconds (machine traffic). */
  remoteCadenceSeconds?: number;
}

function cleanAge(seconds: number | undefined): number | undefined {
  if (seconds === undefined || !Number.isFinite(seconds)) return undefined;
  return Math.max(0, seconds);
}

function sumDefined(...values: Array<number | undefined>): number | undefined {
  const defined = values.filter((value): value is number => value !== undefined && Number.isFinite(value));
  return defined.length === 0 ? undefined : defined.reduce((a, b) => a + b, 0);
}

function finite(value: number | undefined): number | undefined {
  return value !== undefined && Number.isFinite(value) ? value : undefined;
}

export function readingsFromReport(report: Report, receivedAtMs: number): ReportReadings {
  const sampledAtMs = receivedAtMs - (cleanAge(report.sampleAgeSeconds) ?? 0) * 1000;
  const lastActivityAtMs: Partial<Record<ActivitySignal, number>> = {};
  const note = (signal: ActivitySignal, age: number | undefined, baseMs = sampledAtMs) => {
    const clean = cleanAge(age);
    if (clean === undefined) return;
    const at = baseMs - clean * 1000;
    lastActivityAtMs[signal] = Math.max(lastActivityAtMs[signal] ?? -Infinity, at);
  };
  for (const session of report.sessions?.sessions ?? []) {
    note("tty-input", session.inputAgeSeconds);
    note("tty-output", session.outputAgeSeconds);
  }
  // Locked: the engine takes no desktop reading.
  if (!report.desktop?.locked)
    for (const device of report.desktop?.devices ?? []) note("desktop-input", device.inputAgeSeconds);
  let forwardPort: number | undefined;
  let cadenceSeconds: number | undefined;
  for (const session of report.remoteSessions?.sessions ?? []) {
    note("remote-connected", 0);
    note("remote-session", session.interactionAgeSeconds);
    if (session.judgedByService)
      forwardPort ??= session.forwards.find((forward) => forward.service === "jupyter")?.destinationPort;
    const period = finite(session.cadence?.periodSeconds);
    if (period !== undefined && period > 0) cadenceSeconds = Math.min(cadenceSeconds ?? period, period);
  }
  let busy = 0;
  let connected = 0;
  for (const server of report.jupyter?.servers ?? []) {
    // The engine reads nothing from a server it could not reach.
    if (!server.reachable) continue;
    note("jupyter-server", server.lastActivityAgeSeconds);
    for (const kernel of server.kernels) {
      if (kernel.executionState === "busy") busy++;
      if (kernel.connections > 0) connected++;
      // The engine does not read a busy kernel's last_activity (its own output moves it).
      if (kernel.executionState !== "busy") note("jupyter-kernel", kernel.lastActivityAgeSeconds);
    }
    for (const terminal of server.terminals) note("jupyter-terminal", terminal.lastActivityAgeSeconds);
  }
  for (const instance of report.codeServer?.instances ?? []) note("code-server", instance.heartbeatAgeSeconds);

  const gpuUtilization: Record<string, number> = {};
  for (const gpu of report.gpu?.gpus ?? []) {
    const ratio = finite(gpu.utilizationRatio);
    if (ratio !== undefined) gpuUtilization[String(gpu.index)] = ratio;
  }
  const system = report.system;
  const readings: ReportReadings = {
    gpuCount: report.gpu?.gpus.length ?? 0,
    gpuUtilization,
    gpuProcesses: report.gpu?.processes.length ?? 0,
    jupyterBusyKernels: busy,
    jupyterConnectedKernels: connected,
    idleInhibitors: (report.inhibitors?.locks ?? []).filter((lock) => lock.what.split(":").includes("idle")).length,
    lastActivityAtMs,
  };
  const cpu = finite(system?.cpuBusyRatio);
  if (cpu !== undefined) readings.cpuBusyRatio = cpu;
  const cores = finite(system?.userProcessCpuCores);
  if (cores !== undefined) readings.userProcessCpuCores = cores;
  const network = sumDefined(system?.networkReceiveBytesPerSecond, system?.networkTransmitBytesPerSecond);
  if (network !== undefined) readings.networkBytesPerSecond = network;
  const disk = sumDefined(system?.diskReadBytesPerSecond, system?.diskWriteBytesPerSecond);
  if (disk !== undefined) readings.diskBytesPerSecond = disk;
  if (forwardPort !== undefined) readings.remoteForwardJupyterPort = forwardPort;
  if (cadenceSeconds !== undefined) readings.remoteCadenceSeconds = cadenceSeconds;
  return readings;
}

/** The remote sessions a replayed Report needs: one for the interaction, one per kind of machine traffic. */
function remoteSessions(readings: ReportReadings, connected: boolean, interactionAge: number | undefined) {
  const sessions: Array<MessageInitShape<typeof RemoteSessionSchema>> = [];
  if (connected || interactionAge !== undefined)
    sessions.push({
      user: "whatif",
      ...(interactionAge !== undefined ? { interactionAgeSeconds: interactionAge } : {}),
    });
  if (readings.remoteForwardJupyterPort !== undefined)
    sessions.push({
      user: "whatif",
      judgedByService: true,
      forwards: [{ destinationAddress: "", destinationPort: readings.remoteForwardJupyterPort, service: "jupyter" }],
    });
  if (readings.remoteCadenceSeconds !== undefined)
    sessions.push({ user: "whatif", cadence: { periodSeconds: readings.remoteCadenceSeconds } });
  return sessions;
}

export interface SyntheticReportOptions {
  /** The report interval the replay runs at (the step). */
  intervalSeconds: number;
  /** A keep-running lease in force: when it was first seen and when it ends (already clamped by the recording collector). */
  lease?: { takenAtMs: number; expiresAtMs: number };
}

/**
 * A Report received at `atMs` that makes the engine see what `readings` say.
 * Ages are measured back from `atMs`; activity "in the future" of `atMs`
 * (clock skew between scrapes) counts as now.
 */
export function reportFromReadings(readings: ReportReadings, atMs: number, options: SyntheticReportOptions): Report {
  const age = (signal: ActivitySignal): number | undefined => {
    const at = readings.lastActivityAtMs[signal];
    return at === undefined ? undefined : Math.max(0, (atMs - at) / 1000);
  };
  const ok = (source: string) => ({ source, state: SourceState.OK });

  const ttyInput = age("tty-input");
  const ttyOutput = age("tty-output");
  const sessions =
    ttyInput !== undefined || ttyOutput !== undefined
      ? [
          {
            user: "whatif",
            tty: "pts/0",
            ...(ttyInput !== undefined ? { inputAgeSeconds: ttyInput } : {}),
            ...(ttyOutput !== undefined ? { outputAgeSeconds: ttyOutput } : {}),
          },
        ]
      : [];

  const kernels = [];
  for (let i = 0; i < readings.jupyterBusyKernels; i++)
    kernels.push({ id: `busy-${i}`, name: "whatif", executionState: "busy" });
  for (let i = 0; i < readings.jupyterConnectedKernels; i++)
    kernels.push({ id: `connected-${i}`, name: "whatif", executionState: "idle", connections: 1 });
  const kernelAge = age("jupyter-kernel");
  if (kernelAge !== undefined)
    kernels.push({ id: "activity", name: "whatif", executionState: "idle", lastActivityAgeSeconds: kernelAge });
  const terminalAge = age("jupyter-terminal");
  const serverAge = age("jupyter-server");
  const hasJupyter = kernels.length > 0 || terminalAge !== undefined || serverAge !== undefined;

  const heartbeatAge = age("code-server");
  const desktopAge = age("desktop-input");
  const remoteConnected = age("remote-connected") !== undefined;
  const remoteAge = age("remote-session");
  const gpus = [];
  for (let index = 0; index < readings.gpuCount; index++) {
    const ratio = readings.gpuUtilization[String(index)];
    gpus.push({ index, uuid: "", ...(ratio !== undefined ? { utilizationRatio: ratio } : {}) });
  }
  const gpuProcesses = [];
  for (let i = 0; i < readings.gpuProcesses; i++) gpuProcesses.push({ pid: i + 1, gpuUuid: "", processName: "whatif" });
  const locks = [];
  for (let i = 0; i < readings.idleInhibitors; i++)
    locks.push({ who: "whatif", why: `lock ${i}`, what: "idle", mode: "block", pid: i + 1 });
  const lease = options.lease && options.lease.expiresAtMs > options.lease.takenAtMs ? options.lease : undefined;

  return create(ReportSchema, {
    sequence: 1n,
    intervalSeconds: options.intervalSeconds,
    sampleAgeSeconds: 0,
    sources: [
      "sessions",
      "desktop",
      "remote_sessions",
      "jupyter",
      "code_server",
      "gpu",
      "system",
      "inhibitors",
      "leases",
    ].map(ok),
    sessions: { sessions },
    desktop: {
      devices: desktopAge !== undefined ? [{ node: "event0", name: "whatif", inputAgeSeconds: desktopAge }] : [],
    },
    remoteSessions: { sessions: remoteSessions(readings, remoteConnected, remoteAge) },
    jupyter: {
      servers: hasJupyter
        ? [
            {
              // The forward judged by this server names it by its port.
              url:
                readings.remoteForwardJupyterPort !== undefined
                  ? `http://127.0.0.1:${readings.remoteForwardJupyterPort}/`
                  : "http://whatif/",
              reachable: true,
              ...(serverAge !== undefined ? { lastActivityAgeSeconds: serverAge } : {}),
              kernels,
              terminals: terminalAge !== undefined ? [{ name: "1", lastActivityAgeSeconds: terminalAge }] : [],
            },
          ]
        : [],
    },
    codeServer: {
      instances: heartbeatAge !== undefined ? [{ user: "whatif", heartbeatAgeSeconds: heartbeatAge }] : [],
    },
    gpu: { gpus, processes: gpuProcesses },
    system: {
      ...(readings.cpuBusyRatio !== undefined ? { cpuBusyRatio: readings.cpuBusyRatio } : {}),
      ...(readings.userProcessCpuCores !== undefined ? { userProcessCpuCores: readings.userProcessCpuCores } : {}),
      ...(readings.networkBytesPerSecond !== undefined
        ? { networkReceiveBytesPerSecond: readings.networkBytesPerSecond }
        : {}),
      ...(readings.diskBytesPerSecond !== undefined ? { diskReadBytesPerSecond: readings.diskBytesPerSecond } : {}),
    },
    inhibitors: { locks },
    leases: {
      leases: lease
        ? [
            {
              id: `whatif-${lease.takenAtMs}`,
              user: "whatif",
              reason: "recorded lease",
              requestedSeconds: (lease.expiresAtMs - lease.takenAtMs) / 1000,
              ageSeconds: Math.max(0, (atMs - lease.takenAtMs) / 1000),
              confirmed: true,
            },
          ]
        : [],
    },
  });
}
