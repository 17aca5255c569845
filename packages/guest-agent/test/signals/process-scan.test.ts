import { spawn } from "node:child_process";
import { once } from "node:events";
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { manualClock, systemClock } from "../../src/clock.js";
import { defaultRoots } from "../../src/roots.js";
import { createProcessScan, isPidName, ownProcessScan } from "../../src/signals/process-scan.js";
import type { ProcessStat } from "../../src/signals/proc-pid.js";
import { CodeServerMemo, listeningPortsHold, socketSetKey } from "../../src/signals/remote-sessions-track.js";

describe("the process table on the real /proc", () => {
  it("lists this process with the comm /proc/PID/comm has, and the uptime", () => {
    const table = ownProcessScan().table({ roots: defaultRoots, clock: systemClock });
    const self = table.processes?.find((entry) => entry.pid === process.pid);
    expect(self?.comm).toBe(readFileSync(`/proc/${process.pid}/comm`, "utf8").replace(/\n$/, ""));
    expect(table.uptimeSeconds).toBeGreaterThan(0);
  });

  it("is read once per sample when shared: the same clock at the same instant gets the same table", async () => {
    const scan = createProcessScan();
    const clock = manualClock();
    const ctx = { roots: defaultRoots, clock };
    const first = scan.table(ctx);
    const child = spawn("sleep", ["30"], { stdio: "ignore" });
    await once(child, "spawn");
    try {
      // The same sample: the table read before the child started, not a second pass over /proc.
      expect(scan.table(ctx)).toBe(first);
      expect(first.processes?.some((entry) => entry.pid === child.pid)).toBe(false);
      // The next sample (the clock moved) reads /proc again and finds the child.
      clock.advance(1000);
      const next = scan.table(ctx);
      expect(next).not.toBe(first);
      expect(next.processes?.find((entry) => entry.pid === child.pid)?.comm).toBe("sleep");
      // Another sample's clock object at the same time is another sample.
      expect(scan.table({ roots: defaultRoots, clock: { ...clock } })).not.toBe(next);
    } finally {
      child.kill("SIGKILL");
    }
  });

  it("a signal's own scan reads afresh every time", () => {
    const scan = ownProcessScan();
    const clock = manualClock();
    expect(scan.table({ roots: defaultRoots, clock })).not.toBe(scan.table({ roots: defaultRoots, clock }));
  });

  it("fails to list a /proc that is not there, with the reason", () => {
    const table = ownProcessScan().table({
      roots: { ...defaultRoots, proc: "/nonexistent-ws-proc", sys: "/nonexistent-ws-sys" },
      clock: systemClock,
    });
    expect(table.processes).toBeUndefined();
    expect(table.problems.join("\n")).toContain("/nonexistent-ws-proc");
  });
});

describe("isPidName", () => {
  it("takes decimal pids and nothing else", () => {
    for (const name of ["1", "42", "4194304"]) expect(isPidName(name)).toBe(true);
    for (const name of ["", "self", "thread-self", "1a", "-1", " 1", "１", "12345678901"])
      expect(isPidName(name)).toBe(false);
  });
});

describe("sshd's listening ports, remembered", () => {
  it("hold while root's sshd holds the same sockets, for a bounded time", () => {
    const key = socketSetKey(new Set([30, 4, 200]));
    expect(key).toBe("4,30,200");
    const previous = { key, ports: [22], readAtMonoMs: 1_000 };
    expect(listeningPortsHold(previous, key, 61_000)).toBe(true);
    // A new socket (a login's connection, a restarted listener): read again.
    expect(listeningPortsHold(previous, socketSetKey(new Set([4, 30, 200, 201])), 61_000)).toBe(false);
    // Old enough, or a clock that went backwards: read again.
    expect(listeningPortsHold(previous, key, 1_000 + 5 * 60_000)).toBe(false);
    expect(listeningPortsHold(previous, key, 500)).toBe(false);
    expect(listeningPortsHold(undefined, key, 61_000)).toBe(false);
  });

  it("an answer of no ports is read again at the next sample: sshd runs a moment before it listens", () => {
    // Under the packaged unit the key is sshd's configured ports, the same before and after it binds.
    const key = "configured:22";
    expect(listeningPortsHold({ key, ports: [], readAtMonoMs: 1_000 }, key, 4_000)).toBe(false);
    expect(listeningPortsHold({ key, ports: [22], readAtMonoMs: 1_000 }, key, 4_000)).toBe(true);
  });
});

describe("CodeServerMemo", () => {
  const node = (pid: number, startTicks: number, comm = "node"): ProcessStat => ({
    pid,
    comm,
    ppid: 1,
    ownTicks: 0,
    reapedChildTicks: 0,
    startTicks,
  });

  it("asks about a process once while it lives, again after an exec or a reused pid, and forgets the gone", () => {
    const memo = new CodeServerMemo();
    const asked: number[] = [];
    const isCodeServer = (pid: number) => {
      asked.push(pid);
      return pid === 10;
    };
    expect(memo.pick([node(10, 5), node(11, 5)], isCodeServer)).toEqual([10]);
    expect(memo.pick([node(10, 5), node(11, 5)], isCodeServer)).toEqual([10]);
    expect(asked).toEqual([10, 11]);
    // pid 10 reused by another process (another start time); 11 exec'd code-server under a new comm.
    expect(memo.pick([node(10, 9), node(11, 5, "code-server")], () => true)).toEqual([10, 11]);
    // 11 is gone: asked again should it come back with the old identity.
    memo.pick([node(10, 9)], () => true);
    expect(memo.pick([node(11, 5)], () => false)).toEqual([]);
  });
});
