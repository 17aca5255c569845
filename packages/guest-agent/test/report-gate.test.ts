import { create, type MessageInitShape } from "@bufbuild/protobuf";
import {
  ReportChange,
  ReportSchema,
  ReportWhenSchema,
  SessionKind,
  SourceState,
  ThresholdsSchema,
  type Report,
} from "@ws/protocol";
import { describe, expect, it } from "vitest";
import {
  changesBetween,
  contractFrom,
  digestOf,
  MAX_REPORT_WITHIN_SECONDS,
  sendReason,
} from "../src/agent/report-gate.js";

const thresholds = create(ThresholdsSchema, {
  gpuUtilizationRatio: 0.1,
  cpuBusyRatio: 0.5,
  userProcessCpuCores: 0.5,
  networkBytesPerSecond: 1e6,
  diskBytesPerSecond: 1e6,
});

/** A steady VM: one ssh login typing, sources ok, a disk half full. */
function report(overrides: Omit<MessageInitShape<typeof ReportSchema>, "$typeName"> = {}): Report {
  return create(ReportSchema, {
    sources: [
      { source: "sessions", state: SourceState.OK },
      { source: "system", state: SourceState.OK },
    ],
    sessions: {
      sessions: [{ kind: SessionKind.UTMP, user: "alice", tty: "pts/0", pid: 100, inputAgeSeconds: 3 }],
    },
    system: { cpuBusyRatio: 0.05, userProcessCpuCores: 0.01 },
    disk: { mounts: [{ mountPoint: "/", sizeBytes: 100n, usedBytes: 50n }] },
    ...overrides,
  });
}

const everyKind = create(ReportWhenSchema, {
  nextReportWithinSeconds: 270,
  reportAtOnce: [ReportChange.VETO, ReportChange.LEASE, ReportChange.SOURCE, ReportChange.SESSION, ReportChange.DISK],
});
const INTERVAL_MS = 15_000;

describe("contractFrom", () => {
  it("takes the deadline from the Directive's arrival; without one the agent sends every sample", () => {
    expect(contractFrom(everyKind, 1_000)?.deadlineMs).toBe(271_000);
    expect(contractFrom(create(ReportWhenSchema, {}), 1_000)).toBeUndefined();
    expect(contractFrom(create(ReportWhenSchema, { nextReportWithinSeconds: 0 }), 1_000)).toBeUndefined();
    expect(contractFrom(create(ReportWhenSchema, { nextReportWithinSeconds: Number.NaN }), 1_000)).toBeUndefined();
    expect(contractFrom(create(ReportWhenSchema, { nextReportWithinSeconds: -5 }), 1_000)).toBeUndefined();
  });

  it("caps a runaway deadline at an hour", () => {
    expect(contractFrom(create(ReportWhenSchema, { nextReportWithinSeconds: 86_400 }), 0)?.deadlineMs).toBe(
      MAX_REPORT_WITHIN_SECONDS * 1000,
    );
  });
});

