// The readings /metrics exports must be enough for the engine to see the same
// thing again: Report → readings → synthetic Report gives the same evidence.
import { create, fromBinary, type MessageInitShape, toBinary } from "@bufbuild/protobuf";
import { ReportSchema, SourceState, TerminalSessionSchema } from "@ws/protocol";
import { describe, expect, it } from "vitest";
import { extractEvidence, vetoesAt } from "../../../src/engine/evidence.js";
import { BUILTIN_DEFAULT_POLICY, mergePolicy } from "../../../src/engine/policy.js";
import type { Evidence, Policy } from "../../../src/engine/types.js";
import {
  type ReportReadings,
  readingsFromReport,
  reportFromReadings,
  type SyntheticReportOptions,
} from "../../../src/model/readings.js";

const AT = 1_700_000_000_000;

function report(init: MessageInitShape<typeof ReportSchema>) {
  return create(ReportSchema, { sequence: 7n, intervalSeconds: 15, ...init });
}

const REPORTS = {
  "an idle VM": report({
    system: {
      cpuCount: 4,
      cpuBusyRatio: 0.01,
      userProcessCpuCores: 0.02,
      networkReceiveBytesPerSecond: 300,
      networkTransmitBytesPerSecond: 200,
      diskReadBytesPerSecond: 0,
      diskWriteBytesPerSecond: 4096,
    },
  }),
  "two ssh sessions, one typing": report({
    sampleAgeSeconds: 3,
    sessions: {
      sessions: [
        { user: "ada", tty: "pts/0", inputAgeSeconds: 40, outputAgeSeconds: 2 },
        { user: "bob", tty: "pts/1", inputAgeSeconds: 4000, outputAgeSeconds: 3000 },
      ],
    },
  }),
  "a busy notebook with a browser": report({
    jupyter: {
      servers: [
        {
          url: "http://127.0.0.1:8888/",
          reachable: true,
          lastActivityAgeSeconds: 5,
          kernels: [
            { id: "k1", name: "python3", executionState: "busy", lastActivityAgeSeconds: 1, connections: 1 },
            { id: "k2", name: "python3", executionState: "idle", lastActivityAgeSeconds: 900, connections: 0 },
          ],
          terminals: [{ name: "1", lastActivityAgeSeconds: 120 }],
        },
        {
          url: "http://127.0.0.1:8889/",
          reachable: false,
          error: "refused",
          kernels: [{ id: "k9", executionState: "busy" }],
        },
      ],
    },
    codeServer: { instances: [{ user: "ada", heartbeatAgeSeconds: 30 }] },
  }),
  "desktop input and SSH sessions without a terminal": report({
    desktop: {
      devices: [
        { node: "event3", name: "QEMU USB Tablet", inputAgeSeconds: 12 },
        { node: "event1", name: "kbd" },
      ],
    },
    remoteSessions: {
      sessions: [
        {
          user: "ada",
          pid: 10,
          remoteHost: "10.0.0.2",
          command: "node",
          loginAgeSeconds: 900,
          interactionAgeSeconds: 30,
        },
        { user: "bob", pid: 11, remoteHost: "10.0.0.3", command: "", loginAgeSeconds: 50 },
      ],
    },
  }),
  "a locked desktop": report({
    desktop: { locked: true, devices: [{ node: "event3", name: "QEMU USB Tablet", inputAgeSeconds: 2 }] },
  }),
  "GPUs, one unreadable and held": report({
    gpu: {
      gpus: [
        { index: 0, uuid: "GPU-a", utilizationRatio: 0.3 },
        { index: 1, uuid: "GPU-b" },
      ],
      processes: [{ pid: 4242, gpuUuid: "GPU-b", processName: "python" }],
      sampleAgeSeconds: 0,
    },
  }),
  "background work and an inhibitor": report({
    system: {
      cpuCount: 8,
      cpuBusyRatio: 0.9,
      userProcessCpuCores: 6.5,
      networkReceiveBytesPerSecond: 5e6,
      diskWriteBytesPerSecond: 2e7,
    },
    inhibitors: {
      locks: [
        { who: "ada", why: "backup", what: "sleep:idle", mode: "block", uid: 1000, pid: 77 },
        { who: "gdm", why: "lid", what: "handle-lid-switch", mode: "block", uid: 0, pid: 12 },
      ],
    },
    sources: [{ source: "inhibitors", state: SourceState.OK }],
  }),
};

