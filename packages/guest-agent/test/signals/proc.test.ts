import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { usersFrom } from "../../src/users.js";
import { parseDiskstats } from "../../src/signals/proc-diskstats.js";
import { parseLoadavg } from "../../src/signals/proc-loadavg.js";
import { parseMeminfo } from "../../src/signals/proc-meminfo.js";
import { mountHolding, parseMounts } from "../../src/signals/proc-mounts.js";
import { parseNetDev } from "../../src/signals/proc-netdev.js";
import { parsePidStat, parseStatusUid, type ProcessStat } from "../../src/signals/proc-pid.js";
import { cpuBusyRatio, processCpuTicks, summedRate, userProcessCpu } from "../../src/signals/proc-rates.js";
import { parseProcStat } from "../../src/signals/proc-stat.js";
import { parseUptime } from "../../src/signals/proc-uptime.js";

// Captured on a 2-CPU Debian 12 VM by test/fixtures/proc/capture.sh (see docs/signals/system.md).
const fixtures = path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "fixtures", "proc");
const read = (...segments: string[]): string => readFileSync(path.join(fixtures, ...segments), "utf8");
const snapshot1 = (...segments: string[]) => read("snapshot-1", ...segments);
const snapshot2 = (...segments: string[]) => read("snapshot-2", ...segments);
const malformed = (name: string) => read("malformed", name);

// pids.txt: busy=13405 parent=13406 child=13408 late=13473
const BUSY = 13405;
const PARENT = 13406;
const CHILD = 13408;
const LATE = 13473;

describe("parseProcStat", () => {
  it("reads the CPU count and the aggregate line, counting steal as not busy", () => {
    const stat = parseProcStat(snapshot1("stat"));
    expect(stat.cpuCount).toBe(2);
    // cpu  36731 0 4254 92220 336 0 97 35 0 0
    expect(stat.cpu).toEqual({ busyTicks: 36731 + 4254 + 97, totalTicks: 36731 + 4254 + 97 + 92220 + 336 + 35 });
  });

  it("rejects truncated and garbled files with the reason", () => {
    expect(() => parseProcStat(malformed("stat-truncated"))).toThrow(/per-CPU/);
    expect(() => parseProcStat(malformed("stat-garbage"))).toThrow(/field 4 is not a tick count/);
    expect(() => parseProcStat(malformed("binary-garbage"))).toThrow(/no aggregate "cpu" line/);
    expect(() => parseProcStat("")).toThrow(/no aggregate/);
  });
});

describe("parseLoadavg / parseUptime / parseMeminfo", () => {
  it("reads the captured files", () => {
    expect(parseLoadavg(snapshot1("loadavg"))).toEqual({ load1: 2, load5: 1.08, load15: 0.47 });
    expect(parseUptime(snapshot1("uptime"))).toBe(671.17);
    expect(parseMeminfo(snapshot1("meminfo"))).toEqual({
      totalBytes: 24683652n * 1024n,
      availableBytes: 24019448n * 1024n,
    });
  });

  it("stands free + buffers + cached in for MemAvailable on kernels without it", () => {
    const old =
      "MemTotal:        2048000 kB\nMemFree:          100000 kB\nBuffers:           20000 kB\nCached:           300000 kB\n";
    expect(parseMeminfo(old).availableBytes).toBe(420000n * 1024n);
  });

  it("rejects malformed files", () => {
    expect(() => parseLoadavg(malformed("loadavg-truncated"))).toThrow(/at least 3 fields/);
    expect(() => parseLoadavg("a b c 1/2 3")).toThrow(/not a load average/);
    expect(() => parseUptime(malformed("uptime-empty"))).toThrow(/not an uptime/);
    expect(() => parseUptime(malformed("binary-garbage"))).toThrow(/not an uptime/);
    expect(() => parseMeminfo(malformed("meminfo-no-total"))).toThrow(/no MemTotal/);
  });
});

describe("parseNetDev", () => {
  it("reads every interface's byte counters", () => {
    expect(parseNetDev(snapshot1("net", "dev"))).toEqual([
      { name: "lo", receiveBytes: 162536, transmitBytes: 162536 },
      { name: "ifb0", receiveBytes: 0, transmitBytes: 0 },
      { name: "ifb1", receiveBytes: 0, transmitBytes: 0 },
      { name: "eth0", receiveBytes: 234664167, transmitBytes: 558190 },
    ]);
  });

  it("rejects a file cut mid-line, or without its headers", () => {
    expect(() => parseNetDev(malformed("netdev-truncated"))).toThrow(/"lo"\) has 7 counters/);
    expect(() => parseNetDev(malformed("binary-garbage"))).toThrow(/header/);
  });
});

