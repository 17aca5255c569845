// The few values of a Report that decide idleness, both ways:
//   readingsFromReport: Report → values /metrics exports (so Prometheus keeps them)
//   reportFromReadings: values read back from Prometheus → a Report the engine accepts
// A round trip keeps every reading, veto and threshold comparison the engine
// makes (packages/collector/test/offline/whatif/whatif-readings.test.ts checks it), which is what lets `whatif`
// replay history under other thresholds.
import {
  type CodeServerInstance,
  type CodeServerSignal,
  type DesktopSignal,
  type Gpu,
  type GpuProcess,
  type GpuSignal,
  type Inhibitor,
  type InhibitorSignal,
  InputDeviceKind,
  type JupyterKernel,
  type JupyterSignal,
  type LeaseSignal,
  type RemoteSession,
  type RemoteSessionSignal,
  type Report,
  type SessionSignal,
  SessionKind,
  type SourceStatus,
  SourceState,
  type SystemSignal,
} from "@ws/protocol";
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

// reportFromReadings builds a Report for every step of a replay (10,081 a VM-week, once per step for all of a
// sweep's values): protobuf-es's reflective create() cost a quarter of a sweep's CPU. The Report is
// built instead as a plain object of the shape protobuf-es itself makes (a v2 message is a plain
// object: $typeName, every field; proto3 optionals and message fields absent when unset):
// whatif-readings.test.ts checks it against a binary round trip. The parts every replayed Report has
// the same are built once and frozen (the engine only reads a Report; a write would throw).

/** A frozen empty list (a repeated field no replayed Report fills). */
const NONE: never[] = Object.freeze([]) as unknown as never[];

const SOURCES: SourceStatus[] = Object.freeze(
  ["sessions", "desktop", "remote_sessions", "jupyter", "code_server", "gpu", "system", "inhibitors", "leases"].map(
    (source): SourceStatus =>
      Object.freeze({
        $typeName: "workstation.v1.SourceStatus",
        source,
        state: SourceState.OK,
        message: "",
        durationSeconds: 0,
      }),
  ),
) as SourceStatus[];

const NO_SESSIONS: SessionSignal = Object.freeze({ $typeName: "workstation.v1.SessionSignal", sessions: NONE });
const NO_DESKTOP: DesktopSignal = Object.freeze({
  $typeName: "workstation.v1.DesktopSignal",
  devices: NONE,
  locked: false,
});
const NO_REMOTE_SESSIONS: RemoteSessionSignal = Object.freeze({
  $typeName: "workstation.v1.RemoteSessionSignal",
  sessions: NONE,
  sshdListeningPorts: NONE,
});
const NO_JUPYTER: JupyterSignal = Object.freeze({ $typeName: "workstation.v1.JupyterSignal", servers: NONE });
const NO_CODE_SERVER: CodeServerSignal = Object.freeze({
  $typeName: "workstation.v1.CodeServerSignal",
  instances: NONE,
});
const NO_INHIBITORS: InhibitorSignal = Object.freeze({ $typeName: "workstation.v1.InhibitorSignal", locks: NONE });
const NO_LEASES: LeaseSignal = Object.freeze({ $typeName: "workstation.v1.LeaseSignal", leases: NONE });

function remoteSession(): RemoteSession {
  return {
    $typeName: "workstation.v1.RemoteSession",
    user: "whatif",
    uid: 0,
    pid: 0,
    remoteHost: "",
    command: "",
    trafficBytes: 0n,
    forwards: [],
    judgedByService: false,
  };
}

