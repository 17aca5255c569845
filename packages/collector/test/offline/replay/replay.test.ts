import { readFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { BUILTIN_DEFAULT_POLICY } from "../../../src/engine/policy.js";
import { replayTrace, type TimelineEntry } from "../../../src/offline/replay/replay.js";

const EXAMPLE = fileURLToPath(new URL("../../../../../docs/examples/idle-then-stop.trace.jsonl", import.meta.url));

function transitions(timeline: TimelineEntry[]): string[] {
  return timeline.flatMap((entry) =>
    entry.kind === "decision" && entry.from !== entry.to ? [`${entry.t}s ${entry.from}→${entry.to}`] : [],
  );
}

const report = (t: number, vm: string, inputAgeSeconds: number, extra: Record<string, unknown> = {}) =>
  JSON.stringify({
    t,
    vm,
    report: {
      intervalSeconds: 60,
      sessions: { sessions: [{ tty: "pts/0", user: "alice", inputAgeSeconds }] },
      system: { uptimeSeconds: 99_999 },
      ...extra,
    },
  });

describe("replayTrace", () => {
  it("replays the example: active, idle, notice, cancelled by input, idle again, stopped", async () => {
    const timeline = replayTrace(await readFile(EXAMPLE, "utf8"));
    expect(transitions(timeline)).toEqual([
      "0s Unknown→Active",
      "460s Active→StoppingPending", // last input at 160 s + idle-timeout 5m
      "540s StoppingPending→Active", // input at 528 s, reported at 540 s
      "828s Active→StoppingPending", // 528 s + 5m
      "948s StoppingPending→Stopping", // + grace-period 2m
      "948s Stopping→Stopped", // the replay accepts every stop
    ]);
  });

  it("fires timers at the times decisions name even without ticks", async () => {
    const text = await readFile(EXAMPLE, "utf8");
    expect(transitions(replayTrace(text, { tickSeconds: 0 }))).toEqual(transitions(replayTrace(text)));
  });

  it("uses the config's defaults and profiles", () => {
    const trace = [
      JSON.stringify({ t: 0, vm: "lab/a", policy: { autostop: "enabled", profile: "short" } }),
      report(0, "lab/a", 0),
      report(600, "lab/a", 600),
    ];
    const timeline = replayTrace(trace, {
      defaults: BUILTIN_DEFAULT_POLICY,
      profiles: { short: { idleTimeoutSeconds: 120, gracePeriodSeconds: 60, agentLostAfterSeconds: 3600 } },
    });
    expect(transitions(timeline)).toEqual([
      "0s Unknown→Active",
      "120s Active→StoppingPending",
      "180s StoppingPending→Stopping",
      "180s Stopping→Stopped",
    ]);
  });

  it("ignores reports of a VM the replay stopped, until one shows the user came back", () => {
    const vm = "lab/b";
    const trace = [
      JSON.stringify({
        t: 0,
        vm,
        policy: { autostop: "enabled", "idle-timeout": "2m", "grace-period": "1m", "agent-lost-after": "1h" },
      }),
      report(0, vm, 0),
      report(300, vm, 300), // the real VM kept running, still idle
      report(600, vm, 5), // someone typed at 595 s
      report(660, vm, 65),
    ];
    const timeline = replayTrace(trace);
    expect(transitions(timeline)).toEqual([
      "0s Unknown→Active",
      "120s Active→StoppingPending",
      "180s StoppingPending→Stopping",
      "180s Stopping→Stopped",
      "600s Stopped→Active",
    ]);
    expect(timeline.find((entry) => entry.kind === "input" && entry.t === 600)).toMatchObject({
      input: expect.stringMatching(/user would have started the VM again/),
    });
  });

  it("a policy line with a typo keeps the previous policy and shows the error", () => {
    const vm = "lab/c";
    const trace = [
      JSON.stringify({ t: 0, vm, policy: { autostop: "enabled", "idle-timeout": "10m", "agent-lost-after": "1h" } }),
      report(0, vm, 0),
      JSON.stringify({ t: 60, vm, policy: { autostop: "enabled", "idle-timeout": "1mm" } }),
      report(120, vm, 120),
      report(660, vm, 660),
    ];
    const timeline = replayTrace(trace);
    const error = timeline.find(
      (entry) => entry.kind === "decision" && entry.actions.some((action) => action.kind === "policy-error"),
    );
    expect(error).toMatchObject({ t: 60 });
    expect(transitions(timeline)).toEqual(["0s Unknown→Active", "600s Active→StoppingPending"]);
  });

  it("keeps VMs apart, and ends at the last event of the trace", () => {
    const trace = [
      JSON.stringify({ t: 0, vm: "lab/x", policy: { autostop: "enabled", "idle-timeout": "2m" } }),
      report(0, "lab/x", 0),
      report(0, "lab/y", 0),
      JSON.stringify({ t: 600, vm: "lab/x", event: "agent-disconnected" }),
    ];
    const timeline = replayTrace(trace, { tickSeconds: 30 });
    expect(transitions(timeline.filter((entry) => entry.vm === "lab/y"))).toEqual([
      "0s Unknown→Active",
      "300s Active→AgentLost",
    ]);
    expect(transitions(timeline.filter((entry) => entry.vm === "lab/x"))).toEqual([
      "0s Unknown→Active",
      "120s Active→StoppingPending",
      "300s StoppingPending→AgentLost",
    ]);
    expect(Math.max(...timeline.map((entry) => entry.t))).toBe(600);
  });
});
