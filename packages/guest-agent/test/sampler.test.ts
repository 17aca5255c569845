import { describe, expect, it } from "vitest";
import { SourceState } from "@ws/protocol";
import { manualClock } from "../src/clock.js";
import { defaultRoots } from "../src/roots.js";
import { takeSample } from "../src/sampler.js";
import { ok, type Signal } from "../src/signals/types.js";
import { usersFrom } from "../src/users.js";

describe("takeSample", () => {
  const clock = manualClock();
  const base = { roots: defaultRoots, clock, users: usersFrom([]) };

  it("measures every age from the sample's start, however late a source reads", async () => {
    const startMs = clock.nowMs();
    const slowCodeServer: Signal<unknown> = {
      name: "code_server",
      async collect(ctx) {
        clock.advance(1_500); // this source took 1.5 s; the heartbeat happened 10 s before the sample began
        return ok({
          instances: [{ user: "alice", heartbeatAgeSeconds: (ctx.clock.nowMs() - (startMs - 10_000)) / 1000 }],
        });
      },
    };
    const sample = await takeSample([slowCodeServer], [], base, 5_000, clock);
    expect(sample.report.codeServer?.instances[0]?.heartbeatAgeSeconds).toBe(10);
  });

  it("reports a throwing, a hanging and a disabled source, and keeps the others", async () => {
    const signals: Array<Signal<unknown>> = [
      { name: "gpu", collect: async () => Promise.reject(new Error("nvidia-smi exploded")) },
      { name: "jupyter", collect: () => new Promise(() => {}) },
      { name: "disk", collect: async () => ok({ mounts: [{ mountPoint: "/", sizeBytes: 10n, usedBytes: 5n }] }) },
      { name: "inhibitors", collect: async () => ok({ locks: [] }) },
    ];
    const sample = await takeSample(signals, ["inhibitors"], base, 50, clock);
    const states = Object.fromEntries(sample.report.sources.map((s) => [s.source, [s.state, s.message]]));
    expect(states).toEqual({
      gpu: [SourceState.FAILED, "nvidia-smi exploded"],
      jupyter: [SourceState.FAILED, "timed out after 50 ms"],
      disk: [SourceState.OK, ""],
      inhibitors: [SourceState.DISABLED, "disabled in configuration"],
    });
    expect(sample.report.disk?.mounts[0]?.mountPoint).toBe("/");
  });
});
