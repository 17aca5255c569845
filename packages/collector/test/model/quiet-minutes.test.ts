// A Report's quiet minutes on the collector's clock: counted back from the receive time, kept only
// between the previous Report and this one's sample, oldest first.
import { create } from "@bufbuild/protobuf";
import { QuietMinuteSchema, ReportSchema } from "@ws/protocol";
import { describe, expect, it } from "vitest";
import { quietMinutePoints } from "../../src/model/quiet-minutes.js";

const AT = Date.parse("2026-12-01T10:00:00Z");

describe("quietMinutePoints", () => {
  const report = create(ReportSchema, {
    sampleAgeSeconds: 2,
    quietMinutes: [
      create(QuietMinuteSchema, { endedSecondsBefore: 60, idleSeconds: 5, active: true }),
      create(QuietMinuteSchema, { endedSecondsBefore: 120 }),
      // A minute before the previous Report and one after the sample: a confused agent's.
      create(QuietMinuteSchema, { endedSecondsBefore: 900, idleSeconds: 1 }),
      create(QuietMinuteSchema, { endedSecondsBefore: 0, idleSeconds: 1 }),
    ],
  });

  it("places each minute back from the sample's time, in order, dropping those outside the gap", () => {
    expect(quietMinutePoints(report, AT, AT - 300_000)).toEqual([
      { atMs: AT - 122_000, idleSeconds: Number.NaN, active: false },
      { atMs: AT - 62_000, idleSeconds: 5, active: true },
    ]);
  });

  it("none without a previous Report, or from an agent that sends none (as before the field)", () => {
    expect(quietMinutePoints(report, AT, undefined)).toEqual([]);
    expect(quietMinutePoints(create(ReportSchema, {}), AT, AT - 300_000)).toEqual([]);
  });
});
