// Policy values come from VM annotations, which whoever may edit the VM writes. Fuzzed: every
// value parser with any value, and policyFromAnnotations with any annotations. A bad value is a
// ValueError (or a listed error), never a crash, and what is accepted is in the declared range.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  BUILTIN_DEFAULT_POLICY,
  policyFromAnnotations,
  POLICY_KNOB_NAMES,
  resolvePolicy,
  DEFAULT_ANNOTATION_PREFIX,
} from "../../src/engine/policy.js";
import {
  parseBoolean,
  parseByteRate,
  parseCores,
  parseDurationValue,
  parseMode,
  parseOptionalDuration,
  parseRatio,
  parseSwitch,
  ValueError,
} from "../../src/engine/values.js";

const RUNS = { numRuns: 400 } as const;

/** Strings near the grammar (numbers, units, percentages, words) and anything else. */
const valueText = fc.oneof(
  fc.string({ maxLength: 24 }),
  fc
    .tuple(
      fc.oneof(
        fc.nat().map(String),
        fc.double({ noNaN: false }).map(String),
        fc.constantFrom("0", "00", "1e3", "9".repeat(400), ".5", "-1"),
      ),
      fc.constantFrom("", "%", "s", "m", "h", "d", "w", "1h30m", "MB/s", "KiB/s", "Gi", "b/s", " ", "ms"),
    )
    .map(([number, unit]) => `${number}${unit}`),
  fc.constantFrom("off", "OFF", " none ", "disabled", "never", "enabled", "true", "no", "enforce", "observe", ""),
);
const anyValue = fc.oneof(
  valueText,
  fc.double(),
  fc.integer(),
  fc.boolean(),
  fc.constant(null),
  fc.constant(undefined),
  fc.array(fc.integer(), { maxLength: 2 }),
  fc.object({ maxDepth: 1 }),
);

function refusedOr<T>(parse: () => T, check: (value: T) => void): void {
  let value: T;
  try {
    value = parse();
  } catch (error) {
    if (!(error instanceof ValueError))
      throw new Error(`crashed instead of refusing: ${String((error as Error)?.stack ?? error)}`);
    expect(error.message.length).toBeGreaterThan(0);
    return;
  }
  check(value);
}

const isOffWord = (value: unknown) =>
  typeof value === "string" && ["off", "none", "disabled"].includes(value.trim().toLowerCase());

