// Reports as agents send them, for the protocol and collector benchmarks:
// a typical VM and a heavy one. Field values are shaped like the real thing
// (UUIDs, paths, GPU names) and drawn from a seeded generator, so every run
// encodes to the same sizes.
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { ReportSchema, SessionKind, SourceState, type Report } from "@ws/protocol";
import { seededRandom } from "./stats.js";

type ReportInit = MessageInitShape<typeof ReportSchema>;

export interface VmShape {
  sessions: number;
  jupyterServers: number;
  kernelsPerServer: number;
  terminalsPerServer: number;
  gpus: number;
  gpuProcesses: number;
  topProcesses: number;
  leases: number;
  mounts: number;
  codeServers: number;
  inhibitors: number;
}

/** A workstation someone is using: two terminals, a notebook with two kernels, one GPU, a root and a home disk. */
export const TYPICAL_VM: VmShape = {
  sessions: 3,
  jupyterServers: 1,
  kernelsPerServer: 2,
  terminalsPerServer: 1,
  gpus: 1,
  gpuProcesses: 1,
  topProcesses: 5,
  leases: 0,
  mounts: 2,
  codeServers: 1,
  inhibitors: 0,
};

/** The heavy VM: 20 sessions, 4 servers × 10 kernels, 8 GPUs, 64 processes, 10 leases. */
export const HEAVY_VM: VmShape = {
  sessions: 20,
  jupyterServers: 4,
  kernelsPerServer: 10,
  terminalsPerServer: 2,
  gpus: 8,
  gpuProcesses: 8,
  topProcesses: 64,
  leases: 10,
  mounts: 4,
  codeServers: 2,
  inhibitors: 2,
};

const USERS = ["alice", "bob", "carol", "dave"];
const COMMANDS = ["python3", "jupyter-lab", "node", "bash", "nvcc", "torchrun", "code-server", "make", "cc1plus", "java"];

export function reportFor(shape: VmShape, seed = 1, sequence = 1n): Report {
  const random = seededRandom(seed);
  const int = (max: number) => Math.floor(random() * max);
  const age = (max: number) => Math.round(random() * max * 1000) / 1000;
  const hex = (n: number) => Array.from({ length: n }, () => int(16).toString(16)).join("");
  const uuid = () => `${hex(8)}-${hex(4)}-4${hex(3)}-a${hex(3)}-${hex(12)}`;
  const user = (i: number) => USERS[i % USERS.length]!;
  const uid = (i: number) => 1000 + (i % USERS.length);

  const init: ReportInit = {
    sequence,
    intervalSeconds: 15,
    sampleAgeSeconds: 0.004,
    sources: ["jupyter", "sessions", "code_server", "gpu", "system", "inhibitors", "leases", "disk"].map((source) => ({
      source,
      state: SourceState.OK,
      durationSeconds: age(0.02),
    })),
    jupyter: {
      servers: Array.from({ length: shape.jupyterServers }, (_, s) => ({
        url: `http://127.0.0.1:${8888 + s}/`,
        runtimeFile: `/home/${user(s)}/.local/share/jupyter/runtime/jpserver-${2000 + int(30000)}.json`,
        pid: 2000 + int(30000),
        uid: uid(s),
        user: user(s),
        reachable: true,
        version: "2.14.2",
        lastActivityAgeSeconds: age(120),
        kernels: Array.from({ length: shape.kernelsPerServer }, (_, k) => ({
          id: uuid(),
          name: "python3",
          executionState: k === 0 ? "busy" : "idle",
          lastActivityAgeSeconds: age(900),
          connections: k === 0 ? 1 : 0,
        })),
        terminals: Array.from({ length: shape.terminalsPerServer }, (_, t) => ({ name: String(t + 1), lastActivityAgeSeconds: age(600) })),
      })),
    },
    sessions: {
      sessions: Array.from({ length: shape.sessions }, (_, i) => ({
        kind: i % 3 === 2 ? SessionKind.PTY : SessionKind.UTMP,
        user: user(i),
        uid: uid(i),
        tty: `pts/${i}`,
        ...(i % 3 === 2 ? {} : { remoteHost: `10.${int(256)}.${int(256)}.${int(256)}`, loginAgeSeconds: age(30_000) }),
        pid: 3000 + int(30000),
        inputAgeSeconds: age(300),
        outputAgeSeconds: age(60),
      })),
    },
    codeServer: {
      instances: Array.from({ length: shape.codeServers }, (_, i) => ({
        user: user(i),
        uid: uid(i),
        heartbeatFile: `/home/${user(i)}/.local/share/code-server/heartbeat`,
        heartbeatAgeSeconds: age(60),
      })),
    },
    gpu: {
      sampleAgeSeconds: age(30),
      gpus: Array.from({ length: shape.gpus }, (_, g) => ({
        index: g,
        uuid: `GPU-${uuid()}`,
        name: "NVIDIA H100 80GB HBM3",
        utilizationRatio: Math.round(random() * 100) / 100,
        memoryUtilizationRatio: Math.round(random() * 100) / 100,
        memoryUsedBytes: BigInt(int(80) * 1024 * 1024 * 1024),
        memoryTotalBytes: 85_520_809_984n,
        migMode: "Disabled",
      })),
      processes: Array.from({ length: shape.gpuProcesses }, (_, p) => ({
        pid: 4000 + int(30000),
        gpuUuid: `GPU-${uuid()}`,
        processName: "python3",
        uid: uid(p),
        user: user(p),
        usedMemoryBytes: BigInt(int(40) * 1024 * 1024 * 1024),
      })),
    },
    system: {
      cpuCount: 16,
      cpuBusyRatio: Math.round(random() * 1000) / 1000,
      load1: age(8),
      load5: age(8),
      load15: age(8),
      networkReceiveBytesPerSecond: age(200_000),
      networkTransmitBytesPerSecond: age(50_000),
      diskReadBytesPerSecond: age(2_000_000),
      diskWriteBytesPerSecond: age(1_000_000),
      memoryTotalBytes: 134_217_728_000n,
      memoryAvailableBytes: BigInt(int(100_000_000_000)),
      uptimeSeconds: age(500_000),
      userProcessCpuCores: age(4),
      topProcesses: Array.from({ length: shape.topProcesses }, (_, p) => ({
        pid: 5000 + int(60000),
        uid: uid(p),
        user: user(p),
        command: COMMANDS[p % COMMANDS.length]!,
        cpuCores: Math.round(random() * 1000) / 1000,
        ageSeconds: age(100_000),
      })),
    },
    inhibitors: {
      locks: Array.from({ length: shape.inhibitors }, (_, i) => ({
        who: "backup.sh",
        why: "nightly backup running",
        what: "sleep:idle",
        mode: "block",
        uid: uid(i),
        pid: 6000 + int(30000),
      })),
    },
    leases: {
      leases: Array.from({ length: shape.leases }, (_, l) => ({
        id: uuid(),
        uid: uid(l),
        user: user(l),
        reason: "training run, do not stop",
        requestedSeconds: 8 * 3600,
        ageSeconds: age(20_000),
        confirmed: true,
      })),
    },
    disk: {
      mounts: Array.from({ length: shape.mounts }, (_, m) => ({
        mountPoint: m === 0 ? "/" : `/data${m}`,
        device: `/dev/vd${String.fromCharCode(97 + m)}1`,
        fsType: "ext4",
        sizeBytes: 107_374_182_400n,
        usedBytes: BigInt(int(100_000_000_000)),
        availableBytes: BigInt(int(50_000_000_000)),
      })),
    },
  };
  return create(ReportSchema, init);
}
