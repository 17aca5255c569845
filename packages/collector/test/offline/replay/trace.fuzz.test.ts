// Trace lines are what `ws-collector replay` reads: files people edit by hand and recordings
// cut short. Fuzzed: any line at all, and objects with the trace's keys holding anything.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { parseTrace, parseTraceLine, TraceError } from "../../../src/loop/trace.js";

const RUNS = { numRuns: 400 } as const;

const traceish = fc.dictionary(
  fc.constantFrom("t", "vm", "report", "event", "policy", "at", "extra"),
  fc.oneof(
    fc.double(),
    fc.nat(),
    fc.constantFrom("ns/vm", "bad", "agent-connected", "agent-disconnected", "2026-12-01T10:00:00Z", "not a time"),
    fc.string({ maxLength: 10 }),
    fc.constant(null),
    fc.jsonValue({ maxDepth: 3 }),
    fc.constant({ sequence: "1", intervalSeconds: 15, sessions: { sessions: [{ tty: "pts/0", inputAgeSeconds: 3 }] } }),
    fc.dictionary(fc.string({ maxLength: 8 }), fc.oneof(fc.string({ maxLength: 8 }), fc.integer())),
  ),
  { maxKeys: 5 },
);

describe("trace parsing under fuzzing", () => {
  it("parseTraceLine never throws: a problem as text, or an event at a finite t ≥ 0", () => {
    fc.assert(
      fc.property(
        fc.oneof(
          traceish.map((value) => JSON.stringify(value)),
          fc.string({ maxLength: 200 }),
        ),
        (text) => {
          const parsed = parseTraceLine(text, 1);
          if (typeof parsed === "string") return void expect(parsed.length).toBeGreaterThan(0);
          expect(Number.isFinite(parsed.t) && parsed.t >= 0).toBe(true);
          expect(parsed.vm).toMatch(/\//);
        },
      ),
      RUNS,
    );
  });

  it("parseTrace throws only a TraceError, and returns events sorted by t", () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.oneof(
            traceish.map((value) => JSON.stringify(value)),
            fc.string({ maxLength: 40 }),
          ),
          { maxLength: 8 },
        ),
        (lines) => {
          try {
            const events = parseTrace(lines.join("\n"));
            for (let i = 1; i < events.length; i++) expect(events[i]!.t).toBeGreaterThanOrEqual(events[i - 1]!.t);
          } catch (error) {
            if (!(error instanceof TraceError)) throw error;
          }
        },
      ),
      RUNS,
    );
  });

  it("accepts every well-formed line: its t, its VM and its event come back as written", () => {
    const name = fc.stringMatching(/^[a-z0-9]([a-z0-9-]{0,10}[a-z0-9])?$/);
    fc.assert(
      fc.property(
        fc.double({ min: 0, max: 1e7, noNaN: true }),
        name,
        name,
        fc.constantFrom("agent-connected", "agent-disconnected"),
        (t, namespace, vm, event) => {
          const parsed = parseTraceLine(JSON.stringify({ t, vm: `${namespace}/${vm}`, event }), 1);
          expect(parsed).toMatchObject({ t, vm: `${namespace}/${vm}`, kind: event });
        },
      ),
      RUNS,
    );
  });

  it("parseTrace keeps every well-formed line", () => {
    fc.assert(
      fc.property(fc.array(fc.nat({ max: 100_000 }), { minLength: 1, maxLength: 8 }), (times) => {
        const text = times.map((t) => JSON.stringify({ t, vm: "ns/vm", event: "agent-connected" })).join("\n");
        expect(parseTrace(text).map((event) => event.t)).toEqual([...times].sort((a, b) => a - b));
      }),
      RUNS,
    );
  });
});
