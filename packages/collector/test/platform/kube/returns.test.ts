// Returns recorded on the VM (issue 36 item 2): in its annotation, so a collector restart loses
// nothing; racing writers (two replicas, two returns) each add theirs, none overwrites another.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { KubeClients } from "../../../src/platform/kube/client.js";
import { kubeReturnsWriter } from "../../../src/platform/kube/start.js";
import { parseReturns } from "../../../src/comeback/warm/returns.js";
import { fakeCluster, type FakeKube } from "./helpers.js";

const NS = "users";
const PREFIX = "workstation.aik8s.run/";
const T0 = Date.parse("2026-12-07T08:45:00Z");

let fake: FakeKube;
let clients: KubeClients;

beforeAll(async () => {
  ({ fake, clients } = await fakeCluster());
  fake.seedWorkstation({ namespace: NS, name: "h36w-ada", runStrategy: "Halted" });
});
afterAll(async () => {
  await fake.close();
});

describe("kubeReturnsWriter", () => {
  it("keeps every return of racing writers in the VM's returns annotation, oldest first", async () => {
    const write = kubeReturnsWriter(clients, PREFIX);
    const vm = { namespace: NS, name: "h36w-ada" };
    const problems = await Promise.all(
      Array.from({ length: 6 }, (_, i) =>
        write(vm, { atMs: T0 + i * 60_000, trigger: i % 2 ? "ssh" : "link", waitSeconds: 40 + i }, T0 + 600_000),
      ),
    );
    expect(problems).toEqual(Array(6).fill(undefined));
    const read = (await clients.custom.getNamespacedCustomObject({
      group: "kubevirt.io",
      version: "v1",
      namespace: NS,
      plural: "virtualmachines",
      name: "h36w-ada",
    })) as { metadata: { annotations?: Record<string, string> } };
    const records = parseReturns(read.metadata.annotations?.[`${PREFIX}returns`]);
    expect(records.map((r) => [r.atMs - T0, r.trigger, r.waitSeconds])).toEqual(
      Array.from({ length: 6 }, (_, i) => [i * 60_000, i % 2 ? "ssh" : "link", 40 + i]),
    );
  });

  it("says what went wrong for a VM that is not there", async () => {
    expect(
      await kubeReturnsWriter(clients, PREFIX)(
        { namespace: NS, name: "h36w-gone" },
        { atMs: T0, trigger: "wake", waitSeconds: 1 },
        T0,
      ),
    ).toMatch(/^reading the VM: /);
  });
});