describe("policy value parsers under fuzzing", () => {
  it("ratios are in (0, 1], or Infinity only for off", () => {
    fc.assert(
      fc.property(anyValue, (value) =>
        refusedOr(
          () => parseRatio(value),
          (ratio) => expect(isOffWord(value) ? ratio === Infinity : ratio > 0 && ratio <= 1).toBe(true),
        ),
      ),
      RUNS,
    );
  });
  it("cores are in (0, 4096], or Infinity only for off", () => {
    fc.assert(
      fc.property(anyValue, (value) =>
        refusedOr(
          () => parseCores(value),
          (cores) => expect(isOffWord(value) ? cores === Infinity : cores > 0 && cores <= 4096).toBe(true),
        ),
      ),
      RUNS,
    );
  });
  it("byte rates are finite and positive, or Infinity only for off", () => {
    fc.assert(
      fc.property(anyValue, (value) =>
        refusedOr(
          () => parseByteRate(value),
          (rate) => expect(isOffWord(value) ? rate === Infinity : Number.isFinite(rate) && rate > 0).toBe(true),
        ),
      ),
      RUNS,
    );
  });
  it("huge numbers never turn into Infinity, which would mean off", () => {
    fc.assert(
      fc.property(fc.integer({ min: 300, max: 1000 }), fc.constantFrom("", "MB/s", "%", "h", "KiB"), (digits, unit) => {
        const value = `${"9".repeat(digits)}${unit}`;
        refusedOr(
          () => parseByteRate(value),
          (rate) => expect(Number.isFinite(rate)).toBe(true),
        );
        refusedOr(
          () => parseCores(value),
          (cores) => expect(Number.isFinite(cores)).toBe(true),
        );
        refusedOr(
          () => parseRatio(value),
          (ratio) => expect(Number.isFinite(ratio)).toBe(true),
        );
        refusedOr(
          () => parseDurationValue(value, { allowBareSeconds: true }),
          (seconds) => expect(Number.isFinite(seconds)).toBe(true),
        );
      }),
      { numRuns: 50 },
    );
  });
  it("durations are finite, positive and within their bounds", () => {
    fc.assert(
      fc.property(anyValue, fc.boolean(), (value, allowBareSeconds) => {
        refusedOr(
          () => parseDurationValue(value, { allowBareSeconds, minSeconds: 30, maxSeconds: 7 * 86_400 }),
          (seconds) => expect(Number.isFinite(seconds) && seconds >= 30 && seconds <= 7 * 86_400).toBe(true),
        );
        refusedOr(
          () => parseOptionalDuration(value, { allowBareSeconds }),
          (seconds) => expect(seconds === null || (Number.isFinite(seconds) && seconds > 0)).toBe(true),
        );
      }),
      RUNS,
    );
  });
  it("booleans, switches and modes are what they say, or refused", () => {
    fc.assert(
      fc.property(anyValue, (value) => {
        refusedOr(
          () => parseBoolean(value),
          (flag) => expect(typeof flag).toBe("boolean"),
        );
        refusedOr(
          () => parseSwitch(value),
          (flag) => expect(typeof flag).toBe("boolean"),
        );
        refusedOr(
          () => parseMode(value),
          (mode) => expect(["enforce", "observe"]).toContain(mode),
        );
      }),
      RUNS,
    );
  });

  it("policyFromAnnotations never throws; with errors the VM falls back, so a typo never enforces", () => {
    const annotations = fc.dictionary(
      fc.oneof(
        fc
          .constantFrom(...POLICY_KNOB_NAMES, "profile", "autostop", "idle-timeout", "unknown-knob")
          .map((name) => `${DEFAULT_ANNOTATION_PREFIX}${name}`),
        fc.string({ maxLength: 30 }),
      ),
      valueText,
      { maxKeys: 8 },
    );
    fc.assert(
      fc.property(annotations, (given) => {
        const parsed = policyFromAnnotations({}, given, BUILTIN_DEFAULT_POLICY, {
          training: { idleTimeoutSeconds: 8 * 3600 },
        });
        const { idleTimeoutSeconds, gracePeriodSeconds, maxKeepRunningSeconds } = parsed.policy;
        for (const seconds of [idleTimeoutSeconds, gracePeriodSeconds, maxKeepRunningSeconds])
          expect(Number.isFinite(seconds) && seconds >= 0).toBe(true);
        const resolved = resolvePolicy(undefined, parsed);
        if (parsed.errors.length > 0) expect(resolved.policy.mode).toBe("observe");
      }),
      RUNS,
    );
  });

  it("accepts every well-formed value, as the number it names", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 100 }),
        fc.integer({ min: 1, max: 4096 }),
        fc.integer({ min: 1, max: 10_000 }),
        fc.integer({ min: 1, max: 7 * 24 * 60 }),
        fc.constantFrom("enforce", "observe"),
        fc.boolean(),
        (percent, cores, kib, minutes, mode, flag) => {
          expect(parseRatio(`${percent}%`)).toBeCloseTo(percent / 100, 10);
          expect(parseCores(String(cores))).toBe(cores);
          expect(parseByteRate(`${kib}KiB/s`)).toBe(kib * 1024);
          expect(parseDurationValue(`${minutes}m`, { allowBareSeconds: false })).toBe(minutes * 60);
          expect(parseDurationValue(String(minutes * 60), { allowBareSeconds: true })).toBe(minutes * 60);
          expect(parseOptionalDuration(`${minutes}m`, { allowBareSeconds: false })).toBe(minutes * 60);
          expect(parseMode(mode)).toBe(mode);
          expect(parseBoolean(String(flag))).toBe(flag);
          expect(parseSwitch(flag ? "enabled" : "disabled")).toBe(flag);
        },
      ),
      RUNS,
    );
  });
});