const POLICIES: Record<string, Policy> = {
  defaults: BUILTIN_DEFAULT_POLICY,
  "low thresholds, tty output counts": mergePolicy(BUILTIN_DEFAULT_POLICY, {
    thresholds: {
      gpuUtilizationRatio: 0.05,
      cpuBusyRatio: 0.005,
      userProcessCpuCores: 0.01,
      networkBytesPerSecond: 100,
      diskBytesPerSecond: 1000,
      ttyOutputCounts: true,
    },
  }),
  "high thresholds": mergePolicy(BUILTIN_DEFAULT_POLICY, {
    thresholds: {
      gpuUtilizationRatio: 0.5,
      cpuBusyRatio: 0.95,
      userProcessCpuCores: 8,
      networkBytesPerSecond: 1e7,
      diskBytesPerSecond: 1e8,
    },
  }),
};

/** What the idle clock and the vetoes use: per signal, the youngest reading and its strength; veto kinds and ends. */
function essence(evidence: Evidence, nowMs: number) {
  const bySignal: Record<string, { atMs: number; strength: string }> = {};
  for (const reading of evidence.readings) {
    const seen = bySignal[reading.signal];
    if (!seen || reading.atMs > seen.atMs)
      bySignal[reading.signal] = { atMs: Math.round(reading.atMs), strength: reading.strength };
  }
  const vetoes = vetoesAt(evidence, nowMs)
    .filter((veto) => veto.kind !== "blind-source")
    .map((veto) => `${veto.kind}${veto.untilMs === undefined ? "" : `@${Math.round(veto.untilMs)}`}`);
  return { bySignal, vetoes: [...new Set(vetoes)].sort() };
}

describe("readings round trip", () => {
  for (const [reportName, original] of Object.entries(REPORTS)) {
    for (const [policyName, policy] of Object.entries(POLICIES)) {
      it(`keeps what the engine sees: ${reportName}, ${policyName}`, () => {
        const readings = readingsFromReport(original, AT);
        const synthetic = reportFromReadings(readings, AT, { intervalSeconds: 15 });
        const want = essence(extractEvidence({ report: original, receivedAtMs: AT }, policy), AT);
        const got = essence(extractEvidence({ report: synthetic, receivedAtMs: AT }, policy), AT);
        expect(got).toEqual(want);
      });
    }
  }

  it("measures ages from the receive time minus the sample age", () => {
    const readings = readingsFromReport(REPORTS["two ssh sessions, one typing"], AT);
    expect(readings.lastActivityAtMs["tty-input"]).toBe(AT - 3_000 - 40_000);
    expect(readings.lastActivityAtMs["tty-output"]).toBe(AT - 3_000 - 2_000);
  });

  it("counts what the metrics export", () => {
    const notebook = readingsFromReport(REPORTS["a busy notebook with a browser"], AT);
    expect(notebook).toMatchObject({ jupyterBusyKernels: 1, jupyterConnectedKernels: 1, gpuCount: 0 });
    const gpus = readingsFromReport(REPORTS["GPUs, one unreadable and held"], AT);
    expect(gpus).toMatchObject({ gpuCount: 2, gpuUtilization: { "0": 0.3 }, gpuProcesses: 1 });
    const background = readingsFromReport(REPORTS["background work and an inhibitor"], AT);
    expect(background).toMatchObject({
      idleInhibitors: 1,
      networkBytesPerSecond: 5e6,
      diskBytesPerSecond: 2e7,
      cpuBusyRatio: 0.9,
      userProcessCpuCores: 6.5,
    });
  });

  it("turns a recorded lease into one with the same end", () => {
    const readings = readingsFromReport(REPORTS["an idle VM"], AT);
    const synthetic = reportFromReadings(readings, AT + 60_000, {
      intervalSeconds: 60,
      lease: { takenAtMs: AT, expiresAtMs: AT + 3_600_000 },
    });
    const evidence = extractEvidence({ report: synthetic, receivedAtMs: AT + 60_000 }, BUILTIN_DEFAULT_POLICY);
    expect(evidence.vetoes).toEqual([expect.objectContaining({ kind: "lease", untilMs: AT + 3_600_000 })]);
  });
});

