import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { interpretRun, isUnavailable, parseComputeAppsCsv, parseGpuCsv } from "../../src/signals/gpu-parse.js";

// Each fixture is the answer to the signal's own query (noheader, nounits), transcribed
// from public captures of real nvidia-smi runs; docs/signals/gpu.md names every source.
const fixtures = path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "fixtures", "gpu");
const fixture = (name: string) => readFileSync(path.join(fixtures, name), "utf8");
const MIB = 1024n * 1024n;
const UUID = "GPU-00000000-0000-0000-0000-000000000000";

describe("parseGpuCsv", () => {
  it("an idle H100", () => {
    expect(parseGpuCsv(fixture("h100-idle.gpus.csv"))).toEqual([
      {
        index: 0,
        uuid: UUID,
        name: "NVIDIA H100 80GB HBM3",
        utilizationRatio: 0,
        memoryUtilizationRatio: 0,
        memoryUsedBytes: 0n,
        memoryTotalBytes: 81559n * MIB,
        migMode: "Disabled",
      },
    ]);
  });

  it("an H100 under load", () => {
    expect(parseGpuCsv(fixture("h100-load.gpus.csv"))).toEqual([
      {
        index: 0,
        uuid: UUID,
        name: "NVIDIA H100 80GB HBM3",
        utilizationRatio: 1,
        memoryUtilizationRatio: 0.11,
        memoryUsedBytes: 19818n * MIB,
        memoryTotalBytes: 81559n * MIB,
        migMode: "Disabled",
      },
    ]);
  });

  it("an H200 in MIG mode reports no utilization: unset, never zero", () => {
    for (const name of ["h200-mig-idle.gpus.csv", "h200-mig-load.gpus.csv"]) {
      const [gpu] = parseGpuCsv(fixture(name));
      expect(gpu).toMatchObject({ index: 0, name: "NVIDIA H200", migMode: "Enabled", memoryTotalBytes: 143771n * MIB });
      expect(gpu).not.toHaveProperty("utilizationRatio");
      expect(gpu).not.toHaveProperty("memoryUtilizationRatio");
    }
    expect(parseGpuCsv(fixture("h200-mig-load.gpus.csv"))[0]?.memoryUsedBytes).toBe(16959n * MIB);
  });

  it("a GeForce without MIG support", () => {
    expect(parseGpuCsv(fixture("rtx2080super-load.gpus.csv"))).toEqual([
      {
        index: 0,
        uuid: UUID,
        name: "NVIDIA GeForce RTX 2080 SUPER",
        utilizationRatio: 0.08,
        memoryUtilizationRatio: 0.03,
        memoryUsedBytes: 819n * MIB,
        memoryTotalBytes: 8192n * MIB,
        migMode: "",
      },
    ]);
  });

  it("several GPUs, one line each", () => {
    const gpus = parseGpuCsv(fixture("a100x3-load.gpus.csv"));
    expect(gpus.map((gpu) => [gpu.index, gpu.uuid, gpu.utilizationRatio, gpu.memoryUsedBytes])).toEqual([
      [0, "GPU-00000000-0000-0000-0000-000000000000", 1, 7488n * MIB],
      [1, "GPU-00000001-0000-0000-0000-000000000001", 1, 7500n * MIB],
      [2, "GPU-00000002-0000-0000-0000-000000000002", 0.99, 7500n * MIB],
    ]);
  });

  it("[Not Supported] and friends leave the value unset", () => {
    // A constructed row with the tokens real boards print: [Not Supported] utilization on old GeForce
    // boards (Lurkki14/tuxclocker#15, tutulino/Megaminer#235), [N/A] where a field does not apply.
    const [gpu] = parseGpuCsv(`0, ${UUID}, GeForce GTX 650, [Not Supported], [Not Supported], 350, 1023, [N/A]\n`);
    expect(gpu).toEqual({
      index: 0,
      uuid: UUID,
      name: "GeForce GTX 650",
      memoryUsedBytes: 350n * MIB,
      memoryTotalBytes: 1023n * MIB,
      migMode: "",
    });
    for (const token of [
      "[N/A]",
      "N/A",
      "[Not Supported]",
      "[Insufficient Permissions]",
      "[Unknown Error]",
      "[GPU is lost]",
      "",
    ])
      expect(isUnavailable(token)).toBe(true);
    for (const token of ["0", "12", "Disabled"]) expect(isUnavailable(token)).toBe(false);
  });

  it("keeps a name with a comma whole", () => {
    expect(parseGpuCsv(`3, ${UUID}, Weird, Name, 5, 1, 10, 20, Disabled`)[0]).toMatchObject({
      index: 3,
      name: "Weird, Name",
      utilizationRatio: 0.05,
    });
  });

  it("empty output is no GPU", () => {
    expect(parseGpuCsv("")).toEqual([]);
    expect(parseGpuCsv("\n\n")).toEqual([]);
  });

  it("rejects malformed and truncated lines with the reason", () => {
    expect(() => parseGpuCsv(fixture("h100-load.gpus.csv").slice(0, 50))).toThrow(
      /GPU line 1 has 3 fields, expected 8/,
    );
    expect(() => parseGpuCsv(`x, ${UUID}, A, 1, 1, 1, 1, Disabled`)).toThrow(/index is not a number/);
    expect(() => parseGpuCsv(`0, ${UUID}, A, 1 %, 1, 1, 1, Disabled`)).toThrow(
      /utilization.gpu is not a number: "1 %"/,
    );
    expect(() => parseGpuCsv("No devices were found")).toThrow(/expected 8/);
  });
});

