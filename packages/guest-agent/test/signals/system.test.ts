import { execFile, spawn, type ChildProcess } from "node:child_process";
import { cp, mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { manualClock, systemClock } from "../../src/clock.js";
import { defaultRoots, type Roots } from "../../src/roots.js";
import { createSystemSignal } from "../../src/signals/system.js";
import type { SystemSignalValue } from "../../src/signals/system-parse.js";
import type { SignalContext, SignalOutcome } from "../../src/signals/types.js";
import { loadUsers, parsePasswd, usersFrom } from "../../src/users.js";

const run = promisify(execFile);
const fixtures = path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "fixtures", "proc");
const lines = async (name: string) =>
  (await readFile(path.join(fixtures, name), "utf8")).split("\n").filter((line) => line !== "");

const BUSY = 13405;
const PARENT = 13406;
const LATE = 13473;
const INTERVAL_SECONDS = 676.03 - 671.17;

function valueOfOutcome(outcome: SignalOutcome<SystemSignalValue>): SystemSignalValue {
  if (outcome.state === "absent" || outcome.value === undefined)
    throw new Error(`no value: ${JSON.stringify(outcome)}`);
  return outcome.value;
}

describe("system signal over a captured /proc and /sys", () => {
  let root: string;
  let roots: Roots;

  /** Puts a captured snapshot in place as <root>/proc. */
  const useSnapshot = async (name: string) => {
    await rm(roots.proc, { recursive: true, force: true });
    await cp(path.join(fixtures, name), roots.proc, { recursive: true });
  };

  beforeAll(async () => {
    root = await mkdtemp(path.join(tmpdir(), "ws-system-"));
    roots = { ...defaultRoots, proc: path.join(root, "proc"), sys: path.join(root, "sys") };
    // The /sys listings that say which disks and interfaces are real, as captured beside the snapshots.
    const dirs = [
      ...(await lines("sys-block.txt")).map((name) => path.join("block", name)),
      ...(await lines("sys-virtual-block.txt")).map((name) => path.join("devices", "virtual", "block", name)),
      ...(await lines("sys-virtual-net.txt")).map((name) => path.join("devices", "virtual", "net", name)),
    ];
    for (const dir of dirs) await mkdir(path.join(roots.sys, dir), { recursive: true });
  });

  afterAll(async () => {
    await rm(root, { recursive: true, force: true });
  });

  const context = async (clock = manualClock()): Promise<SignalContext> => ({
    roots,
    clock,
    users: usersFrom(parsePasswd(await readFile(path.join(fixtures, "passwd"), "utf8"))),
    signal: new AbortController().signal,
  });

  it("gives absolute values on the first sample and every rate on the second", async () => {
    const clock = manualClock();
    const ctx = await context(clock);
    const signal = createSystemSignal();

    await useSnapshot("snapshot-1");
    const first = await signal.collect(ctx);
    expect(first.state).toBe("ok");
    expect(valueOfOutcome(first)).toEqual({
      cpuCount: 2,
      load1: 2,
      load5: 1.08,
      load15: 0.47,
      memoryTotalBytes: 24683652n * 1024n,
      memoryAvailableBytes: 24019448n * 1024n,
      uptimeSeconds: 671.17,
      topProcesses: [],
    });

    await useSnapshot("snapshot-2");
    clock.advance(INTERVAL_SECONDS * 1000);
    const second = await signal.collect(ctx);
    expect(second.state).toBe("ok");
    const value = valueOfOutcome(second);
    expect(value.cpuBusyRatio).toBeCloseTo(965 / 968, 10);
    // eth0 only: lo and the ifb devices are under /sys/devices/virtual/net
    expect(value.networkReceiveBytesPerSecond).toBeCloseTo((234667707 - 234664167) / INTERVAL_SECONDS, 6);
    expect(value.networkTransmitBytesPerSecond).toBeCloseTo((662390 - 558190) / INTERVAL_SECONDS, 6);
    // vda only: loop and zram devices are virtual
    expect(value.diskReadBytesPerSecond).toBeCloseTo(((2933290 - 2782202) * 512) / INTERVAL_SECONDS, 6);
    expect(value.diskWriteBytesPerSecond).toBeCloseTo(((3060304 - 3059320) * 512) / INTERVAL_SECONDS, 6);
    expect(value.uptimeSeconds).toBe(676.03);
    expect(value.userProcessCpuCores).toBeCloseTo((232 + 217 + 77) / 100 / INTERVAL_SECONDS, 10);
    expect(
      value.topProcesses?.map((process) => ({
        ...process,
        cpuCores: Number(process.cpuCores?.toFixed(4)),
        ageSeconds: Number(process.ageSeconds?.toFixed(2)),
      })),
    ).toEqual([
      {
        pid: BUSY,
        uid: 1003,
        user: "wsbusy",
        command: "sh",
        cpuCores: Number((2.32 / INTERVAL_SECONDS).toFixed(4)),
        ageSeconds: 5.93,
      },
      {
        pid: LATE,
        uid: 1003,
        user: "wsbusy",
        command: "sh",
        cpuCores: Number((2.17 / INTERVAL_SECONDS).toFixed(4)),
        ageSeconds: 4.65,
      },
      {
        pid: PARENT,
        uid: 1003,
        user: "wsbusy",
        command: "sleep",
        cpuCores: Number((0.77 / INTERVAL_SECONDS).toFixed(4)),
        ageSeconds: 5.93,
      },
    ]);
  });

  it("where systemd keeps the cgroup tree, skips the root cgroup's kernel threads and counts people's user slices", async () => {
    const cgroup = path.join(roots.sys, "fs", "cgroup");
    const slice = (uid: number) => path.join(cgroup, "user.slice", `user-${uid}.slice`);
    const usage = async (uid: number, usec: number) => {
      await mkdir(slice(uid), { recursive: true });
      const text = (await readFile(path.join(fixtures, "..", "cgroup", "systemd-user-slice.cpu.stat"), "utf8")).replace(
        /^usage_usec \d+$/m,
        `usage_usec ${Math.round(usec)}`,
      );
      await writeFile(path.join(slice(uid), "cpu.stat"), text);
    };
    try {
      await mkdir(path.join(cgroup, "init.scope"), { recursive: true });
      await writeFile(path.join(cgroup, "cgroup.procs"), "2\n");
      const clock = manualClock();
      const ctx = await context(clock);
      const signal = createSystemSignal();
      await useSnapshot("snapshot-1");
      await usage(0, 1_000_000);
      await usage(1003, 1_000_000);
      const first = await signal.collect(ctx);
      expect(first.state, first.message).toBe("ok");

      await useSnapshot("snapshot-2");
      // pid 2 sits in the root cgroup: a kernel thread, never read (a garbled stat would fail the signal).
      await cp(path.join(fixtures, "malformed", "pid-stat-truncated"), path.join(roots.proc, "2", "stat"));
      // The login of uid 1003 used 2 cores over the interval, more than its processes still alive show; root's slice does not count.
      await usage(0, 1_000_000 + 50 * INTERVAL_SECONDS * 1e6);
      await usage(1003, 1_000_000 + 2 * INTERVAL_SECONDS * 1e6);
      clock.advance(INTERVAL_SECONDS * 1000);
      const outcome = await signal.collect(ctx);
      expect(outcome.state, outcome.message).toBe("ok");
      const value = valueOfOutcome(outcome);
      expect(value.userProcessCpuCores).toBeCloseTo(2, 6);
      // The busiest processes still come from /proc.
      expect(value.topProcesses?.map((process) => process.pid)).toEqual([BUSY, LATE, PARENT]);

      // A slice that used less than its processes show leaves the per-process figure.
      await useSnapshot("snapshot-1");
      const again = createSystemSignal();
      await again.collect(ctx);
      await useSnapshot("snapshot-2");
      clock.advance(INTERVAL_SECONDS * 1000);
      const lower = valueOfOutcome(await again.collect(ctx));
      expect(lower.userProcessCpuCores).toBeCloseTo((232 + 217 + 77) / 100 / INTERVAL_SECONDS, 10);
    } finally {
      await rm(path.join(roots.sys, "fs"), { recursive: true, force: true });
    }
  });

  it("skips a process that vanished between listing and reading", async () => {
    const clock = manualClock();
    const ctx = await context(clock);
    const signal = createSystemSignal();
    await useSnapshot("snapshot-1");
    await signal.collect(ctx);
    await useSnapshot("snapshot-2");
    await mkdir(path.join(roots.proc, "99999")); // listed, but its stat is gone
    await rm(path.join(roots.proc, String(LATE), "status")); // exits after its stat was read
    clock.advance(INTERVAL_SECONDS * 1000);
    const outcome = await signal.collect(ctx);
    expect(outcome.state).toBe("ok");
    expect(valueOfOutcome(outcome).topProcesses?.map((process) => process.pid)).toEqual([BUSY, PARENT]);
  });

  it("reports a truncated or garbage /proc file as failed with the reason, keeping the rest", async () => {
    const ctx = await context();
    const signal = createSystemSignal();
    await useSnapshot("snapshot-1");
    await cp(path.join(fixtures, "malformed", "stat-truncated"), path.join(roots.proc, "stat"));
    await cp(path.join(fixtures, "malformed", "binary-garbage"), path.join(roots.proc, "net", "dev"));
    const outcome = await signal.collect(ctx);
    expect(outcome.state).toBe("failed");
    expect(outcome.message).toContain(`${path.join(roots.proc, "stat")}: no per-CPU "cpuN" line`);
    expect(outcome.message).toContain(`${path.join(roots.proc, "net", "dev")}: missing the two header lines`);
    expect(valueOfOutcome(outcome)).toMatchObject({ cpuCount: 0, load1: 2, uptimeSeconds: 671.17 });
  });

  it("reports a garbled process entry and a missing /proc as failed, never throwing", async () => {
    const ctx = await context();
    await useSnapshot("snapshot-1");
    await cp(path.join(fixtures, "malformed", "pid-stat-truncated"), path.join(roots.proc, String(BUSY), "stat"));
    const garbled = await createSystemSignal().collect(ctx);
    expect(garbled.state).toBe("failed");
    expect(garbled.message).toContain(
      `unparsable stat of process ${BUSY}: pid ${BUSY}: 16 fields, expected at least 22`,
    );

    await rm(roots.proc, { recursive: true, force: true });
    const missing = await createSystemSignal().collect(ctx);
    expect(missing.state).toBe("failed");
    expect(missing.message).toContain("ENOENT");
  });
});

