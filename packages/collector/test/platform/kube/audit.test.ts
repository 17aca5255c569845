import { persistedAnnotations, restoreRecord } from "../../../src/engine/persist.js";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import {
  KubeAudit,
  auditEvent,
  lastStopAnnotations,
  truncateUtf8,
  type AuditTarget,
} from "../../../src/platform/kube/audit.js";
import type { KubeClients } from "../../../src/platform/kube/client.js";
import { fakeCluster, recordingSleep, resourceByKind, type FakeKube } from "./helpers.js";

const VM = resourceByKind("VirtualMachine");
const NS = "users";
const PREFIX = "workstation.aik8s.run/";

let fake: FakeKube;
let clients: KubeClients;
let target: AuditTarget;

beforeAll(async () => {
  ({ fake, clients } = await fakeCluster());
  const { vm } = fake.seedWorkstation({ namespace: NS, name: "alice", annotations: { "team.example/owner": "alice" } });
  target = { namespace: NS, name: "alice", uid: vm.metadata.uid ?? "" };
});
afterAll(async () => {
  await fake.close();
});
afterEach(() => fake.faults.clear());

function audit(clock: { now: number }, extra: Partial<ConstructorParameters<typeof KubeAudit>[1]> = {}): KubeAudit {
  return new KubeAudit(clients, {
    reportingInstance: "ws-collector-7d9f-abcde",
    nowMs: () => clock.now,
    ...recordingSleep(),
    ...extra,
  });
}

interface EventsV1 {
  metadata: { name: string };
  reason: string;
  type: string;
  action: string;
  note: string;
  reportingController: string;
  reportingInstance: string;
  eventTime: string;
  regarding: { kind: string; name: string; namespace: string; uid: string; apiVersion: string };
  series?: { count: number; lastObservedTime: string };
}

async function eventsFor(name: string): Promise<EventsV1[]> {
  const list = await clients.events.listNamespacedEvent({ namespace: NS });
  return (list.items as unknown as EventsV1[]).filter((e) => e.regarding?.name === name);
}

async function vmAnnotations(): Promise<Record<string, string>> {
  const vm = (await clients.custom.getNamespacedCustomObject({
    group: "kubevirt.io",
    version: "v1",
    namespace: NS,
    plural: "virtualmachines",
    name: "alice",
  })) as {
    metadata: { annotations?: Record<string, string> };
  };
  return vm.metadata.annotations ?? {};
}