describe("parseDiskstats", () => {
  it("reads sectors as bytes (512 per sector) for every device", () => {
    const disks = parseDiskstats(snapshot1("diskstats"));
    expect(disks.map((disk) => disk.name)).toEqual([
      "loop0",
      "loop1",
      "loop2",
      "loop3",
      "loop4",
      "loop5",
      "loop6",
      "loop7",
      "vda",
      "zram0",
    ]);
    // 254 0 vda 50301 9350 2782202 22679 20481 26629 3059320 ...
    expect(disks.find((disk) => disk.name === "vda")).toEqual({
      name: "vda",
      readBytes: 2782202 * 512,
      writtenBytes: 3059320 * 512,
    });
  });

  it("accepts the 14-field format of kernels before 4.18", () => {
    expect(parseDiskstats("   8       0 sda 1 2 30 4 5 6 70 8 0 10 12\n")).toEqual([
      { name: "sda", readBytes: 30 * 512, writtenBytes: 70 * 512 },
    ]);
  });

  it("rejects a truncated line", () => {
    expect(() => parseDiskstats(malformed("diskstats-truncated"))).toThrow(/"loop1"\) has 3 fields/);
  });
});

describe("parsePidStat / parseStatusUid", () => {
  it("reads CPU ticks, parent and start of a process", () => {
    expect(parsePidStat(snapshot2(String(PARENT), "stat"))).toEqual({
      pid: PARENT,
      comm: "sleep",
      ppid: 13401,
      ownTicks: 0,
      reapedChildTicks: 145,
      startTicks: 67010,
    });
    expect(parseStatusUid(snapshot1(String(BUSY), "status"))).toBe(1003);
    expect(parseStatusUid(snapshot1("1", "status"))).toBe(0);
  });

  it("keeps a command name with spaces and parentheses whole", () => {
    const stat = snapshot1(String(BUSY), "stat").replace("(sh)", "(a (b) c)");
    expect(parsePidStat(stat).comm).toBe("a (b) c");
  });

  it("takes the effective uid, as ps does", () => {
    expect(parseStatusUid("Name:\tpasswd\nUid:\t1000\t0\t0\t0\n")).toBe(0);
  });

  it("rejects truncated and garbled entries", () => {
    expect(() => parsePidStat(malformed("pid-stat-truncated"))).toThrow(/expected at least 22/);
    expect(() => parsePidStat(malformed("binary-garbage"))).toThrow(/no \(comm\)/);
    expect(() => parseStatusUid(malformed("status-no-uid"))).toThrow(/no Uid/);
  });
});

describe("parseMounts / mountHolding", () => {
  it("finds the filesystem holding a path", () => {
    const mounts = parseMounts(snapshot1("self", "mounts"));
    expect(mountHolding(mounts, "/")).toMatchObject({ device: "/dev/vda", fsType: "ext4" });
    expect(mountHolding(mounts, "/home/someone")).toMatchObject({ mountPoint: "/" });
    expect(mountHolding(mounts, "/dev/shm/x")).toMatchObject({ mountPoint: "/dev/shm", fsType: "tmpfs" });
    expect(mountHolding(mounts, "/sys/fs/cgroup/cpu")).toMatchObject({ fsType: "cgroup" });
    expect(mountHolding(mounts, "/devices")).toMatchObject({ mountPoint: "/" });
  });

  it("unescapes octal names and lets a later mount hide an earlier one", () => {
    const mounts = parseMounts("/dev/sdb1 /mnt/my\\040disk ext4 rw 0 0\n/dev/sdc1 /mnt/my\\040disk xfs rw 0 0\n");
    expect(mountHolding(mounts, "/mnt/my disk/data")).toEqual({
      device: "/dev/sdc1",
      mountPoint: "/mnt/my disk",
      fsType: "xfs",
      options: "rw",
    });
  });

  it("rejects malformed lines", () => {
    expect(() => parseMounts("/dev/vda /\n")).toThrow(/line 1 has 2 fields/);
    expect(() => parseMounts("/dev/vda relative ext4 rw 0 0\n")).toThrow(/not absolute/);
  });
});

