// Reports as agents send them, for the protocol and collector benchmarks:
// a typical VM and a heavy one. Field values are shaped like the real thing
// (UUIDs, paths, GPU names) and drawn from a seeded generator, so every run
// encodes to the same sizes.
import { create, toBinary, type MessageInitShape } from "@bufbuild/protobuf";
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
const COMMANDS = [
  "python3",
  "jupyter-lab",
  "node",
  "bash",
  "nvcc",
  "torchrun",
  "code-server",
  "make",
  "cc1plus",
  "java",
];

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
        terminals: Array.from({ length: shape.terminalsPerServer }, (_, t) => ({
          name: String(t + 1),
          lastActivityAgeSeconds: age(600),
        })),
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

/**
 * The hostile agents of the collector's memory benchmark. `largest-allowed`: every list at the
 * collector's per-Report limit (packages/collector/src/agents/validate.ts) and every string at its
 * length limit, as large as a Report can be and still be kept whole — shrunk until it fits the
 * protocol's message limit. `gpu-flood`: the 1 MB Report of 515,000 empty GPU processes.
 */
export function hostileReport(
  kind: "largest-allowed" | "gpu-flood",
  limits: Record<string, number>,
  maxString: number,
  maxBytes: number,
): Report {
  if (kind === "gpu-flood") {
    return create(ReportSchema, {
      sequence: 1n,
      intervalSeconds: 15,
      gpu: { gpus: [{ index: 0, utilizationRatio: 0 }], processes: Array.from({ length: 515_000 }, () => ({})) },
    });
  }
  const text = (tag: string, i: number, length = maxString) => `${tag}${i}-`.padEnd(length, "x");
  for (let scale = 1; scale > 0.05; scale *= 0.9) {
    const n = (field: string) => Math.max(1, Math.floor((limits[field] ?? 1) * scale));
    const servers = n("jupyter.servers");
    const kernelsPerServer = Math.max(1, Math.floor(n("jupyter.kernels") / servers));
    const terminalsPerServer = Math.max(1, Math.floor(n("jupyter.terminals") / servers));
    const report = create(ReportSchema, {
      sequence: 1n,
      intervalSeconds: 15,
      sources: Array.from({ length: n("sources") }, (_, i) => ({
        source: text("source", i),
        state: SourceState.FAILED,
        message: text("message", i),
      })),
      jupyter: {
        servers: Array.from({ length: servers }, (_, s) => ({
          url: text("http://server", s),
          user: text("user", s),
          reachable: true,
          kernels: Array.from({ length: kernelsPerServer }, (_, i) => ({
            id: text("kernel", i),
            name: text("python", i),
            executionState: "idle",
            lastActivityAgeSeconds: 3600,
          })),
          terminals: Array.from({ length: terminalsPerServer }, (_, i) => ({
            name: text("term", i),
            lastActivityAgeSeconds: 3600,
          })),
        })),
      },
      sessions: {
        sessions: Array.from({ length: n("sessions") }, (_, i) => ({
          user: text("user", i),
          tty: text("pts/", i),
          remoteHost: text("host", i),
          inputAgeSeconds: 3600,
        })),
      },
      codeServer: {
        instances: Array.from({ length: n("code_server.instances") }, (_, i) => ({
          user: text("user", i),
          heartbeatFile: text("/home/", i),
          heartbeatAgeSeconds: 3600,
        })),
      },
      gpu: {
        gpus: Array.from({ length: n("gpu.gpus") }, (_, i) => ({
          index: i,
          uuid: text("GPU-", i),
          name: text("NVIDIA ", i),
          utilizationRatio: 0,
        })),
        processes: Array.from({ length: n("gpu.processes") }, (_, i) => ({
          gpuUuid: text("GPU-", i),
          processName: text("python", i),
          user: text("user", i),
          pid: i + 1,
        })),
      },
      system: {
        cpuBusyRatio: 0.01,
        topProcesses: Array.from({ length: n("system.top_processes") }, (_, i) => ({
          user: text("user", i),
          command: text("cmd", i),
          pid: i + 1,
        })),
      },
      disk: {
        mounts: Array.from({ length: n("disk.mounts") }, (_, i) => ({
          mountPoint: text("/mnt/", i),
          device: text("/dev/", i),
          fsType: "ext4",
          sizeBytes: 100n,
          usedBytes: 10n,
        })),
      },
      inhibitors: {
        locks: Array.from({ length: n("inhibitors.locks") }, (_, i) => ({
          who: text("who", i),
          why: text("why", i),
          what: "idle",
          mode: "block",
        })),
      },
      leases: {
        leases: Array.from({ length: n("leases") }, (_, i) => ({
          id: text("lease", i),
          user: text("user", i),
          reason: text("reason", i),
          requestedSeconds: 3600,
          ageSeconds: 10,
        })),
      },
    } as never);
    if (toBinary(ReportSchema, report).byteLength <= maxBytes - 1024) return report;
  }
  throw new Error("no largest-allowed Report fits the message limit");
}