describe("audit Events on the VM", () => {
  it("creates an events.k8s.io/v1 Event regarding the VM, readable back through the API", async () => {
    const clock = { now: Date.UTC(2025, 2, 3, 10, 0, 0, 123) };
    const result = await audit(clock).recordEvent(
      target,
      auditEvent(
        "IdleStopPending",
        "idle for 2h0m (no tty input, kernels idle); stopping at 10:10 unless activity or `ws-lease 8h`",
      ),
    );
    expect(result).toMatchObject({ ok: true, attempts: 1 });
    const [event] = await eventsFor("alice");
    expect(event).toMatchObject({
      reason: "IdleStopPending",
      type: "Normal",
      action: "Notify",
      reportingController: "ws-collector",
      reportingInstance: "ws-collector-7d9f-abcde",
      regarding: {
        apiVersion: "kubevirt.io/v1",
        kind: "VirtualMachine",
        name: "alice",
        namespace: NS,
        uid: target.uid,
      },
    });
    expect(event!.note).toContain("ws-lease 8h");
    expect(event!.metadata.name.startsWith("alice.")).toBe(true);
    expect(String(event!.eventTime)).toMatch(/2025-03-03T10:00:00\.123/);
  });

  it("uses Warning for refusals and bad policy, and cuts notes to the API's 1 kB", async () => {
    const clock = { now: Date.UTC(2025, 2, 3, 11) };
    const long = 'volume "scratch" is an emptyDisk; '.repeat(80);
    expect((await audit(clock).recordEvent(target, auditEvent("IdleStopRefused", long))).ok).toBe(true);
    expect(
      (
        await audit(clock).recordEvent(
          target,
          auditEvent("PolicyInvalid", 'idle-timeout: "2 hours" is not a duration; keeping 2h'),
        )
      ).ok,
    ).toBe(true);
    const events = await eventsFor("alice");
    const refused = events.find((e) => e.reason === "IdleStopRefused")!;
    expect(refused.type).toBe("Warning");
    expect(Buffer.byteLength(refused.note, "utf8")).toBeLessThanOrEqual(1024);
    expect(refused.note.endsWith("…")).toBe(true);
    expect(events.find((e) => e.reason === "PolicyInvalid")?.type).toBe("Warning");
  });

  it("folds a repeat within the series window into the first Event's series", async () => {
    const clock = { now: Date.UTC(2025, 2, 3, 12) };
    const a = audit(clock);
    const note = "connection from 10.0.0.9 but VM users/alice runs in a virt-launcher pod at 10.244.0.10";
    await a.recordEvent(target, auditEvent("IdentityRejected", note));
    clock.now += 60_000;
    await a.recordEvent(target, auditEvent("IdentityRejected", note));
    clock.now += 60_000;
    await a.recordEvent(target, auditEvent("IdentityRejected", note));
    let matching = (await eventsFor("alice")).filter((e) => e.reason === "IdentityRejected");
    expect(matching).toHaveLength(1);
    expect(matching[0]!.series?.count).toBe(3);
    expect(String(matching[0]!.series?.lastObservedTime)).toMatch(/12:02:00\.000/);
    const patches = fake.requestsMatching("PATCH", `/events/${matching[0]!.metadata.name}`);
    expect(patches.map((p) => p.contentType)).toEqual(["application/merge-patch+json", "application/merge-patch+json"]);
    // After the window a new Event starts.
    clock.now += 10 * 60_000;
    await a.recordEvent(target, auditEvent("IdentityRejected", note));
    matching = (await eventsFor("alice")).filter((e) => e.reason === "IdentityRejected");
    expect(matching).toHaveLength(2);
  });

  it("starts a new Event when the one it would extend has expired", async () => {
    const clock = { now: Date.UTC(2025, 2, 3, 13) };
    const a = audit(clock);
    await a.recordEvent(target, auditEvent("IdleStopCancelled", "tty input on pts/0"));
    const first = (await eventsFor("alice")).find((e) => e.reason === "IdleStopCancelled")!;
    fake.store.delete(resourceByKind("Event"), NS, first.metadata.name);
    clock.now += 1_000;
    expect((await a.recordEvent(target, auditEvent("IdleStopCancelled", "tty input on pts/0"))).ok).toBe(true);
    expect((await eventsFor("alice")).filter((e) => e.reason === "IdleStopCancelled")).toHaveLength(1);
  });

  it("retries 500/429 and gives up cleanly (never throws) when the API keeps failing", async () => {
    const clock = { now: Date.UTC(2025, 2, 3, 14) };
    fake.faults.add({ method: "POST", pathPattern: `/namespaces/${NS}/events`, status: 500, times: 1 });
    fake.faults.add({ method: "POST", pathPattern: `/namespaces/${NS}/events`, status: 429, times: 1, retryAfter: 1 });
    const ok = await audit(clock).recordEvent(target, auditEvent("Stopped", "retried"));
    expect(ok).toMatchObject({ ok: true, attempts: 3 });
    fake.faults.add({ method: "POST", pathPattern: `/namespaces/${NS}/events`, status: 503, times: 10 });
    const failed = await audit(clock, { maxAttempts: 2 }).recordEvent(target, auditEvent("Stopped", "will fail"));
    expect(failed).toMatchObject({ ok: false, attempts: 2, status: 503 });
    expect(failed.message).toContain("gave up after 2 attempts");
  });
});