/** The remote sessions a replayed Report needs: one for the interaction, one per kind of machine traffic. */
function remoteSessions(
  readings: ReportReadings,
  connected: boolean,
  interactionAge: number | undefined,
): RemoteSessionSignal {
  const jupyterPort = readings.remoteForwardJupyterPort;
  const cadenceSeconds = readings.remoteCadenceSeconds;
  if (!connected && interactionAge === undefined && jupyterPort === undefined && cadenceSeconds === undefined)
    return NO_REMOTE_SESSIONS;
  const sessions: RemoteSession[] = [];
  if (connected || interactionAge !== undefined) {
    const session = remoteSession();
    if (interactionAge !== undefined) session.interactionAgeSeconds = interactionAge;
    sessions.push(session);
  }
  if (jupyterPort !== undefined) {
    const session = remoteSession();
    session.judgedByService = true;
    session.forwards.push({
      $typeName: "workstation.v1.RemoteForward",
      destinationAddress: "",
      destinationPort: jupyterPort,
      service: "jupyter",
      listenerPid: 0,
    });
    sessions.push(session);
  }
  if (cadenceSeconds !== undefined) {
    const session = remoteSession();
    session.cadence = {
      $typeName: "workstation.v1.TrafficCadence",
      periodSeconds: cadenceSeconds,
      bursts: 0,
      meanBurstBytes: 0,
    };
    sessions.push(session);
  }
  return { $typeName: "workstation.v1.RemoteSessionSignal", sessions, sshdListeningPorts: NONE };
}

function kernel(id: string, executionState: string, connections: number): JupyterKernel {
  return { $typeName: "workstation.v1.JupyterKernel", id, name: "whatif", executionState, connections };
}

function jupyterSignal(
  readings: ReportReadings,
  kernelAge: number | undefined,
  terminalAge: number | undefined,
  serverAge: number | undefined,
): JupyterSignal {
  const kernels: JupyterKernel[] = [];
  for (let i = 0; i < readings.jupyterBusyKernels; i++) kernels.push(kernel(`busy-${i}`, "busy", 0));
  for (let i = 0; i < readings.jupyterConnectedKernels; i++) kernels.push(kernel(`connected-${i}`, "idle", 1));
  if (kernelAge !== undefined) {
    const active = kernel("activity", "idle", 0);
    active.lastActivityAgeSeconds = kernelAge;
    kernels.push(active);
  }
  if (kernels.length === 0 && terminalAge === undefined && serverAge === undefined) return NO_JUPYTER;
  const port = readings.remoteForwardJupyterPort;
  return {
    $typeName: "workstation.v1.JupyterSignal",
    servers: [
      {
        $typeName: "workstation.v1.JupyterServer",
        // The forward judged by this server names it by its port.
        url: port !== undefined ? `http://127.0.0.1:${port}/` : "http://whatif/",
        runtimeFile: "",
        pid: 0,
        uid: 0,
        user: "",
        reachable: true,
        error: "",
        version: "",
        ...(serverAge !== undefined ? { lastActivityAgeSeconds: serverAge } : {}),
        kernels,
        terminals:
          terminalAge !== undefined
            ? [{ $typeName: "workstation.v1.JupyterTerminal", name: "1", lastActivityAgeSeconds: terminalAge }]
            : [],
      },
    ],
  };
}

function gpuSignal(readings: ReportReadings): GpuSignal {
  const gpus: Gpu[] = [];
  for (let index = 0; index < readings.gpuCount; index++) {
    const gpu: Gpu = { $typeName: "workstation.v1.Gpu", index, uuid: "", name: "", migMode: "" };
    const ratio = readings.gpuUtilization[String(index)];
    if (ratio !== undefined) gpu.utilizationRatio = ratio;
    gpus.push(gpu);
  }
  const processes: GpuProcess[] = [];
  for (let i = 0; i < readings.gpuProcesses; i++)
    processes.push({
      $typeName: "workstation.v1.GpuProcess",
      pid: i + 1,
      gpuUuid: "",
      processName: "whatif",
      uid: 0,
      user: "",
    });
  return { $typeName: "workstation.v1.GpuSignal", gpus, processes, sampleAgeSeconds: 0 };
}

function systemSignal(readings: ReportReadings): SystemSignal {
  const system: SystemSignal = {
    $typeName: "workstation.v1.SystemSignal",
    cpuCount: 0,
    load1: 0,
    load5: 0,
    load15: 0,
    memoryTotalBytes: 0n,
    memoryAvailableBytes: 0n,
    uptimeSeconds: 0,
    topProcesses: NONE,
  };
  if (readings.cpuBusyRatio !== undefined) system.cpuBusyRatio = readings.cpuBusyRatio;
  if (readings.networkBytesPerSecond !== undefined)
    system.networkReceiveBytesPerSecond = readings.networkBytesPerSecond;
  if (readings.diskBytesPerSecond !== undefined) system.diskReadBytesPerSecond = readings.diskBytesPerSecond;
  if (readings.userProcessCpuCores !== undefined) system.userProcessCpuCores = readings.userProcessCpuCores;
  return system;
}

