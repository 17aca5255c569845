import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { parseCgroupCpuStat, parseCgroupProcs, userSliceCores, userSliceUid } from "../../src/signals/cgroup-cpu.js";

const fixtures = path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "fixtures", "cgroup");
const fixture = (name: string) => readFileSync(path.join(fixtures, name), "utf8");
const human = (uid: number) => uid >= 1000 && uid !== 65534;

describe("parseCgroupCpuStat", () => {
  it("reads the usage lines of a hybrid host's v2 root (captured)", () => {
    expect(parseCgroupCpuStat(fixture("hybrid-unified-root.cpu.stat"))).toEqual({
      usageUsec: 2382031944,
      userUsec: 2045759524,
      systemUsec: 336272420,
    });
  });

  it("reads a systemd user slice with the cpu controller's extra lines", () => {
    expect(parseCgroupCpuStat(fixture("systemd-user-slice.cpu.stat"))).toEqual({
      usageUsec: 84123456,
      userUsec: 60123456,
      systemUsec: 24000000,
    });
  });

  it("names the missing line of a truncated or foreign file", () => {
    expect(() => parseCgroupCpuStat("usage_usec 5\nuser_usec 3\n")).toThrow("no system_usec line");
    expect(() => parseCgroupCpuStat("usage_usec -5\nuser_usec 3\nsystem_usec 2\n")).toThrow("no usage_usec line");
    expect(() => parseCgroupCpuStat("\u0000\u0001garbage")).toThrow("no usage_usec line");
  });
});

describe("userSliceUid", () => {
  it("takes the uid from systemd's user slice names only", () => {
    expect(userSliceUid("user-1000.slice")).toBe(1000);
    expect(userSliceUid("user-0.slice")).toBe(0);
    expect(userSliceUid("user@1000.service")).toBeUndefined();
    expect(userSliceUid("user-1000.slice.bak")).toBeUndefined();
    expect(userSliceUid("cpu.stat")).toBeUndefined();
  });
});

describe("parseCgroupProcs", () => {
  it("reads the kernel threads a systemd host leaves in the root cgroup", () => {
    const pids = parseCgroupProcs(fixture("systemd-root.cgroup.procs"));
    expect(pids.size).toBe(20);
    expect(pids.has(2)).toBe(true);
    expect(pids.has(1)).toBe(false);
  });

  it("rejects a line that is not a pid", () => {
    expect(parseCgroupProcs("")).toEqual(new Set());
    expect(() => parseCgroupProcs("2\nx3\n")).toThrow('not a pid: "x3"');
  });
});

describe("userSliceCores", () => {
  it("sums the growth of people's slices only, per second", () => {
    const before = new Map([
      [0, 5_000_000],
      [1000, 1_000_000],
      [1001, 2_000_000],
    ]);
    const after = new Map([
      [0, 9_000_000],
      [1000, 1_500_000],
      [1001, 3_000_000],
    ]);
    expect(userSliceCores(before, after, 2, human)).toBeCloseTo((0.5 + 1.0) / 2, 10);
  });

  it("counts a slice created since the last reading whole, a removed or restarted one not at all", () => {
    const before = new Map([
      [1000, 1_000_000],
      [1001, 9_000_000],
    ]);
    const after = new Map([
      [1001, 100_000],
      [1002, 300_000],
    ]);
    expect(userSliceCores(before, after, 1, human)).toBeCloseTo(0.3, 10);
  });

  it("has no rate without time between the readings", () => {
    expect(userSliceCores(new Map(), new Map([[1000, 1]]), 0, human)).toBeUndefined();
  });
});
