// nvidia-smi's CSV: process names come from users (a process can call itself anything, commas
// included), so the columns around them are counted from both ends. Fuzzed: damaged captures.
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { parseComputeAppsCsv, parseGpuCsv } from "../../src/signals/gpu-parse.js";
import { anyText, expectFiniteNumbers, mutated, parsesOrRefuses, RUNS } from "../support/fuzz.js";

const fixtures = path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "fixtures", "gpu");
const capture = (file: string) => readFileSync(path.join(fixtures, file), "utf8");

describe("nvidia-smi CSV parsers under fuzzing", () => {
  it("parseGpuCsv: a clear Error or GPUs with integer indexes and finite, non-negative readings", () => {
    fc.assert(
      fc.property(
        fc.oneof(mutated(capture("h100-load.gpus.csv")), mutated(capture("h200-mig-load.gpus.csv")), anyText),
        (input) =>
          parsesOrRefuses(
            () => parseGpuCsv(input),
            (gpus) => {
              expectFiniteNumbers(gpus, { nonNegative: true });
              for (const gpu of gpus) expect(Number.isSafeInteger(gpu.index)).toBe(true);
            },
          ),
      ),
      RUNS,
    );
  });

  it("parseComputeAppsCsv: any process name keeps pid, GPU and memory in their columns", () => {
    const line = (name: string) => `4242, GPU-5d1a3c9e-0000-4000-8000-000000000001, ${name}, 1024\n`;
    fc.assert(
      fc.property(
        fc.string({ maxLength: 40 }).filter((name) => !name.includes("\n") && name.trim() === name && name !== ""),
        (name) => {
          const [app] = parseComputeAppsCsv(line(name));
          expect(app).toMatchObject({
            pid: 4242,
            gpuUuid: "GPU-5d1a3c9e-0000-4000-8000-000000000001",
            usedMemoryBytes: 1024n * 1024n * 1024n,
          });
          expect(app!.processName.replace(/\s*,\s*/g, ",")).toBe(
            name
              .split(",")
              .map((part) => part.trim())
              .join(","),
          );
        },
      ),
      RUNS,
    );
    fc.assert(
      fc.property(fc.oneof(mutated(capture("h100-load.apps.csv")), anyText), (input) =>
        parsesOrRefuses(
          () => parseComputeAppsCsv(input),
          (apps) => apps.forEach((app) => expect(Number.isSafeInteger(app.pid) && app.pid >= 0).toBe(true)),
        ),
      ),
      RUNS,
    );
  });
});
