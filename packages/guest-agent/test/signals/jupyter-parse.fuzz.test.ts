// Jupyter's JSON comes from users: runtime files in their homes, answers of servers they run.
// Fuzzed: any JSON and any text. Properties: a clear Error or a result in range, and no error
// message ever carries a piece of the input (a runtime file may be a link to a root-only file).
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  endpointFromRuntime,
  parseApiInfo,
  parseKernels,
  parseRuntimeFile,
  parseStatus,
  parseTerminals,
} from "../../src/signals/jupyter-parse.js";
import { anyText, expectFiniteNumbers, parsesOrRefuses, RUNS } from "../support/fuzz.js";

const NOW = Date.UTC(2026, 10, 29, 14, 30);
const MARKER = "S3CRET-MARKER";

/** JSON shaped like Jupyter's, with the marker hidden in strings and keys. */
const jupyterish = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: "small" },
    fc.constantFrom(MARKER, `${MARKER} more`, "2026-11-29T14:28:05.784083Z", "idle", "busy", "", "0.0.0.0", "/user/x/"),
    fc.double(),
    fc.integer(),
    fc.boolean(),
    fc.constant(null),
    fc.array(tie("value"), { maxLength: 4 }),
    fc.dictionary(
      fc.constantFrom(
        "id",
        "name",
        "last_activity",
        "execution_state",
        "connections",
        "port",
        "sock",
        "url",
        "hostname",
        "token",
        "base_url",
        "secure",
        "pid",
        "version",
        "started",
        "kernels",
        MARKER,
      ),
      tie("value"),
      { maxKeys: 8 },
    ),
  ),
})).value;

const inputs = fc.oneof(
  jupyterish.map((value) => JSON.stringify(value)),
  anyText.map((text) => `${text}${MARKER}`),
  fc.constant(`${MARKER}{"port": 1`),
);

function neverQuotes(parse: () => unknown): void {
  try {
    parse();
  } catch (error) {
    expect((error as Error).message).not.toContain(MARKER);
  }
}

describe("Jupyter JSON parsers under fuzzing", () => {
  it("parseRuntimeFile (and the endpoint built from it): a clear Error, or a port in 1..65535, never an echo of the file", () => {
    fc.assert(
      fc.property(inputs, (text) => {
        neverQuotes(() => parseRuntimeFile(text));
        parsesOrRefuses(
          () => endpointFromRuntime(parseRuntimeFile(text)),
          (endpoint) => {
            if (!endpoint.socketPath) expect(endpoint.port >= 1 && endpoint.port <= 65535).toBe(true);
            expect(endpoint.url.startsWith("http")).toBe(true);
          },
        );
      }),
      RUNS,
    );
  });

  it("parseKernels / parseTerminals / parseStatus / parseApiInfo: ages ≥ 0, counts are non-negative integers", () => {
    fc.assert(
      fc.property(inputs, (text) => {
        for (const parse of [
          () => parseKernels(text, NOW),
          () => parseTerminals(text, NOW),
          () => parseStatus(text, NOW),
          () => parseApiInfo(text),
        ] as Array<() => unknown>) {
          neverQuotes(parse);
          parsesOrRefuses(parse, (result) => expectFiniteNumbers(result, { nonNegative: true }));
        }
        parsesOrRefuses(
          () => parseKernels(text, NOW),
          (kernels) => kernels.forEach((kernel) => expect(Number.isInteger(kernel.connections)).toBe(true)),
        );
      }),
      RUNS,
    );
  });
});
