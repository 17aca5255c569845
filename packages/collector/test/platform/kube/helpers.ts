import {
  createKubeClients,
  loadKubeConfig,
  type KubeClientOptions,
  type KubeClients,
} from "../../../src/platform/kube/client.js";
import { startFakeKube, type FakeKube, type FakeKubeOptions } from "../../../../../test/support/fake-kube/index.js";

export { resourceByKind } from "../../../../../test/support/fake-kube/index.js";
export type { FakeKube };

export async function fakeCluster(
  options: FakeKubeOptions = {},
  clientOptions: KubeClientOptions = {},
): Promise<{ fake: FakeKube; clients: KubeClients }> {
  const fake = await startFakeKube(options);
  const clients = createKubeClients(loadKubeConfig({ kubeconfigPath: fake.kubeconfigPath }), clientOptions);
  return { fake, clients };
}

/** Polls until `check` returns a value other than undefined/false; fails with `what` after the deadline. */
export async function eventually<T>(
  what: string,
  check: () => T | undefined | false | Promise<T | undefined | false>,
  timeoutMs = 20_000,
): Promise<T> {
  const deadline = performance.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value !== undefined && value !== false) return value;
    } catch (err) {
      lastError = err;
    }
    if (performance.now() > deadline) {
      throw new Error(`timed out waiting for ${what}${lastError ? `: ${String(lastError)}` : ""}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** Sleep that records what was asked and returns at once: backoff without waiting. */
export function recordingSleep(): { sleep: (ms: number) => Promise<void>; delays: number[] } {
  const delays: number[] = [];
  return {
    delays,
    sleep: async (ms: number) => {
      delays.push(ms);
    },
  };
}

/** The largest number of [start, end] intervals open at one moment. */
export function maxOverlap(intervals: Array<[number, number]>): number {
  const points = intervals.flatMap(([start, end]) => [
    { at: start, delta: 1 },
    { at: end, delta: -1 },
  ]);
  points.sort((a, b) => a.at - b.at || a.delta - b.delta);
  let open = 0;
  let max = 0;
  for (const p of points) {
    open += p.delta;
    max = Math.max(max, open);
  }
  return max;
}