describe("parseComputeAppsCsv", () => {
  it("reads processes under load, and none when idle", () => {
    expect(parseComputeAppsCsv(fixture("h100-load.apps.csv"))).toEqual([
      { pid: 11327, gpuUuid: UUID, processName: "/root/tools/memhog", usedMemoryBytes: 2566n * MIB },
      { pid: 11328, gpuUuid: UUID, processName: "/root/tools/memhog", usedMemoryBytes: 1542n * MIB },
      { pid: 11345, gpuUuid: UUID, processName: "./gpu_burn", usedMemoryBytes: 15690n * MIB },
    ]);
    expect(parseComputeAppsCsv(fixture("h100-idle.apps.csv"))).toEqual([]);
    expect(parseComputeAppsCsv(fixture("h200-mig-load.apps.csv")).map((app) => app.pid)).toEqual([12249, 12250, 12267]);
    expect(parseComputeAppsCsv(fixture("rtx2080super-load.apps.csv")).map((app) => app.processName)).toEqual([
      "ffmpeg",
      "ffmpeg",
    ]);
  });

  it("keeps names with commas, leaves [N/A] memory unset and skips unreadable rows", () => {
    // Row shapes from nvidia_gpu_exporter's captures: WDDM memory [N/A]; a MIG GPU inside a container.
    const text = [
      `42, ${UUID}, /opt/a, b, 818`,
      `2056, ${UUID}, C:\\Windows\\System32\\dwm.exe, [N/A]`,
      `[Insufficient Permissions], ${UUID}, [Insufficient Permissions], [Insufficient Permissions]`,
    ].join("\n");
    expect(parseComputeAppsCsv(text)).toEqual([
      { pid: 42, gpuUuid: UUID, processName: "/opt/a, b", usedMemoryBytes: 818n * MIB },
      { pid: 2056, gpuUuid: UUID, processName: "C:\\Windows\\System32\\dwm.exe" },
    ]);
  });

  it("rejects malformed rows", () => {
    expect(() => parseComputeAppsCsv(`42, ${UUID}`)).toThrow(/process line 1 has 2 fields/);
    expect(() => parseComputeAppsCsv(`abc, ${UUID}, x, 1`)).toThrow(/pid is not a number/);
    // Found by the fuzz (CI, wave 4): 2^64 matches \d+ but no JavaScript number holds it.
    expect(() => parseComputeAppsCsv("18446744073709551616,,,")).toThrow(/pid is not a number/);
    expect(() => parseGpuCsv(`18446744073709551616, ${UUID}, A, 1, 1, 1, 1, Disabled`)).toThrow(
      /index is not a number/,
    );
  });
});

describe("interpretRun", () => {
  const exited = (code: number, stdout: string, stderr = "") =>
    interpretRun({ kind: "exited", code, signal: null, stdout, stderr });

  it("tells no driver and no GPU apart from failures", () => {
    expect(interpretRun({ kind: "not-found", message: "spawn nvidia-smi ENOENT" }).kind).toBe("not-installed");
    expect(exited(6, "No devices were found\n")).toEqual({
      kind: "no-gpu",
      message: "nvidia-smi: No devices were found",
    });
    // anderskm/gputil#55, kubernetes-sigs/dra-driver-nvidia-gpu#1008
    expect(
      exited(255, "Failed to initialize NVML: No supported GPUs were found\nUnable to determine the number of GPUs\n")
        .kind,
    ).toBe("no-gpu");
    expect(
      exited(
        9,
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running.\n",
      ).kind,
    ).toBe("no-gpu");
    expect(
      exited(18, "", "Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 535.161\n"),
    ).toEqual({
      kind: "failed",
      message: "nvidia-smi exited with code 18: Failed to initialize NVML: Driver/library version mismatch",
    });
    expect(interpretRun({ kind: "exited", code: null, signal: "SIGSEGV", stdout: "", stderr: "" })).toEqual({
      kind: "failed",
      message: "nvidia-smi was killed by SIGSEGV",
    });
    expect(interpretRun({ kind: "timed-out", timeoutMs: 2500 })).toEqual({
      kind: "failed",
      message: "nvidia-smi did not answer within 2.5s and was killed",
    });
    expect(exited(0, "0, x, y, 1, 1, 1, 1, Disabled\n")).toEqual({
      kind: "answered",
      stdout: "0, x, y, 1, 1, 1, 1, Disabled\n",
    });
  });
});
