// One dispute per stop across replicas (issue 34, item 8): the dispute is written with the
// resourceVersion of a fresh read, so of many writers that race (each its own replica, no
// in-process queue between them) the API server lets exactly one through; the others are
// refused with 409, read again, and answer "already".
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { KubeClients } from "../../../src/platform/kube/client.js";
import { kubeDisputeWriter } from "../../../src/platform/kube/start.js";
import { fakeCluster, type FakeKube } from "./helpers.js";

const NS = "users";
const PREFIX = "workstation.aik8s.run/";
const STOP_AT = Date.parse("2026-12-01T18:00:00Z");

let fake: FakeKube;
let clients: KubeClients;

beforeAll(async () => {
  ({ fake, clients } = await fakeCluster());
  fake.seedWorkstation({
    namespace: NS,
    name: "alice",
    runStrategy: "Halted",
    annotations: {
      [`${PREFIX}last-stop`]: JSON.stringify({ when: "2026-12-01T18:00:00Z", reason: "idle for 2h", signals: {} }),
    },
  });
  fake.seedWorkstation({ namespace: NS, name: "never-stopped", runStrategy: "Halted" });
});
afterAll(async () => {
  await fake.close();
});

const lastStop = async (name: string) => {
  const vm = (await clients.custom.getNamespacedCustomObject({
    group: "kubevirt.io",
    version: "v1",
    namespace: NS,
    plural: "virtualmachines",
    name,
  })) as { metadata: { annotations?: Record<string, string> } };
  return JSON.parse(vm.metadata.annotations?.[`${PREFIX}last-stop`] ?? "null");
};

describe("kubeDisputeWriter", () => {
  it("of 40 racing writers, one keeps its dispute; every other answers already, and nothing is overwritten", async () => {
    const write = kubeDisputeWriter(clients, PREFIX);
    const outcomes = await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        write(
          { namespace: NS, name: "alice" },
          { at: new Date(STOP_AT + 1000 + i).toISOString(), what: `r${i}` },
          STOP_AT,
        ),
      ),
    );
    const kept = outcomes.filter((o) => o.kept === "kept");
    expect(kept).toHaveLength(1);
    expect(outcomes.filter((o) => o.kept === "already")).toHaveLength(39);
    const record = await lastStop("alice");
    expect(record).toMatchObject({ reason: "idle for 2h", dispute: { what: expect.stringMatching(/^r\d+$/) } });
    const winnerAt = Date.parse(record.dispute.at);
    for (const o of outcomes) if (o.kept === "already") expect(o.atMs).toBe(winnerAt);
    // The API server refused the stale writes: the conditional patch is what kept it to one.
    const patches = fake.requestsMatching("PATCH", `/namespaces/${NS}/virtualmachines/alice`);
    expect(patches.filter((p) => p.status === 200)).toHaveLength(1);
    expect(patches.filter((p) => p.status === 409).length).toBeGreaterThan(0);
    for (const p of patches)
      expect((p.body as { metadata: { resourceVersion?: string } }).metadata.resourceVersion).toMatch(/^\d+$/);
  });

  it("no record: nothing is written; a record that has a dispute answers already", async () => {
    const write = kubeDisputeWriter(clients, PREFIX);
    expect(await write({ namespace: NS, name: "never-stopped" }, { what: "x" }, STOP_AT)).toMatchObject({
      kept: "failed",
    });
    expect(await write({ namespace: NS, name: "alice" }, { what: "x" }, STOP_AT - 60_000)).toMatchObject({
      kept: "already",
    });
    expect(fake.requestsMatching("PATCH", "/virtualmachines/never-stopped")).toHaveLength(0);
  });
});