describe("changesBetween", () => {
  const at = (r: Report, ms: number) => digestOf(r, ms, thresholds);

  it("a person still typing is no change but new activity; the same keystroke read again is neither", () => {
    const first = at(report(), 100_000);
    expect([...changesBetween(first, at(report(), 115_000))]).toEqual([ReportChange.ACTIVITY]);
    const sameKeystroke = report({
      sessions: {
        sessions: [{ kind: SessionKind.UTMP, user: "alice", tty: "pts/0", pid: 100, inputAgeSeconds: 18 }],
      },
    });
    expect([...changesBetween(first, at(sameKeystroke, 115_000))]).toEqual([]);
  });

  it("names each kind of change", () => {
    const base = at(report(), 0);
    const cases: Array<[Report, ReportChange]> = [
      [report({ system: { cpuBusyRatio: 0.9, userProcessCpuCores: 0.01 } }), ReportChange.VETO],
      [report({ gpu: { gpus: [{ utilizationRatio: 0.97 }] } }), ReportChange.VETO],
      [report({ inhibitors: { locks: [{ who: "backup", what: "idle", mode: "block", pid: 7 }] } }), ReportChange.VETO],
      [report({ leases: { leases: [{ id: "0a0b0c0d", requestedSeconds: 3600 }] } }), ReportChange.LEASE],
      [
        report({
          sources: [
            { source: "sessions", state: SourceState.OK },
            { source: "system", state: SourceState.FAILED, message: "EACCES" },
          ],
        }),
        ReportChange.SOURCE,
      ],
      [
        report({
          sessions: {
            sessions: [
              { kind: SessionKind.UTMP, user: "alice", tty: "pts/0", pid: 100, inputAgeSeconds: 3 },
              { kind: SessionKind.UTMP, user: "bob", tty: "pts/1", pid: 200 },
            ],
          },
        }),
        ReportChange.SESSION,
      ],
      [report({ remoteSessions: { sshdListeningPorts: [22] } }), ReportChange.SESSION],
      [report({ disk: { mounts: [{ mountPoint: "/", sizeBytes: 100n, usedBytes: 86n }] } }), ReportChange.DISK],
    ];
    for (const [changed, kind] of cases) expect(changesBetween(base, at(changed, 0)).has(kind)).toBe(true);
  });

  it("a level moving below its threshold, or a disk filling within one band, is no change", () => {
    const base = at(report(), 0);
    const quieter = report({
      system: { cpuBusyRatio: 0.2, userProcessCpuCores: 0.2 },
      disk: { mounts: [{ mountPoint: "/", sizeBytes: 100n, usedBytes: 60n }] },
    });
    expect([...changesBetween(base, at(quieter, 0))]).toEqual([]);
  });
});

describe("sendReason", () => {
  const digest = (r: Report, ms: number) => digestOf(r, ms, thresholds);

  it("without a ReportWhen every sample goes out (an old collector, a new stream)", () => {
    expect(sendReason(undefined, digest(report(), 0), digest(report(), 15_000), 15_000, INTERVAL_MS)).toBe(
      "every-sample",
    );
  });

  it("a person typing all day is sent only when the next sample would miss the deadline", () => {
    // Each Report's answer carries a new ReportWhen: 270 s from then.
    let contract = contractFrom(everyKind, 0);
    let sent = digest(report(), 0);
    const sentAt: number[] = [];
    for (let now = INTERVAL_MS; now <= 3_600_000; now += INTERVAL_MS) {
      const current = digest(report(), now);
      const why = sendReason(contract, sent, current, now, INTERVAL_MS);
      if (why) {
        contract = contractFrom(everyKind, now);
        expect(why).toBe("deadline");
        sent = current;
        sentAt.push(now);
      }
    }
    // 240 samples an hour; the deadline (270 s after each answer) lets 13 through.
    expect(sentAt.length).toBe(13);
    for (let i = 1; i < sentAt.length; i++) expect(sentAt[i]! - sentAt[i - 1]!).toBeLessThanOrEqual(270_000);
  });

  it("a kind the collector asked for goes out at the next sample; one it did not ask for waits", () => {
    const vetoOnly = contractFrom(
      create(ReportWhenSchema, { nextReportWithinSeconds: 270, reportAtOnce: [ReportChange.VETO] }),
      0,
    );
    const sent = digest(report(), 0);
    const gpuJob = digest(report({ gpu: { gpus: [{ utilizationRatio: 0.97 }] } }), 15_000);
    expect(sendReason(vetoOnly, sent, gpuJob, 15_000, INTERVAL_MS)).toBe("change");
    const newLogin = digest(
      report({
        sessions: {
          sessions: [
            { kind: SessionKind.UTMP, user: "alice", tty: "pts/0", pid: 100, inputAgeSeconds: 3 },
            { kind: SessionKind.UTMP, user: "bob", tty: "pts/1", pid: 200 },
          ],
        },
      }),
      15_000,
    );
    expect(sendReason(vetoOnly, sent, newLogin, 15_000, INTERVAL_MS)).toBeUndefined();
    const activityToo = contractFrom(
      create(ReportWhenSchema, { nextReportWithinSeconds: 270, reportAtOnce: [ReportChange.ACTIVITY] }),
      0,
    );
    expect(sendReason(activityToo, sent, digest(report(), 15_000), 15_000, INTERVAL_MS)).toBe("change");
  });

  it("the first sample after a ReportWhen on a stream where nothing was sent goes out", () => {
    expect(sendReason(contractFrom(everyKind, 0), undefined, digest(report(), 0), 0, INTERVAL_MS)).toBe("first");
  });
});
