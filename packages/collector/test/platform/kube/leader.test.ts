import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { LeaderElector, type ElectionTimers, type LeaderElectorOptions } from "../../../src/platform/kube/leader.js";
import type { KubeClients } from "../../../src/platform/kube/client.js";
import { eventually, fakeCluster, resourceByKind, type FakeKube } from "./helpers.js";

const LEASE = resourceByKind("Lease");
const NS = "ws-system";

let fake: FakeKube;
let clients: KubeClients;
let leaseSeq = 0;

beforeAll(async () => {
  ({ fake, clients } = await fakeCluster({}, { requestTimeoutMs: 3_000 }));
});
afterAll(async () => {
  await fake.close();
});
afterEach(() => fake.faults.clear());

/** Timers that never fire on their own: rounds are driven with step() and a hand-moved clock. */
function manualTimers(): ElectionTimers & { pending: number } {
  const handles = new Set<object>();
  return {
    setTimeout: () => {
      const h = {};
      handles.add(h);
      return h;
    },
    clearTimeout: (h) => handles.delete(h as object),
    get pending() {
      return handles.size;
    },
  };
}

interface Candidate {
  elector: LeaderElector;
  log: string[];
}

function candidates(
  names: string[],
  clock: { now: number },
  leaseName: string,
  extra: Partial<LeaderElectorOptions> = {},
): Candidate[] {
  return names.map((identity) => {
    const log: string[] = [];
    const elector = new LeaderElector(clients, {
      namespace: NS,
      leaseName,
      identity,
      leaseDurationMs: 15_000,
      renewDeadlineMs: 10_000,
      retryPeriodMs: 2_000,
      nowMs: () => clock.now,
      timers: manualTimers(),
      random: () => 0,
      onStartedLeading: () => log.push("started"),
      onStoppedLeading: (reason) => log.push(`stopped: ${reason}`),
      ...extra,
    });
    return { elector, log };
  });
}

function leaseSpec(name: string) {
  return fake.store.get(LEASE, NS, name)?.["spec"] as {
    holderIdentity?: string;
    leaseTransitions?: number;
    renewTime?: string;
    acquireTime?: string;
    leaseDurationSeconds?: number;
  };
}