describe("system signal over the real /proc", () => {
  const USER = "wsbusy";
  let busy: ChildProcess | undefined;

  beforeAll(async () => {
    const exists = await run("id", ["-u", USER]).then(
      () => true,
      () => false,
    );
    if (!exists) {
      await run("useradd", ["--no-create-home", "--shell", "/usr/sbin/nologin", USER]).catch((error: unknown) => {
        throw new Error(
          `cannot create the test user ${USER} with useradd (Debian package passwd; run as root): ${String(error)}`,
        );
      });
    }
    await run("setpriv", ["--version"]).catch(() => {
      throw new Error("setpriv is missing: install the Debian package util-linux");
    });
    busy = spawn(
      "setpriv",
      [`--reuid=${USER}`, `--regid=${USER}`, "--clear-groups", process.execPath, "-e", "for(;;){}"],
      { stdio: "ignore" },
    );
  });

  afterAll(() => {
    busy?.kill("SIGKILL");
  });

  it("shows a busy process of a non-system user with its user, command and CPU", async () => {
    const users = await loadUsers(defaultRoots);
    const uid = users.byName(USER)?.uid;
    expect(uid).toBeGreaterThanOrEqual(1000);
    const ctx: SignalContext = { roots: defaultRoots, clock: systemClock, users, signal: new AbortController().signal };
    const signal = createSystemSignal();
    const first = await signal.collect(ctx);
    expect(first.state).toBe("ok");

    let seen: NonNullable<SystemSignalValue["topProcesses"]>[number] | undefined;
    let value: SystemSignalValue | undefined;
    const deadline = Date.now() + 30_000;
    while (seen === undefined && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 250));
      const outcome = await signal.collect(ctx);
      expect(outcome.state).toBe("ok");
      value = valueOfOutcome(outcome);
      seen = value.topProcesses?.find((process) => process.pid === busy?.pid && (process.cpuCores ?? 0) > 0);
    }
    expect(seen).toMatchObject({ uid, user: USER, command: "node" });
    expect(seen?.cpuCores).toBeGreaterThan(0);
    expect(seen?.ageSeconds).toBeGreaterThanOrEqual(0);
    expect(value?.userProcessCpuCores).toBeGreaterThanOrEqual(seen?.cpuCores ?? Infinity);
    expect(value?.cpuBusyRatio).toBeGreaterThan(0);
    expect(value?.cpuCount).toBeGreaterThan(0);
    expect(value?.memoryTotalBytes).toBeGreaterThan(0n);
  });
});
