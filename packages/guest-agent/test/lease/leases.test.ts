import { create } from "@bufbuild/protobuf";
import { LeaseDecisionSchema } from "@ws/protocol";
import { describe, expect, it } from "vitest";
import {
  applyDecision,
  cancelRefusal,
  checkTake,
  isHolding,
  leaseAgeSeconds,
  leaseOnWire,
  mayCancel,
  newLease,
  partitionExpired,
  remainingSeconds,
  restoredLease,
  storedLease,
  type Instant,
  type LeaseRecord,
} from "../../src/lease/leases.js";

const T0: Instant = { wallMs: 1_700_000_000_000, monoMs: 5_000 };
const later = (seconds: number, wallSkewMs = 0): Instant => ({
  wallMs: T0.wallMs + seconds * 1000 + wallSkewMs,
  monoMs: T0.monoMs + seconds * 1000,
});
const lease = (requestedSeconds = 3600): LeaseRecord =>
  newLease({ id: "0a1b2c3d", uid: 1001, user: "alice", reason: "training", requestedSeconds }, T0);
const decision = (init: Parameters<typeof create<typeof LeaseDecisionSchema>>[1]) => create(LeaseDecisionSchema, init);

describe("lease ages", () => {
  it("ages on the monotonic clock: a wall-clock step neither expires nor extends it", () => {
    const l = lease(3600);
    expect(leaseAgeSeconds(l, later(600))).toBe(600);
    expect(leaseAgeSeconds(l, later(600, +86_400_000))).toBe(600);
    expect(leaseAgeSeconds(l, later(600, -86_400_000))).toBe(600);
    expect(remainingSeconds(l, later(600))).toBe(3000);
    expect(isHolding(l, later(3599))).toBe(true);
    expect(isHolding(l, later(3600))).toBe(false);
  });

  it("goes on the wire as an age, never a clock", () => {
    expect(leaseOnWire(lease(), later(90))).toEqual({
      id: "0a1b2c3d",
      uid: 1001,
      user: "alice",
      reason: "training",
      requestedSeconds: 3600,
      ageSeconds: 90,
      confirmed: false,
      via: "",
    });
  });

  it("carries its age across a restart through the wall time it was taken, rebased at every save", () => {
    const saved = storedLease(lease(), later(600, 5_000)); // the wall clock stepped 5 s forward meanwhile
    expect(saved.takenAtMs).toBe(T0.wallMs + 5_000);
    const afterRestart = restoredLease(saved, { wallMs: saved.takenAtMs + 900_000, monoMs: 42 });
    expect(leaseAgeSeconds(afterRestart, { wallMs: 0, monoMs: 42 })).toBe(900);
    // A wall clock behind the time taken (clock reset at boot) gives age 0, not a negative one.
    expect(
      leaseAgeSeconds(restoredLease(saved, { wallMs: saved.takenAtMs - 60_000, monoMs: 0 }), { wallMs: 0, monoMs: 0 }),
    ).toBe(0);
  });

  it("partitions the expired from the alive", () => {
    const short = newLease({ id: "00000001", uid: 1, user: "a", reason: "", requestedSeconds: 60 }, T0);
    const long = newLease({ id: "00000002", uid: 1, user: "a", reason: "", requestedSeconds: 600 }, T0);
    const { alive, expired } = partitionExpired([short, long], later(120));
    expect(alive.map((l) => l.id)).toEqual(["00000002"]);
    expect(expired.map((l) => l.id)).toEqual(["00000001"]);
  });
});

describe("collector decisions", () => {
  it("confirms; remaining counts from the Directive's arrival", () => {
    const { lease: next, events } = applyDecision(
      lease(3600),
      decision({ id: "0a1b2c3d", accepted: true, effectiveRemainingSeconds: 3000 }),
      later(600),
    );
    expect(next).toMatchObject({ confirmed: true, clamped: false, refused: false, holdSeconds: 3600 });
    expect(events.map((e) => e.action)).toEqual(["confirmed"]);
    // Confirmed again: nothing to audit.
    expect(
      applyDecision(next, decision({ id: "0a1b2c3d", accepted: true, effectiveRemainingSeconds: 2990 }), later(610))
        .events,
    ).toEqual([]);
  });

  it("clamps to max-keep-running, once audited", () => {
    const { lease: clamped, events } = applyDecision(
      lease(8 * 3600),
      decision({
        id: "0a1b2c3d",
        accepted: true,
        clamped: true,
        effectiveRemainingSeconds: 4 * 3600 - 60,
        maxKeepRunningSeconds: 4 * 3600,
      }),
      later(60),
    );
    expect(clamped).toMatchObject({
      clamped: true,
      holdSeconds: 4 * 3600,
      maxKeepRunningSeconds: 14400,
      requestedSeconds: 28800,
    });
    expect(events).toMatchObject([{ action: "clamped", detail: "max-keep-running 4h" }]);
    expect(isHolding(clamped, later(4 * 3600))).toBe(false);
  });

  it("never lengthens a lease past the request", () => {
    const { lease: next } = applyDecision(
      lease(3600),
      decision({ id: "0a1b2c3d", accepted: true, effectiveRemainingSeconds: 99_999 }),
      later(60),
    );
    expect(next.holdSeconds).toBe(3600);
  });

  it("a refusal stops the lease holding the VM, with the collector's message", () => {
    const { lease: refused, events } = applyDecision(
      lease(),
      decision({ id: "0a1b2c3d", accepted: false, message: "leases disabled" }),
      later(1),
    );
    expect(refused).toMatchObject({ refused: true, confirmed: true, collectorMessage: "leases disabled" });
    expect(isHolding(refused, later(2))).toBe(false);
    expect(events).toMatchObject([{ action: "refused", detail: "leases disabled" }]);
  });
});

describe("taking and cancelling", () => {
  it("refuses over the cap, a long reason, too many leases", () => {
    expect(checkTake({ seconds: 90_000, reason: "" }, 1001, 86_400, [])).toMatchObject({
      code: "over_cap",
      capSeconds: 86_400,
    });
    expect(checkTake({ seconds: 86_400, reason: "" }, 1001, 86_400, [])).toBeUndefined();
    expect(checkTake({ seconds: 60, reason: "x".repeat(201) }, 1001, 86_400, [])).toMatchObject({ code: "bad_reason" });
    expect(checkTake({ seconds: 0, reason: "" }, 1001, 86_400, [])).toMatchObject({ code: "bad_duration" });
    const many = Array.from({ length: 16 }, () => lease());
    expect(checkTake({ seconds: 60, reason: "" }, 1001, 86_400, many)).toMatchObject({ code: "too_many" });
    expect(checkTake({ seconds: 60, reason: "" }, 1002, 86_400, many)).toBeUndefined();
  });

  it("only the owner or root may cancel", () => {
    expect(mayCancel(lease(), 1001)).toBe(true);
    expect(mayCancel(lease(), 0)).toBe(true);
    expect(mayCancel(lease(), 1002)).toBe(false);
    // The refusal names who may, once each (issue 34: root's lease said "only root or root").
    expect(cancelRefusal({ id: "0a1b2c3d", user: "root", uid: 0 })).toBe(
      "lease 0a1b2c3d belongs to root: only root may cancel it",
    );
    expect(cancelRefusal({ id: "0a1b2c3d", user: "alice", uid: 1001 })).toBe(
      "lease 0a1b2c3d belongs to alice (uid 1001): only alice or root may cancel it",
    );
  });
});