describe("leader election on a Lease (stepped by hand)", () => {
  it("two candidates on one Lease: exactly one leads; the Lease names it", async () => {
    const clock = { now: Date.UTC(2025, 0, 1) };
    const leaseName = `lease-${++leaseSeq}`;
    const [a, b] = candidates(["collector-a", "collector-b"], clock, leaseName);
    await a!.elector.step();
    await b!.elector.step();
    expect(a!.elector.isLeader()).toBe(true);
    expect(b!.elector.isLeader()).toBe(false);
    expect(b!.elector.currentLeader()).toBe("collector-a");
    expect(a!.log).toEqual(["started"]);
    expect(b!.log).toEqual([]);
    const spec = leaseSpec(leaseName);
    expect(spec.holderIdentity).toBe("collector-a");
    expect(spec.leaseDurationSeconds).toBe(15);
    expect(spec.renewTime).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/);
  });

  it("the leader renews and keeps it; when it stops renewing the other takes over after expiry", async () => {
    const clock = { now: Date.UTC(2025, 0, 1) };
    const leaseName = `lease-${++leaseSeq}`;
    const [a, b] = candidates(["collector-a", "collector-b"], clock, leaseName);
    await a!.elector.step();
    await b!.elector.step();
    for (let i = 0; i < 3; i++) {
      clock.now += 5_000;
      expect(await a!.elector.step()).toBe(5_000);
      await b!.elector.step();
      expect([a!.elector.isLeader(), b!.elector.isLeader()]).toEqual([true, false]);
    }
    const renewedAt = leaseSpec(leaseName).renewTime;
    // a goes quiet (hung process, partition). b keeps trying: not before leaseDuration since it last saw a change.
    clock.now += 14_000;
    await b!.elector.step();
    expect(b!.elector.isLeader()).toBe(false);
    // a itself stopped leading already: its renew deadline (10 s) passed.
    expect(a!.elector.isLeader()).toBe(false);
    expect(a!.log).toEqual(["started", "stopped: no successful renewal within 10000 ms"]);
    clock.now += 2_000;
    await b!.elector.step();
    expect(b!.elector.isLeader()).toBe(true);
    expect(b!.log).toEqual(["started"]);
    const spec = leaseSpec(leaseName);
    expect(spec.holderIdentity).toBe("collector-b");
    expect(spec.leaseTransitions).toBe(1);
    expect(spec.renewTime).not.toBe(renewedAt);
    // a comes back and finds b's fresh record: it stays a follower.
    await a!.elector.step();
    expect(a!.elector.isLeader()).toBe(false);
    expect(a!.elector.currentLeader()).toBe("collector-b");
  });

  it("a leader that sees another holder steps down at once", async () => {
    const clock = { now: Date.UTC(2025, 0, 1) };
    const leaseName = `lease-${++leaseSeq}`;
    const [a] = candidates(["collector-a"], clock, leaseName);
    await a!.elector.step();
    expect(a!.elector.isLeader()).toBe(true);
    const lease = fake.store.get(LEASE, NS, leaseName)!;
    fake.store.update(LEASE, { ...lease, spec: { ...(lease["spec"] as object), holderIdentity: "intruder" } });
    clock.now += 1_000;
    await a!.elector.step();
    expect(a!.elector.isLeader()).toBe(false);
    expect(a!.log[1]).toContain("now held by intruder");
  });

  it("a racing pair after expiry: one write wins, the other gets 409 and follows", async () => {
    const clock = { now: Date.UTC(2025, 0, 1) };
    const leaseName = `lease-${++leaseSeq}`;
    const [old, a, b] = candidates(["collector-old", "collector-a", "collector-b"], clock, leaseName);
    await old!.elector.step();
    await a!.elector.step();
    await b!.elector.step();
    clock.now += 16_000;
    await Promise.all([a!.elector.step(), b!.elector.step()]);
    const leaders = [a!, b!].filter((c) => c.elector.isLeader());
    expect(leaders).toHaveLength(1);
    const lease = leaseSpec(leaseName);
    expect(lease.holderIdentity).toBe(leaders[0] === a ? "collector-a" : "collector-b");
    expect(lease.leaseTransitions).toBe(1);
    const puts = fake.requestsMatching("PUT", `/leases/${leaseName}`);
    expect(puts.filter((r) => r.status === 200)).toHaveLength(1);
    expect(puts.filter((r) => r.status === 409).length).toBeLessThanOrEqual(1);
  });

  it("an injected 409 on the takeover write costs one round, not the election", async () => {
    const clock = { now: Date.UTC(2025, 0, 1) };
    const leaseName = `lease-${++leaseSeq}`;
    const [old, b] = candidates(["collector-old", "collector-b"], clock, leaseName);
    await old!.elector.step();
    await b!.elector.step();
    clock.now += 16_000;
    fake.faults.add({ method: "PUT", pathPattern: `/leases/${leaseName}`, status: 409, times: 1 });
    await b!.elector.step();
    expect(b!.elector.isLeader()).toBe(false);
    await b!.elector.step();
    expect(b!.elector.isLeader()).toBe(true);
  });

  it("failing renewals keep leadership until the deadline, then end it", async () => {
    const clock = { now: Date.UTC(2025, 0, 1) };
    const leaseName = `lease-${++leaseSeq}`;
    const errors: string[] = [];
    const [a] = candidates(["collector-a"], clock, leaseName, { onError: (m) => errors.push(m) });
    await a!.elector.step();
    fake.faults.add({ method: "PUT", pathPattern: `/leases/${leaseName}`, status: 500, times: 1000 });
    clock.now += 5_000;
    expect(await a!.elector.step()).toBe(2_000);
    expect(a!.elector.isLeader()).toBe(true);
    clock.now += 4_000;
    await a!.elector.step();
    expect(a!.elector.isLeader()).toBe(true);
    clock.now += 1_000;
    await a!.elector.step();
    expect(a!.elector.isLeader()).toBe(false);
    expect(a!.log).toEqual(["started", "stopped: no successful renewal within 10000 ms"]);
    expect(errors.some((e) => e.includes("HTTP 500"))).toBe(true);
  });

  it("a hung renewal does not keep a leader past its deadline", async () => {
    const clock = { now: Date.UTC(2025, 0, 1) };
    const leaseName = `lease-${++leaseSeq}`;
    const [a] = candidates(["collector-a"], clock, leaseName);
    await a!.elector.step();
    // A leader renews with one guarded replace (no read first): that is the request that hangs.
    fake.faults.add({ method: "PUT", pathPattern: `/leases/${leaseName}`, hangMs: Infinity, times: 1 });
    clock.now += 5_000;
    const hung = a!.elector.step();
    await eventually("the renewal to reach the server", () =>
      fake.requestsMatching("PUT", `/leases/${leaseName}`).some((r) => r.faulted),
    );
    expect(a!.elector.isLeader()).toBe(true);
    clock.now += 5_000;
    // The request is still hanging, yet leadership ends at the deadline.
    expect(a!.elector.isLeader()).toBe(false);
    expect(a!.log).toEqual(["started", "stopped: no successful renewal within 10000 ms"]);
    await hung;
  });

  it("a leader renews with one request, and falls back to reading the Lease when someone else wrote it", async () => {
    const clock = { now: Date.UTC(2025, 0, 1) };
    const leaseName = `lease-${++leaseSeq}`;
    const [a] = candidates(["collector-a"], clock, leaseName);
    await a!.elector.step();
    const before = fake.requests.length;
    clock.now += 5_000;
    await a!.elector.step();
    const renewal = fake.requests.slice(before).filter((r) => r.path.includes(`/leases/${leaseName}`));
    expect(renewal.map((r) => `${r.method} ${r.status}`)).toEqual(["PUT 200"]);
    // Someone else writes the Lease (a conflicting resourceVersion): the direct renewal gets 409, the round reads and renews.
    const current = fake.store.get(LEASE, NS, leaseName)!;
    fake.store.update(LEASE, { ...current, metadata: { ...current.metadata, annotations: { touched: "yes" } } });
    const next = fake.requests.length;
    clock.now += 5_000;
    await a!.elector.step();
    expect(
      fake.requests
        .slice(next)
        .filter((r) => r.path.includes(`/leases/${leaseName}`))
        .map((r) => `${r.method} ${r.status}`),
    ).toEqual(["PUT 409", "GET 200", "PUT 200"]);
    expect(a!.elector.isLeader()).toBe(true);
    expect(leaseSpec(leaseName).holderIdentity).toBe("collector-a");
  });

  it("release hands the Lease over without waiting for expiry", async () => {
    const clock = { now: Date.UTC(2025, 0, 1) };
    const leaseName = `lease-${++leaseSeq}`;
    const [a, b] = candidates(["collector-a", "collector-b"], clock, leaseName);
    await a!.elector.step();
    await b!.elector.step();
    await a!.elector.stop({ release: true });
    expect(a!.elector.isLeader()).toBe(false);
    expect(a!.log).toEqual(["started", "stopped: elector stopped"]);
    expect(leaseSpec(leaseName).holderIdentity).toBeUndefined();
    clock.now += 1_000;
    await b!.elector.step();
    expect(b!.elector.isLeader()).toBe(true);
  });

  it("rejects timings that would let two leaders overlap", () => {
    expect(() => candidates(["x"], { now: 0 }, "bad", { renewDeadlineMs: 20_000 })).toThrow(
      /renewDeadline must be shorter than leaseDuration/,
    );
    expect(() => candidates([""], { now: 0 }, "bad")).toThrow(/identity/);
  });
});