function inhibitorSignal(count: number): InhibitorSignal {
  if (count === 0) return NO_INHIBITORS;
  const locks: Inhibitor[] = [];
  for (let i = 0; i < count; i++)
    locks.push({
      $typeName: "workstation.v1.Inhibitor",
      who: "whatif",
      why: `lock ${i}`,
      what: "idle",
      mode: "block",
      uid: 0,
      pid: i + 1,
    });
  return { $typeName: "workstation.v1.InhibitorSignal", locks };
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
  const last = readings.lastActivityAtMs;
  const age = (at: number | undefined): number | undefined =>
    at === undefined ? undefined : Math.max(0, (atMs - at) / 1000);

  const ttyInput = age(last["tty-input"]);
  const ttyOutput = age(last["tty-output"]);
  let sessions = NO_SESSIONS;
  if (ttyInput !== undefined || ttyOutput !== undefined) {
    const session: SessionSignal["sessions"][number] = {
      $typeName: "workstation.v1.TerminalSession",
      kind: SessionKind.UNSPECIFIED,
      user: "whatif",
      uid: 0,
      tty: "pts/0",
      remoteHost: "",
      pid: 0,
    };
    if (ttyInput !== undefined) session.inputAgeSeconds = ttyInput;
    if (ttyOutput !== undefined) session.outputAgeSeconds = ttyOutput;
    sessions = { $typeName: "workstation.v1.SessionSignal", sessions: [session] };
  }

  const desktopAge = age(last["desktop-input"]);
  const heartbeatAge = age(last["code-server"]);
  const lease = options.lease && options.lease.expiresAtMs > options.lease.takenAtMs ? options.lease : undefined;

  return {
    $typeName: "workstation.v1.Report",
    sequence: 1n,
    intervalSeconds: options.intervalSeconds,
    sampleAgeSeconds: 0,
    sources: SOURCES,
    sessions,
    desktop:
      desktopAge === undefined
        ? NO_DESKTOP
        : {
            $typeName: "workstation.v1.DesktopSignal",
            devices: [
              {
                $typeName: "workstation.v1.InputDevice",
                node: "event0",
                name: "whatif",
                kind: InputDeviceKind.UNSPECIFIED,
                inputAgeSeconds: desktopAge,
              },
            ],
            locked: false,
          },
    remoteSessions: remoteSessions(readings, last["remote-connected"] !== undefined, age(last["remote-session"])),
    jupyter: jupyterSignal(
      readings,
      age(last["jupyter-kernel"]),
      age(last["jupyter-terminal"]),
      age(last["jupyter-server"]),
    ),
    codeServer:
      heartbeatAge === undefined
        ? NO_CODE_SERVER
        : {
            $typeName: "workstation.v1.CodeServerSignal",
            instances: [
              {
                $typeName: "workstation.v1.CodeServerInstance",
                user: "whatif",
                uid: 0,
                heartbeatFile: "",
                heartbeatAgeSeconds: heartbeatAge,
              } satisfies CodeServerInstance,
            ],
          },
    gpu: gpuSignal(readings),
    system: systemSignal(readings),
    inhibitors: inhibitorSignal(readings.idleInhibitors),
    leases: lease
      ? {
          $typeName: "workstation.v1.LeaseSignal",
          leases: [
            {
              $typeName: "workstation.v1.Lease",
              id: `whatif-${lease.takenAtMs}`,
              uid: 0,
              user: "whatif",
              reason: "recorded lease",
              requestedSeconds: (lease.expiresAtMs - lease.takenAtMs) / 1000,
              ageSeconds: Math.max(0, (atMs - lease.takenAtMs) / 1000),
              confirmed: true,
              via: "",
            },
          ],
        }
      : NO_LEASES,
    agentUnhandledErrors: 0n,
    scheduleRequests: NONE,
    quietMinutes: NONE,
  };
}
