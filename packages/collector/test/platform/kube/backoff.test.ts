import { describe, expect, it } from "vitest";
import {
  Semaphore,
  backoffDelayMs,
  isRetryableStatus,
  parseRetryAfterMs,
  retrying,
  type Attempt,
  type RetryLoop,
} from "../../../src/lib/retry.js";
import { isStopInEffect, launcherPodFacts, vmFacts } from "../../../src/platform/kube/vm-model.js";

const policy = { initialMs: 1_000, maxMs: 10_000, factor: 2 };

describe("backoffDelayMs", () => {
  it("grows exponentially between half and all of the ceiling", () => {
    expect([1, 2, 3, 4].map((n) => backoffDelayMs(n, policy, () => 0))).toEqual([500, 1_000, 2_000, 4_000]);
    expect([1, 2, 3, 4].map((n) => backoffDelayMs(n, policy, () => 1))).toEqual([1_000, 2_000, 4_000, 8_000]);
  });

  it("caps at maxMs, even for a larger Retry-After", () => {
    expect(backoffDelayMs(10, policy, () => 1)).toBe(10_000);
    expect(backoffDelayMs(1, policy, () => 0, 3_000)).toBe(3_000);
    expect(backoffDelayMs(1, policy, () => 0, 3_600_000)).toBe(10_000);
  });

  it("clamps a random source that strays outside [0, 1]", () => {
    expect(backoffDelayMs(1, policy, () => 5)).toBe(1_000);
    expect(backoffDelayMs(1, policy, () => -1)).toBe(500);
  });
});

describe("parseRetryAfterMs", () => {
  it("reads the delay form in seconds as milliseconds, anything else as no hint", () => {
    expect(parseRetryAfterMs("7")).toBe(7_000);
    expect(parseRetryAfterMs(" 0.5 ")).toBe(500);
    expect([undefined, null, "soon", "-3", "Wed, 21 Oct 2015 07:28:00 GMT"].map(parseRetryAfterMs)).toEqual([
      0, 0, 0, 0, 0,
    ]);
  });
});

describe("isRetryableStatus", () => {
  it("retries conflicts, throttling, server errors and silence only", () => {
    expect([409, 429, 500, 502, 503, 504, null].every(isRetryableStatus)).toBe(true);
    expect([400, 401, 403, 404, 410, 422].some(isRetryableStatus)).toBe(false);
  });
});

describe("retrying", () => {
  const loop = (slept: number[], extra: Partial<RetryLoop> = {}): RetryLoop => ({
    maxAttempts: 4,
    backoff: policy,
    random: () => 1,
    sleep: async (ms) => {
      slept.push(ms);
    },
    conflict: "retry",
    ...extra,
  });
  const answers =
    (...statuses: Array<number | null | "ok">) =>
    async (n: number): Promise<Attempt<string>> => {
      const status = statuses[n - 1];
      return status === "ok"
        ? { done: `ok on ${n}` }
        : { failed: { status: status ?? null, message: `got ${status}` } };
    };

  it("waits backoffDelayMs(n) after the n-th failure, at least the Retry-After, and stops on success", async () => {
    const slept: number[] = [];
    let calls = 0;
    const outcome = await retrying(loop(slept), async (n) => {
      calls++;
      return n < 3 ? { failed: { status: 503, message: "busy", retryAfterMs: n === 2 ? 5_000 : 0 } } : { done: n };
    });
    expect(outcome).toEqual({ done: 3, attempts: 3 });
    expect(calls).toBe(3);
    expect(slept).toEqual([1_000, 5_000]);
  });

  it("gives up after maxAttempts with the last failure, still retryable", async () => {
    const slept: number[] = [];
    const outcome = await retrying(loop(slept, { maxAttempts: 2 }), answers(500, null, "ok"));
    expect(outcome).toEqual({ failed: { status: null, message: "got null" }, attempts: 2, retryable: true });
    expect(slept).toEqual([1_000]);
  });

  it("takes a 409 by the writer's conflict rule", async () => {
    expect(await retrying(loop([]), answers(409, "ok"))).toEqual({ done: "ok on 2", attempts: 2 });
    expect(await retrying(loop([], { conflict: "final" }), answers(409, "ok"))).toEqual({
      failed: { status: 409, message: "got 409" },
      attempts: 1,
      retryable: false,
    });
  });

  it("ends when keepTrying says no, and tells onFailure whether another try follows", async () => {
    const seen: Array<[number, boolean]> = [];
    let open = true;
    const outcome = await retrying(
      loop([], {
        maxAttempts: Infinity,
        keepTrying: () => open,
        onFailure: (_failure, n, willRetry) => {
          seen.push([n, willRetry]);
          if (n === 2) open = false;
        },
      }),
      answers(503, 503, 503, "ok"),
    );
    expect(outcome).toMatchObject({ attempts: 3, retryable: true });
    expect(seen).toEqual([
      [1, true],
      [2, true],
      [3, false],
    ]);
  });
});