describe("leader election on real timers", () => {
  it("exactly one of two running replicas leads at any moment, and the survivor takes over", async () => {
    const leaseName = `lease-${++leaseSeq}`;
    const make = (identity: string) =>
      new LeaderElector(clients, {
        namespace: NS,
        leaseName,
        identity,
        leaseDurationMs: 3_000,
        renewDeadlineMs: 2_000,
        renewIntervalMs: 400,
        retryPeriodMs: 300,
        nowMs: () => Date.now(),
      });
    const a = make("replica-a");
    const b = make("replica-b");
    let both = 0;
    const sampler = setInterval(() => {
      if (a.isLeader() && b.isLeader()) both++;
    }, 10);
    try {
      a.start();
      b.start();
      const first = await eventually("a leader", () => (a.isLeader() ? a : b.isLeader() ? b : undefined));
      const other = first === a ? b : a;
      // The leader dies without releasing (crash): the other waits out the lease and takes over.
      await first.stop({ release: false });
      await eventually("the survivor to lead", () => other.isLeader(), 30_000);
      expect(leaseSpec(leaseName).holderIdentity).toBe(other === a ? "replica-a" : "replica-b");
      await other.stop({ release: true });
      expect(both).toBe(0);
    } finally {
      clearInterval(sampler);
      await a.stop();
      await b.stop();
    }
  });
});