describe("the replayed Report is a protobuf-es message", () => {
  // reportFromReadings builds a plain object, not through create(): it must be exactly what
  // protobuf-es makes (every field, zero values, proto3 optionals and unset messages absent), so the
  // engine reads the same as from a decoded Report. A binary round trip builds that reference.
  const every: ReportReadings = {
    cpuBusyRatio: 0.4,
    userProcessCpuCores: 1.5,
    networkBytesPerSecond: 900,
    diskBytesPerSecond: 1200,
    gpuCount: 2,
    gpuUtilization: { "1": 0.6 },
    gpuProcesses: 2,
    jupyterBusyKernels: 1,
    jupyterConnectedKernels: 2,
    idleInhibitors: 2,
    lastActivityAtMs: {
      "tty-input": AT - 5_000,
      "tty-output": AT - 1_000,
      "desktop-input": AT - 7_000,
      "remote-connected": AT,
      "remote-session": AT - 60_000,
      "jupyter-server": AT - 2_000,
      "jupyter-kernel": AT - 3_000,
      "jupyter-terminal": AT - 4_000,
      "code-server": AT - 9_000,
    },
    remoteForwardJupyterPort: 8888,
    remoteCadenceSeconds: 30,
  };
  const cases: Record<string, [ReportReadings, SyntheticReportOptions]> = {
    "nothing but a GPU": [
      {
        gpuCount: 1,
        gpuUtilization: {},
        gpuProcesses: 0,
        jupyterBusyKernels: 0,
        jupyterConnectedKernels: 0,
        idleInhibitors: 0,
        lastActivityAtMs: {},
      },
      { intervalSeconds: 60 },
    ],
    "every reading and a lease": [
      every,
      { intervalSeconds: 60, lease: { takenAtMs: AT - 600_000, expiresAtMs: AT + 600_000 } },
    ],
    "a typist only": [{ ...readingsFromReport(REPORTS["two ssh sessions, one typing"], AT) }, { intervalSeconds: 15 }],
  };
  for (const [name, [readings, options]] of Object.entries(cases)) {
    it(`has protobuf-es's own shape: ${name}`, () => {
      const built = reportFromReadings(readings, AT, options);
      expect(built).toStrictEqual(fromBinary(ReportSchema, toBinary(ReportSchema, built)));
    });
  }

  it("shares nothing a later step could change: the parts every Report has are frozen", () => {
    const built = reportFromReadings(cases["nothing but a GPU"]![0], AT, { intervalSeconds: 60 });
    expect(() => built.sessions?.sessions.push(create(TerminalSessionSchema))).toThrow(TypeError);
    expect(() => {
      built.sources[0]!.state = SourceState.FAILED;
    }).toThrow(TypeError);
    // What differs from step to step is the step's own.
    const next = reportFromReadings(cases["nothing but a GPU"]![0], AT + 60_000, { intervalSeconds: 60 });
    expect(next.gpu).not.toBe(built.gpu);
    expect(next.system).not.toBe(built.system);
  });
});

describe("machine traffic through SSH survives the round trip", () => {
  it("keeps the forward judged by its kernel and the cadence, with their reasons", () => {
    const at = 1_800_000_000_000;
    const report = create(ReportSchema, {
      remoteSessions: {
        sessions: [
          {
            user: "erin",
            interactionAgeSeconds: 4 * 3600,
            judgedByService: true,
            forwards: [{ destinationAddress: "127.0.0.1", destinationPort: 8888, service: "jupyter", listenerPid: 42 }],
          },
          { user: "frank", interactionAgeSeconds: 600, cadence: { periodSeconds: 30, bursts: 20 } },
        ],
      },
      jupyter: {
        servers: [
          {
            url: "http://127.0.0.1:8888/",
            pid: 42,
            reachable: true,
            kernels: [{ id: "k1", name: "python3", executionState: "idle", lastActivityAgeSeconds: 3 * 3600 }],
          },
        ],
      },
    });
    const readings = readingsFromReport(report, at);
    expect(readings).toMatchObject({ remoteForwardJupyterPort: 8888, remoteCadenceSeconds: 30 });
    const replayed = reportFromReadings(readings, at, { intervalSeconds: 60 });
    const details = extractEvidence({ report: replayed, receivedAtMs: at }, BUILTIN_DEFAULT_POLICY).readings.map(
      (reading) => reading.detail,
    );
    expect(details.join("\n")).toMatch(/forward to Jupyter server 8888: judged by the kernel, idle 3h/);
    expect(details.join("\n")).toMatch(/regular traffic every 30s \(a page reloading itself or a poller\)/);
  });
});
