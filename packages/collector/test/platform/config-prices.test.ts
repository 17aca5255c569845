// The collector config's optional prices (docs/cost.md): read through the resolver, and a bad value
// refuses the whole file with the key named.
import { describe, expect, it } from "vitest";
import { CollectorConfigError, resolveCollectorConfig } from "../../src/platform/config.js";

const resolve = (text: string) => resolveCollectorConfig(text, "collector.yaml", {}, {});

describe("prices in the collector config", () => {
  it("are absent unless configured", () => {
    expect(resolve("").prices).toBeUndefined();
  });

  it("are read from the prices section", () => {
    const config = resolve(
      'prices:\n  currency: EUR\n  cpuCoreHour: 0.03\n  memoryGiBHour: 0.004\n  gpuHour: { "nvidia.com/A100-PCIE-40GB": 2.5 }\n  diskGiBMonth: { ceph-rbd: 0.1 }\n',
    );
    expect(config.prices).toEqual({
      currency: "EUR",
      cpuCoreHour: 0.03,
      memoryGiBHour: 0.004,
      gpuHour: { "nvidia.com/A100-PCIE-40GB": 2.5 },
      diskGiBMonth: { "ceph-rbd": 0.1 },
    });
  });

  it("refuse the file on a negative price or a misspelt key, naming the file and the key", () => {
    let error: unknown;
    try {
      resolve("prices:\n  cpuCoreHour: -0.5\n  memoryGibHour: 0.01\n");
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(CollectorConfigError);
    expect((error as CollectorConfigError).problems).toEqual([
      'collector.yaml: prices: unknown key "memoryGibHour"; did you mean "memoryGiBHour"?',
      "collector.yaml: prices.cpuCoreHour must be a number from 0 to 100, not -0.5",
    ]);
  });
});
