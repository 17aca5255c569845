// Shared pieces of the *.fuzz.test.ts files: inputs a user or a peer could feed a parser, and
// the one property every parser must keep (a clear Error or a result in range, nothing else).
import fc from "fast-check";

/** Runs per property: enough to find the classic edge cases, quick on a loaded 2-core CI machine. */
export const RUNS = { numRuns: 400 } as const;

/** A real capture with random damage: characters replaced, inserted, deleted, lines cut or doubled. */
export function mutated(text: string): fc.Arbitrary<string> {
  const edit = fc.oneof(
    fc.record({ kind: fc.constant("replace" as const), at: fc.nat(), with: fc.string({ maxLength: 8 }) }),
    fc.record({
      kind: fc.constant("insert" as const),
      at: fc.nat(),
      with: fc.oneof(
        fc.string({ maxLength: 8 }),
        fc.constantFrom("\n", " ", "\t", ":", ",", "-1", "NaN", "1e309", "\u0000", "(", ")"),
      ),
    }),
    fc.record({ kind: fc.constant("delete" as const), at: fc.nat(), length: fc.integer({ min: 1, max: 40 }) }),
    fc.record({ kind: fc.constant("truncate" as const), at: fc.nat() }),
  );
  return fc.array(edit, { minLength: 1, maxLength: 6 }).map((edits) => {
    let out = text;
    for (const step of edits) {
      const at = out.length === 0 ? 0 : step.at % (out.length + 1);
      if (step.kind === "replace") out = out.slice(0, at) + step.with + out.slice(at + step.with.length);
      else if (step.kind === "insert") out = out.slice(0, at) + step.with + out.slice(at);
      else if (step.kind === "delete") out = out.slice(0, at) + out.slice(at + step.length);
      else out = out.slice(0, at);
    }
    return out;
  });
}

/** Any text at all, weighted towards what parsers split on. */
export const anyText: fc.Arbitrary<string> = fc.oneof(
  fc.string({ maxLength: 300 }),
  fc.string({ unit: "binary", maxLength: 200 }),
  fc
    .array(
      fc.oneof(
        fc.string({ maxLength: 12 }),
        fc.constantFrom("\n", " ", ":", ",", "\t", "0", "-1", "18446744073709551616"),
      ),
      { maxLength: 60 },
    )
    .map((parts) => parts.join("")),
);

/**
 * Calls the parser: it either returns (the result goes to `check`) or throws a plain Error with
 * a message. A TypeError or RangeError is a crash the caller did not plan for: the property fails.
 */
export function parsesOrRefuses<T>(
  parse: () => T,
  check: (result: T) => void = () => undefined,
  allowed: ReadonlyArray<new (...args: never[]) => Error> = [Error],
): void {
  let result: T;
  try {
    result = parse();
  } catch (error) {
    if (!(error instanceof Error) || !allowed.some((kind) => error.constructor === kind))
      throw new Error(`the parser crashed instead of refusing: ${String((error as Error)?.stack ?? error)}`);
    if (error.message.trim() === "") throw new Error("the parser refused without saying why");
    return;
  }
  check(result);
}

/** Every number in the value is finite (and bigints/numbers ≥ 0 unless the path is in `signed`). */
export function expectFiniteNumbers(
  value: unknown,
  options: { nonNegative?: boolean; signed?: readonly string[] } = {},
  at = "result",
): void {
  if (typeof value === "number") {
    if (!Number.isFinite(value)) throw new Error(`${at} is ${value}`);
    if (options.nonNegative && value < 0 && !options.signed?.some((name) => at.endsWith(name)))
      throw new Error(`${at} is negative (${value})`);
  } else if (typeof value === "bigint") {
    if (options.nonNegative && value < 0n) throw new Error(`${at} is negative (${value})`);
  } else if (Array.isArray(value)) {
    value.forEach((entry, index) => expectFiniteNumbers(entry, options, `${at}[${index}]`));
  } else if (value instanceof Map) {
    for (const [key, entry] of value) expectFiniteNumbers(entry, options, `${at}.${String(key)}`);
  } else if (typeof value === "object" && value !== null) {
    for (const [key, entry] of Object.entries(value)) expectFiniteNumbers(entry, options, `${at}.${key}`);
  }
}