describe("annotations on the VM", () => {
  it("merge-patches last-stop, state and last-active, touching nothing else", async () => {
    const clock = { now: Date.UTC(2025, 2, 4, 9) };
    const a = audit(clock);
    const specBefore = JSON.stringify(fake.store.get(VM, NS, "alice")?.["spec"]);
    expect(
      (
        await a.recordLastStop(target, {
          whenMs: Date.UTC(2025, 2, 4, 8, 59, 30),
          reason: "idle 2h0m, grace 10m over",
          signals: { tty: "idle 2h5m", jupyter: "no kernels", gpu: "0%" },
        })
      ).ok,
    ).toBe(true);
    const persisted = persistedAnnotations(
      { state: "Stopped", lastActiveMs: Date.UTC(2025, 2, 4, 6, 50), noticeId: undefined, stopDeadlineMs: undefined },
      PREFIX,
    );
    expect((await a.patchAnnotations(target, persisted)).ok).toBe(true);
    const annotations = await vmAnnotations();
    expect(annotations["team.example/owner"]).toBe("alice");
    expect(JSON.parse(annotations[`${PREFIX}last-stop`]!)).toEqual({
      when: "2025-03-04T08:59:30Z",
      reason: "idle 2h0m, grace 10m over",
      signals: { tty: "idle 2h5m", jupyter: "no kernels", gpu: "0%" },
      by: "ws-collector-7d9f-abcde",
    });
    expect(annotations[`${PREFIX}state`]).toBe("Stopped");
    expect(annotations[`${PREFIX}last-active`]).toBe("2025-03-04T06:50:00.000Z");
    expect(JSON.stringify(fake.store.get(VM, NS, "alice")?.["spec"])).toBe(specBefore);
    const patches = fake.requestsMatching("PATCH", "/virtualmachines/alice");
    expect(patches.every((p) => p.contentType === "application/merge-patch+json")).toBe(true);
    expect(
      patches.every(
        (p) =>
          Object.keys(p.body as object).join() === "metadata" &&
          Object.keys((p.body as { metadata: object }).metadata).join() === "annotations",
      ),
    ).toBe(true);

    expect(restoreRecord(annotations, Date.UTC(2025, 2, 4, 10), PREFIX).record?.state).toBe("Stopped");
  });

  it("removes an annotation with null, and honours a custom prefix", async () => {
    const clock = { now: Date.UTC(2025, 2, 4, 10) };
    const a = audit(clock, { annotationPrefix: "ws.example.org/" });
    const custom = "ws.example.org/";
    await a.patchAnnotations(
      target,
      persistedAnnotations(
        { state: "Active", lastActiveMs: Date.UTC(2025, 2, 4, 10), noticeId: undefined, stopDeadlineMs: undefined },
        custom,
      ),
    );
    await a.patchAnnotations(
      target,
      persistedAnnotations(
        { state: "AgentLost", lastActiveMs: undefined, noticeId: undefined, stopDeadlineMs: undefined },
        custom,
      ),
    );
    const annotations = await vmAnnotations();
    expect(annotations["ws.example.org/state"]).toBe("AgentLost");
    expect("ws.example.org/last-active" in annotations).toBe(false);
  });

  it("reports a missing VM without throwing", async () => {
    const result = await audit({ now: 0 }).patchAnnotations(
      { namespace: NS, name: "ghost" },
      { [`${PREFIX}state`]: "Active" },
    );
    expect(result).toMatchObject({ ok: false, status: 404, attempts: 1 });
  });
});

describe("annotation values (pure)", () => {
  it("builds and reads back the documented formats", () => {
    expect(lastStopAnnotations(PREFIX, { whenMs: 0, reason: "r", signals: ["tty"], by: "me" })).toEqual({
      [`${PREFIX}last-stop`]: '{"when":"1970-01-01T00:00:00Z","reason":"r","signals":["tty"],"by":"me"}',
    });
  });

  it("truncates UTF-8 on character boundaries", () => {
    expect(truncateUtf8("short")).toBe("short");
    const cut = truncateUtf8("é".repeat(600), 1024);
    expect(Buffer.byteLength(cut, "utf8")).toBeLessThanOrEqual(1024);
    expect(cut.endsWith("…")).toBe(true);
    expect(cut.includes("\uFFFD")).toBe(false);
  });
});
