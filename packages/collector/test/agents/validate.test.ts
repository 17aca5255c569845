import { describe, expect, it } from "vitest";
import { create } from "@bufbuild/protobuf";
import { HelloSchema, PROTOCOL_VERSION, ReportSchema } from "@ws/protocol";
import { validateHello, validateReport, ValidationError } from "../../src/agents/validate.js";

describe("validateHello", () => {
  it("accepts the protocol version it speaks, and a Hello that predates the field", () => {
    for (const protocolVersion of [0, PROTOCOL_VERSION]) {
      expect(
        validateHello(create(HelloSchema, { vm: { namespace: "a", name: "x" }, token: "t", protocolVersion })),
      ).toEqual({ namespace: "a", name: "x" });
    }
  });
  it("accepts a proper identity", () => {
    expect(validateHello(create(HelloSchema, { vm: { namespace: "team-a", name: "alice-ws" }, token: "t" }))).toEqual({
      namespace: "team-a",
      name: "alice-ws",
    });
  });
  it.each([
    [{ vm: { namespace: "", name: "x" }, token: "t" }, /namespace/],
    [{ vm: { namespace: "a", name: "Bad_Name" }, token: "t" }, /VM name/],
    [{ vm: { namespace: "a", name: "x" }, token: "" }, /no token/],
    [{ token: "t" }, /namespace/],
    [
      { vm: { namespace: "a", name: "x" }, token: "t", protocolVersion: 2 },
      /protocol_version 2 is unknown to this collector, which speaks version 1/,
    ],
    [
      { vm: { namespace: "a", name: "x" }, token: "t", protocolVersion: 0xffffffff },
      /protocol_version 4294967295 is unknown/,
    ],
  ])("refuses %j", (hello, message) => {
    expect(() => validateHello(create(HelloSchema, hello))).toThrow(message);
  });
});

describe("validateReport", () => {
  it("accepts an ordinary report", () => {
    expect(() =>
      validateReport(
        create(ReportSchema, {
          sequence: 1n,
          sessions: { sessions: [{ tty: "pts/0", inputAgeSeconds: 3 }] },
          gpu: { gpus: [{ index: 0, utilizationRatio: 0.97 }] },
          leases: { leases: [{ id: "l1", requestedSeconds: 28_800, ageSeconds: 10 }] },
        }),
      ),
    ).not.toThrow();
  });
  it.each([
    [{ sessions: { sessions: [{ inputAgeSeconds: -1 }] } }, /input_age_seconds/],
    [{ sessions: { sessions: [{ inputAgeSeconds: Number.NaN }] } }, /input_age_seconds/],
    [{ gpu: { gpus: [{ utilizationRatio: 7 }] } }, /utilization_ratio/],
    [{ system: { cpuBusyRatio: Number.POSITIVE_INFINITY } }, /cpu_busy_ratio/],
    [{ leases: { leases: [{ id: "x", requestedSeconds: 1e12 }] } }, /requested_seconds/],
    [{ sampleAgeSeconds: 1e20 }, /sample_age_seconds/],
    [{ desktop: { devices: [{ node: "event1", inputAgeSeconds: -5 }] } }, /desktop\.input_age_seconds/],
    [
      { remoteSessions: { sessions: [{ user: "a", interactionAgeSeconds: Number.NaN }] } },
      /remote_sessions\.interaction_age_seconds/,
    ],
    [
      { remoteSessions: { sessions: [{ user: "a", cadence: { periodSeconds: Number.POSITIVE_INFINITY } }] } },
      /remote_sessions\.cadence\.period_seconds/,
    ],
    [
      { remoteSessions: { sessions: [{ user: "a", forwards: [{ destinationPort: 8888, lastSeenAgeSeconds: -1 }] }] } },
      /remote_sessions\.forwards\.last_seen_age_seconds/,
    ],
  ])("refuses %j", (report, message) => {
    expect(() => validateReport(create(ReportSchema, report as never))).toThrow(ValidationError);
    expect(() => validateReport(create(ReportSchema, report as never))).toThrow(message);
  });
});

describe("validateReport limits for the desktop and remote-session signals", () => {
  it("cuts 5000 remote sessions and 100 input devices to their limits and says so", () => {
    const report = create(ReportSchema, {
      remoteSessions: { sessions: Array.from({ length: 5000 }, () => ({ user: "a" })) },
      desktop: { devices: Array.from({ length: 100 }, (_, i) => ({ node: `event${i}` })) },
    });
    const cuts = validateReport(report);
    expect(report.remoteSessions?.sessions).toHaveLength(256);
    expect(report.desktop?.devices).toHaveLength(32);
    expect(cuts).toEqual(
      expect.arrayContaining([
        { field: "remote_sessions", sent: 5000, kept: 256 },
        { field: "desktop.devices", sent: 100, kept: 32 },
      ]),
    );
  });

  it("cuts forwards over all sessions to 256", () => {
    const report = create(ReportSchema, {
      remoteSessions: {
        sessions: Array.from({ length: 3 }, () => ({
          user: "a",
          forwards: Array.from({ length: 200 }, (_, i) => ({ destinationAddress: "127.0.0.1", destinationPort: i })),
        })),
      },
    });
    const cuts = validateReport(report);
    expect(report.remoteSessions!.sessions.map((session) => session.forwards.length)).toEqual([200, 56, 0]);
    expect(cuts.filter((cut) => cut.field === "remote_sessions.forwards")[0]).toEqual({
      field: "remote_sessions.forwards",
      sent: 400,
      kept: 256,
    });
  });

  it("cuts a Report's quiet minutes to an hour and refuses a negative idle clock", () => {
    const report = create(ReportSchema, {
      quietMinutes: Array.from({ length: 90 }, (_, i) => ({ endedSecondsBefore: (90 - i) * 60, idleSeconds: 1 })),
    });
    expect(validateReport(report)).toEqual([{ field: "quiet_minutes", sent: 90, kept: 60 }]);
    expect(report.quietMinutes).toHaveLength(60);
    const hostile = create(ReportSchema, { quietMinutes: [{ endedSecondsBefore: 60, idleSeconds: -5 }] });
    expect(() => validateReport(hostile)).toThrow(/quiet_minutes/);
  });
});