describe("Semaphore", () => {
  it("never lets more than the limit run, and serves waiters in order", async () => {
    const sem = new Semaphore(2);
    let running = 0;
    let peak = 0;
    const order: number[] = [];
    const gates = Array.from({ length: 5 }, () => {
      let open!: () => void;
      const p = new Promise<void>((resolve) => (open = resolve));
      return { p, open };
    });
    const jobs = gates.map((gate, i) =>
      sem.run(async () => {
        running++;
        peak = Math.max(peak, running);
        order.push(i);
        await gate.p;
        running--;
      }),
    );
    for (const gate of gates) {
      await new Promise((resolve) => setImmediate(resolve));
      gate.open();
    }
    await Promise.all(jobs);
    expect(peak).toBe(2);
    expect(order).toEqual([0, 1, 2, 3, 4]);
    expect(sem.inUse).toBe(0);
  });

  it("releases on failure and rejects a nonsense limit", async () => {
    const sem = new Semaphore(1);
    await expect(sem.run(async () => Promise.reject(new Error("boom")))).rejects.toThrow("boom");
    expect(sem.inUse).toBe(0);
    expect(() => new Semaphore(0)).toThrow(/positive integer/);
  });
});

describe("VM facts (pure)", () => {
  it("derives the run strategy from spec.running or spec.runStrategy", () => {
    const meta = { metadata: { namespace: "n", name: "v" } };
    expect(vmFacts({ ...meta, spec: { running: true } })).toMatchObject({ runStrategy: "Always", running: true });
    expect(vmFacts({ ...meta, spec: { running: false } })).toMatchObject({ runStrategy: "Halted", running: false });
    expect(vmFacts({ ...meta, spec: { runStrategy: "Manual" } })).toMatchObject({
      runStrategy: "Manual",
      running: null,
    });
    expect(vmFacts({ ...meta, spec: {} })).toMatchObject({ runStrategy: "Halted" });
    expect(vmFacts({ metadata: { name: "no-namespace" } })).toBeNull();
    expect(vmFacts("garbage")).toBeNull();
  });

  it("decides when a 409 from the stop subresource means the stop is in effect", () => {
    const vm = (runStrategy: string, pending: string[] = []) => ({ runStrategy, pendingStateChanges: pending });
    expect(isStopInEffect(vm("Halted"), { phase: "Running" })).toBe(true);
    expect(isStopInEffect(vm("Always"), null)).toBe(false);
    expect(isStopInEffect(vm("Manual"), null)).toBe(true);
    expect(isStopInEffect(vm("Manual"), { phase: "Succeeded" })).toBe(true);
    expect(isStopInEffect(vm("Manual"), { phase: "Running" })).toBe(false);
    expect(isStopInEffect(vm("RerunOnFailure", ["Stop"]), { phase: "Running" })).toBe(true);
  });

  it("reads launcher pods and ignores other pods", () => {
    const pod = (labels: Record<string, string>, status: object = {}) => ({
      metadata: { namespace: "n", name: "p", labels },
      status,
    });
    expect(
      launcherPodFacts(
        pod(
          { "kubevirt.io": "virt-launcher", "vm.kubevirt.io/name": "v" },
          { phase: "Running", podIP: "10.0.0.1", podIPs: [{ ip: "10.0.0.1" }, { ip: "fd00::1" }] },
        ),
      ),
    ).toMatchObject({
      vmName: "v",
      ips: ["10.0.0.1", "fd00::1"],
    });
    expect(launcherPodFacts(pod({ app: "web" }))).toBeNull();
    expect(launcherPodFacts(pod({ "kubevirt.io": "virt-launcher" }))).toBeNull();
  });
});
