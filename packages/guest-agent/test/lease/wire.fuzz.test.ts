// The lease socket is open to every local user: whatever bytes they send, parseRequest answers
// (never throws) and what it accepts is in range. The same for the answers a client parses, the
// line splitter, and leases.json (a file a crash may have cut anywhere).
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { checkTake, MIN_LEASE_SECONDS } from "../../src/lease/leases.js";
import { parseLeaseState, serializeLeaseState } from "../../src/lease/store.js";
import { MAX_CONFIRM_WAIT_SECONDS, parseChallenge, parseRequest, takeLines } from "../../src/lease/wire.js";
import { anyText, mutated, RUNS } from "../support/fuzz.js";

const requestish = fc.dictionary(
  fc.constantFrom("op", "seconds", "reason", "wait", "id", "all", "uid", "user", "__proto__", "constructor"),
  fc.oneof(
    fc.constantFrom("take", "list", "status", "cancel", "TAKE", ""),
    fc.double(),
    fc.integer(),
    fc.boolean(),
    fc.constant(null),
    fc.string({ maxLength: 20 }),
    fc.array(fc.integer(), { maxLength: 2 }),
  ),
  { maxKeys: 6 },
);

describe("lease wire protocol under fuzzing", () => {
  it("parseRequest answers every line; a take it accepts has a finite positive duration and a bounded wait", () => {
    fc.assert(
      fc.property(
        fc.oneof(
          requestish.map((value) => JSON.stringify(value)),
          anyText,
        ),
        (line) => {
          const parsed = parseRequest(line);
          if (!parsed.ok) {
            expect(parsed.error.message.length).toBeGreaterThan(0);
            return;
          }
          const request = parsed.request;
          if (request.op === "take") {
            expect(Number.isFinite(request.seconds) && request.seconds > 0).toBe(true);
            expect(request.waitSeconds >= 0 && request.waitSeconds <= MAX_CONFIRM_WAIT_SECONDS).toBe(true);
            expect(typeof request.reason).toBe("string");
            // What the service then checks: a sub-second lease is refused, whatever the client sent.
            const refusal = checkTake(request, 1000, 86_400, []);
            if (request.seconds < MIN_LEASE_SECONDS) expect(refusal?.code).toBe("bad_duration");
          }
          if (request.op === "cancel")
            expect("id" in request.target ? typeof request.target.id === "string" : request.target.all).toBeTruthy();
        },
      ),
      RUNS,
    );
  });

  it("parseChallenge never throws", () => {
    fc.assert(
      fc.property(
        fc.oneof(
          anyText,
          fc.jsonValue().map((value) => JSON.stringify(value)),
        ),
        (line) => void parseChallenge(line),
      ),
      RUNS,
    );
  });

  it("takeLines: no line holds a newline, the rest is the unfinished tail, nothing non-blank is lost", () => {
    fc.assert(
      fc.property(anyText, (buffer) => {
        const { lines, rest } = takeLines(buffer);
        expect(rest.includes("\n")).toBe(false);
        expect(buffer.endsWith(rest)).toBe(true);
        for (const line of lines) expect(line.includes("\n") || line.trim() === "").toBe(false);
        const complete = buffer
          .slice(0, buffer.length - rest.length)
          .split("\n")
          .map((line) => line.replace(/\r$/, ""))
          .filter((line) => line.trim() !== "");
        expect(lines).toEqual(complete);
      }),
      RUNS,
    );
  });

  it("parseLeaseState: a cut or damaged leases.json is refused with a reason, never thrown", () => {
    const stored = serializeLeaseState({
      leases: [
        {
          id: "0a1b2c3d",
          uid: 1000,
          user: "alice",
          reason: "training",
          requestedSeconds: 28_800,
          holdSeconds: 28_800,
          takenAtMs: 1_800_000_000_000,
          confirmed: true,
          clamped: false,
          refused: false,
        },
        {
          id: "ffffffff",
          uid: 0,
          user: "root",
          reason: "",
          requestedSeconds: 60,
          holdSeconds: 0,
          takenAtMs: 1_800_000_000_000,
          confirmed: false,
          clamped: true,
          refused: false,
          maxKeepRunningSeconds: 3600,
        },
      ],
      maxKeepRunningSeconds: 86_400,
    });
    fc.assert(
      fc.property(fc.oneof(mutated(stored), anyText), (text) => {
        const parsed = parseLeaseState(text);
        if (!parsed.ok) return void expect(parsed.error.length).toBeGreaterThan(0);
        for (const lease of parsed.state.leases) {
          expect(/^[0-9a-f]{8}$/.test(lease.id)).toBe(true);
          expect(Number.isInteger(lease.uid) && lease.uid >= 0).toBe(true);
          expect(Number.isFinite(lease.requestedSeconds) && lease.requestedSeconds > 0).toBe(true);
          expect(Number.isFinite(lease.holdSeconds) && lease.holdSeconds >= 0).toBe(true);
        }
      }),
      RUNS,
    );
  });
});
