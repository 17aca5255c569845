// What a stop frees, read from a VM template (pure): every source of CPU, memory and devices,
// and malformed specs that yield nothing rather than an exception.
import { describe, expect, it } from "vitest";
import { resourcesOf, terminationGracePeriodOf } from "../../../src/platform/kube/vm-model.js";
import { describeFreed, freedParts, gpuCountOf } from "../../../src/platform/kube/vm-resources.js";

const spec = (domain: unknown, extra: Record<string, unknown> = {}) => ({ template: { spec: { domain, ...extra } } });

describe("resourcesOf", () => {
  it("prefers requests, then limits, then the CPU topology and the guest memory", () => {
    expect(resourcesOf(spec({ resources: { limits: { cpu: "4", memory: "8Gi" } } }))).toMatchObject({
      cpu: "4",
      memory: "8Gi",
    });
    expect(
      resourcesOf(
        spec({
          cpu: { sockets: 2, cores: 4, threads: 2 },
          memory: { guest: "16Gi" },
          resources: { limits: { memory: "20Gi" } },
        }),
      ),
    ).toMatchObject({
      cpu: "16 vCPU",
      memory: "16Gi",
    });
    expect(resourcesOf(spec({ resources: { requests: { cpu: 2, memory: "1Gi" } } }))).toMatchObject({
      cpu: "2",
      memory: "1Gi",
    });
  });

  it("counts GPUs and host devices by deviceName, in the VM's order", () => {
    const r = resourcesOf(
      spec({
        devices: {
          gpus: [
            { name: "a", deviceName: "nvidia.com/A100" },
            { name: "b", deviceName: "nvidia.com/A100" },
            { name: "c", deviceName: "nvidia.com/GRID_T4-1Q" },
          ],
          hostDevices: [{ name: "nic", deviceName: "intel.com/sriov" }],
        },
      }),
    );
    expect(r.gpus).toEqual([
      { deviceName: "nvidia.com/A100", count: 2 },
      { deviceName: "nvidia.com/GRID_T4-1Q", count: 1 },
    ]);
    expect(gpuCountOf(r)).toBe(3);
    expect(freedParts(r)).toEqual([
      "2 × nvidia.com/A100",
      "1 × nvidia.com/GRID_T4-1Q",
      "1 × intel.com/sriov (host device)",
    ]);
  });

  it("keeps at most 8 device kinds and ignores entries without a deviceName", () => {
    const gpus = [
      ...Array.from({ length: 12 }, (_, i) => ({ name: `g${i}`, deviceName: `vendor.com/kind-${i}` })),
      { name: "x" },
      "junk",
    ];
    expect(resourcesOf(spec({ devices: { gpus } })).gpus).toHaveLength(8);
  });

  it("yields nothing from malformed specs, and describeFreed says nothing then", () => {
    for (const bad of [
      null,
      7,
      "x",
      { template: null },
      spec(null),
      spec({ resources: { requests: { cpu: { nested: 1 }, memory: "64 gibibytes" } } }),
    ]) {
      const r = resourcesOf(bad);
      expect(r).toEqual({ cpu: null, memory: null, gpus: [], hostDevices: [] });
      expect(describeFreed(r)).toBeNull();
    }
  });
});

describe("terminationGracePeriodOf", () => {
  it("reads a non-negative integer, else null", () => {
    expect(terminationGracePeriodOf(spec({}, { terminationGracePeriodSeconds: 120 }))).toBe(120);
    expect(terminationGracePeriodOf(spec({}, { terminationGracePeriodSeconds: 0 }))).toBe(0);
    for (const v of [-1, 1.5, "120", null])
      expect(terminationGracePeriodOf(spec({}, { terminationGracePeriodSeconds: v }))).toBeNull();
    expect(terminationGracePeriodOf(spec({}))).toBeNull();
  });
});
