// CPU cost of one collect() of the people's signals on this machine's real /proc and /dev:
// remote_sessions (its own pass over every process's stat, shared with system in the agent, plus the sshd sessions found) and desktop
// (the /dev/input listing and drains), beside sessions and system for scale. CPU time
// (user + system of this process) per collect, not wall time: the machine is shared.
import { readdirSync, readFileSync } from "node:fs";
import { systemClock } from "../packages/guest-agent/src/clock.js";
import { defaultRoots } from "../packages/guest-agent/src/roots.js";
import { createDesktopSignal } from "../packages/guest-agent/src/signals/desktop.js";
import { createRemoteSessionsSignal, readSessionTick } from "../packages/guest-agent/src/signals/remote-sessions.js";
import type { Tracked } from "../packages/guest-agent/src/signals/remote-sessions-track.js";
import { createSessionsSignal } from "../packages/guest-agent/src/signals/sessions.js";
import { binsFromReadings, classifyTraffic } from "../packages/guest-agent/src/signals/traffic-cadence.js";
import { createSystemSignal } from "../packages/guest-agent/src/signals/system.js";
import type { Signal, SignalContext } from "../packages/guest-agent/src/signals/types.js";
import { loadUsers } from "../packages/guest-agent/src/users.js";

const ROUNDS = Number(process.argv[2] ?? 50);
const context: SignalContext = {
  roots: defaultRoots,
  clock: systemClock,
  users: await loadUsers(defaultRoots),
  signal: new AbortController().signal,
};
const processes = readdirSync("/proc").filter((name) => /^\d+$/.test(name)).length;

async function cost(signal: Signal<unknown>): Promise<{ cpuMs: number; state: string; detail: string }> {
  const first = await signal.collect(context); // warm-up (and the baseline for rates)
  const before = process.cpuUsage();
  let last = first;
  for (let round = 0; round < ROUNDS; round++) last = await signal.collect(context);
  const used = process.cpuUsage(before);
  const value = "value" in last ? (last.value as Record<string, unknown[] | undefined>) : {};
  const entries = (value.sessions ?? value.devices ?? []).length;
  return {
    cpuMs: (used.user + used.system) / 1000 / ROUNDS,
    state: last.state,
    detail: last.state === "ok" ? `${entries} entries` : (last.message ?? ""),
  };
}

console.log(`### People's signals: CPU per collect (${processes} processes on the machine, ${ROUNDS} rounds)\n`);
console.log("| signal | CPU ms per collect | outcome |\n|---|---|---|");
for (const signal of [
  createRemoteSessionsSignal(),
  createDesktopSignal(),
  createSessionsSignal(),
  createSystemSignal(),
] as Array<Signal<unknown>>) {
  const { cpuMs, state, detail } = await cost(signal);
  console.log(`| ${signal.name} | ${cpuMs.toFixed(2)} | ${state}${detail ? `: ${detail.slice(0, 60)}` : ""} |`);
}

// The remote-sessions ticker: once a second per open session, its /proc/PID/io (and, while it
// has traffic, its fd links). Measured on this process, whose counters move at every tick (the
// worst case: the fd scan runs each time). Then the classifier over a full ten-minute window,
// once per Report per session.
const TICKS = 2_000;
const self: Tracked = {
  pid: process.pid,
  lastInteractionMonoMs: 0,
  readings: [],
  forwards: new Map(),
  knownInodes: new Set(),
};
const tickBefore = process.cpuUsage();
for (let tick = 0; tick < TICKS; tick++) readSessionTick(defaultRoots, self, tick * 1000);
const tickUsed = process.cpuUsage(tickBefore);
const window = JSON.parse(
  readFileSync(
    `${process.env.WS_REPO_ROOT ?? "."}/packages/guest-agent/test/fixtures/remote-sessions/traffic/typing-irregular.json`,
    "utf8",
  ),
) as { samples: number[][] };
const bins = binsFromReadings(
  window.samples.map(([atMs, rchar, wchar, syscr, syscw]) => ({
    atMs: atMs!,
    bytes: rchar! + wchar!,
    calls: syscr! + syscw!,
  })),
);
const CLASSIFY = 500;
const classifyBefore = process.cpuUsage();
for (let round = 0; round < CLASSIFY; round++) classifyTraffic(bins, 1000, bins.at(-1)!.atMs);
const classifyUsed = process.cpuUsage(classifyBefore);
console.log(`\n### remote_sessions ticker and classifier (CPU)\n`);
console.log("| what | CPU µs | per |\n|---|---|---|");
console.log(
  `| tick: /proc/PID/io and the fd links | ${((tickUsed.user + tickUsed.system) / TICKS).toFixed(1)} | session, second |`,
);
console.log(
  `| classifyTraffic over ${bins.length} one-second bins (typing-irregular) | ${((classifyUsed.user + classifyUsed.system) / CLASSIFY).toFixed(1)} | session, Report |`,
);