describe("rates between the two captured snapshots", () => {
  const seconds = 676.03 - 671.17;

  it("CPU busy ratio", () => {
    const ratio = cpuBusyRatio(parseProcStat(snapshot1("stat")).cpu, parseProcStat(snapshot2("stat")).cpu);
    expect(ratio).toBeCloseTo((42047 - 41082) / (134641 - 133673), 10);
    expect(cpuBusyRatio(parseProcStat(snapshot2("stat")).cpu, parseProcStat(snapshot1("stat")).cpu)).toBeUndefined();
  });

  it("summed counter growth per second ignores counters that appeared or went backwards", () => {
    const before = new Map([
      ["eth0", 100],
      ["eth1", 500],
    ]);
    const after = new Map([
      ["eth0", 400],
      ["eth1", 20],
      ["eth2", 999],
    ]);
    expect(summedRate(before, after, 3)).toBe(100);
    expect(summedRate(before, after, 0)).toBeUndefined();
  });

  it("per-process CPU: seen twice, born in between, and children reaped in between", () => {
    const table = (read: (...segments: string[]) => string, pids: number[]): ProcessStat[] =>
      pids.map((pid) => parsePidStat(read(String(pid), "stat")));
    const previous = { uptimeSeconds: 671.17, processes: table(snapshot1, [1, 2, BUSY, PARENT, CHILD]) };
    const current = { uptimeSeconds: 676.03, processes: table(snapshot2, [1, 2, BUSY, PARENT, LATE]) };
    const ticks = new Map(processCpuTicks(previous, current).map((entry) => [entry.process.pid, entry.ticks]));
    expect(Object.fromEntries(ticks)).toEqual({
      1: 3, // root: counted here, dropped later as not a person
      2: 0,
      [BUSY]: 282 - 50,
      // cutime+cstime grew by 145 when it reaped CHILD, whose last reading (68 ticks) was already counted
      [PARENT]: 145 - 68,
      // started at 671.38 s, after the first snapshot: all of its CPU is in the interval
      [LATE]: 217,
    });

    const wsbusy = usersFrom([
      { name: "wsbusy", uid: 1003, gid: 1003, home: "/home/wsbusy", shell: "/usr/sbin/nologin" },
    ]);
    const owned = processCpuTicks(previous, current).map((entry) => ({
      ...entry,
      uid: entry.process.pid <= 2 ? 0 : 1003,
    }));
    const usage = userProcessCpu(owned, wsbusy, seconds, 676.03);
    expect(usage.userProcessCpuCores).toBeCloseTo((232 + 77 + 217) / 100 / seconds, 10);
    expect(usage.topProcesses.map((process) => [process.pid, process.user, process.command])).toEqual([
      [BUSY, "wsbusy", "sh"],
      [LATE, "wsbusy", "sh"],
      [PARENT, "wsbusy", "sleep"],
    ]);
    expect(usage.topProcesses[0]?.cpuCores).toBeCloseTo(232 / 100 / seconds, 10);
    expect(usage.topProcesses[0]?.ageSeconds).toBeCloseTo(676.03 - 670.1, 6);
  });

  it("a reused pid is a new process, and an unseen old one is left out", () => {
    const process = (pid: number, startTicks: number, ownTicks: number): ProcessStat => ({
      pid,
      comm: "x",
      ppid: 1,
      ownTicks,
      reapedChildTicks: 0,
      startTicks,
    });
    const previous = { uptimeSeconds: 100, processes: [process(10, 5000, 900)] };
    const current = { uptimeSeconds: 110, processes: [process(10, 10_500, 40), process(11, 2000, 7000)] };
    expect(processCpuTicks(previous, current).map((entry) => [entry.process.pid, entry.ticks])).toEqual([[10, 40]]);
  });

  it("names at most ten processes, busiest first, and no idle ones", () => {
    const users = usersFrom([{ name: "ana", uid: 1000, gid: 1000, home: "/home/ana", shell: "/bin/bash" }]);
    const usage = Array.from({ length: 14 }, (_, index) => ({
      process: { pid: 100 + index, comm: `p${index}`, ppid: 1, ownTicks: 0, reapedChildTicks: 0, startTicks: 0 },
      ticks: index,
      uid: index === 13 ? 1001 : 1000,
    }));
    const result = userProcessCpu(usage, users, 1, 10);
    expect(result.topProcesses).toHaveLength(10);
    expect(result.topProcesses[0]).toMatchObject({ pid: 113, user: "1001", cpuCores: 0.13 });
    expect(result.topProcesses.map((entry) => entry.pid)).not.toContain(100);
  });
});
