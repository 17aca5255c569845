// The fake Kubernetes API server, checked over raw HTTP: the protocol the collector's client relies on.
import { readFileSync } from "node:fs";
import http from "node:http";
import net from "node:net";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { resourceByKind, startFakeKube, type FakeKube } from "./support/fake-kube/index.js";
import { startFakeService } from "./support/fake-kube/service.js";
import { selfSignedCertificate } from "./support/fake-kube/tls.js";

let fake: FakeKube;

beforeAll(async () => {
  fake = await startFakeKube();
});
afterAll(async () => {
  await fake.close();
});

async function api(
  method: string,
  path: string,
  body?: unknown,
  contentType = "application/json",
): Promise<{ status: number; json: any; headers: Headers }> {
  const res = await fetch(fake.url + path, {
    method,
    headers: { Authorization: `Bearer ${fake.token}`, ...(body !== undefined ? { "Content-Type": contentType } : {}) },
    ...(body !== undefined ? { body: typeof body === "string" ? body : JSON.stringify(body) } : {}),
  });
  const text = await res.text();
  return { status: res.status, json: text ? JSON.parse(text) : null, headers: res.headers };
}

interface WatchStream {
  events: Array<{ type: string; object: any }>;
  ended: Promise<void>;
  close(): void;
}

function watch(path: string): WatchStream {
  const controller = new AbortController();
  const events: WatchStream["events"] = [];
  const ended = (async () => {
    const res = await fetch(fake.url + path, {
      headers: { Authorization: `Bearer ${fake.token}` },
      signal: controller.signal,
    });
    expect(res.status).toBe(200);
    const decoder = new TextDecoder();
    let buffer = "";
    try {
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
        buffer += decoder.decode(chunk, { stream: true });
        let newline: number;
        while ((newline = buffer.indexOf("\n")) >= 0) {
          events.push(JSON.parse(buffer.slice(0, newline)));
          buffer = buffer.slice(newline + 1);
        }
      }
    } catch (err) {
      if (!controller.signal.aborted) throw err;
    }
  })();
  return { events, ended, close: () => controller.abort() };
}

async function until(what: string, check: () => boolean | Promise<boolean>): Promise<void> {
  const deadline = performance.now() + 20_000;
  while (!(await check())) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

const PODS = "/api/v1/namespaces/fk/pods";

describe("fake Kubernetes API server", () => {
  it("demands the bearer token", async () => {
    const res = await fetch(fake.url + PODS);
    expect(res.status).toBe(401);
    expect(await res.json()).toMatchObject({ kind: "Status", reason: "Unauthorized", code: 401 });
  });

  it("creates, gets and lists with label selectors, refusing duplicates", async () => {
    for (const [name, labels] of [
      ["p1", { app: "a", tier: "web" }],
      ["p2", { app: "b" }],
      ["p3", {}],
    ] as const) {
      expect((await api("POST", PODS, { metadata: { name, labels } })).status).toBe(201);
    }
    const dup = await api("POST", PODS, { metadata: { name: "p1" } });
    expect(dup.status).toBe(409);
    expect(dup.json.reason).toBe("AlreadyExists");
    const got = await api("GET", `${PODS}/p1`);
    expect(got.json).toMatchObject({
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: "p1", namespace: "fk", labels: { app: "a" } },
    });
    expect(got.json.metadata.uid).toMatch(/^[0-9a-f-]{36}$/);
    const names = async (selector: string) =>
      (await api("GET", `${PODS}?labelSelector=${encodeURIComponent(selector)}`)).json.items.map(
        (p: any) => p.metadata.name,
      );
    expect(await names("app=a")).toEqual(["p1"]);
    expect(await names("app")).toEqual(["p1", "p2"]);
    expect(await names("!app")).toEqual(["p3"]);
    expect(await names("app!=a")).toEqual(["p2", "p3"]);
    expect(await names("app in (a,b),tier")).toEqual(["p1"]);
    expect(await names("app notin (a)")).toEqual(["p2", "p3"]);
    const list = await api("GET", PODS);
    expect(list.json.kind).toBe("PodList");
    expect(Number(list.json.metadata.resourceVersion)).toBeGreaterThan(0);
    expect((await api("GET", `${PODS}?labelSelector=${encodeURIComponent("a b c")}`)).status).toBe(400);
    expect((await api("GET", `${PODS}/nope`)).json).toMatchObject({
      reason: "NotFound",
      code: 404,
      message: 'pods "nope" not found',
    });
    expect((await api("GET", "/apis/unknown.io/v1/things")).status).toBe(404);
  });

  it("updates with optimistic concurrency: a stale resourceVersion is 409, a no-op does not bump it", async () => {
    const created = (
      await api("POST", "/apis/coordination.k8s.io/v1/namespaces/fk/leases", {
        metadata: { name: "l" },
        spec: { holderIdentity: "a" },
      })
    ).json;
    const rv = created.metadata.resourceVersion;
    const ok = await api("PUT", "/apis/coordination.k8s.io/v1/namespaces/fk/leases/l", {
      metadata: { name: "l", resourceVersion: rv },
      spec: { holderIdentity: "b" },
    });
    expect(ok.status).toBe(200);
    expect(Number(ok.json.metadata.resourceVersion)).toBeGreaterThan(Number(rv));
    expect(ok.json.metadata.uid).toBe(created.metadata.uid);
    const stale = await api("PUT", "/apis/coordination.k8s.io/v1/namespaces/fk/leases/l", {
      metadata: { name: "l", resourceVersion: rv },
      spec: { holderIdentity: "c" },
    });
    expect(stale.status).toBe(409);
    expect(stale.json.reason).toBe("Conflict");
    expect(stale.json.message).toContain("the object has been modified");
    const same = await api("PUT", "/apis/coordination.k8s.io/v1/namespaces/fk/leases/l", ok.json);
    expect(same.json.metadata.resourceVersion).toBe(ok.json.metadata.resourceVersion);
    const badTime = await api("PUT", "/apis/coordination.k8s.io/v1/namespaces/fk/leases/l", {
      metadata: { name: "l" },
      spec: { renewTime: "2025-01-01T00:00:00.123Z" },
    });
    expect(badTime.status).toBe(422);
  });

  it("applies merge patches and JSON patches, keeping status on the main resource", async () => {
    fake.seedWorkstation({ namespace: "fk", name: "vm1" });
    const path = "/apis/kubevirt.io/v1/namespaces/fk/virtualmachines/vm1";
    const merged = await api(
      "PATCH",
      path,
      { metadata: { annotations: { a: "1" } }, status: { printableStatus: "Hacked" } },
      "application/merge-patch+json",
    );
    expect(merged.status).toBe(200);
    expect(merged.json.metadata.annotations).toEqual({ a: "1" });
    expect(merged.json.status.printableStatus).toBe("Running");
    const removed = await api(
      "PATCH",
      path,
      { metadata: { annotations: { a: null, b: "2" } } },
      "application/merge-patch+json",
    );
    expect(removed.json.metadata.annotations).toEqual({ b: "2" });
    const jsonPatched = await api(
      "PATCH",
      path,
      [
        { op: "test", path: "/spec/runStrategy", value: "Always" },
        { op: "replace", path: "/spec/runStrategy", value: "Manual" },
      ],
      "application/json-patch+json",
    );
    expect(jsonPatched.json.spec.runStrategy).toBe("Manual");
    expect(jsonPatched.json.metadata.generation).toBe(2);
    const failedTest = await api(
      "PATCH",
      path,
      [{ op: "test", path: "/spec/runStrategy", value: "Always" }],
      "application/json-patch+json",
    );
    expect(failedTest.status).toBe(422);
    expect((await api("PATCH", path, { metadata: {} }, "application/strategic-merge-patch+json")).status).toBe(415);
    const stalePatch = await api(
      "PATCH",
      path,
      { metadata: { resourceVersion: "1", annotations: { c: "3" } } },
      "application/merge-patch+json",
    );
    expect(stalePatch.status).toBe(409);
  });

  it("watches from a resourceVersion: replays what came after, then streams live, then times out", async () => {
    const ns = "/api/v1/namespaces/fkw/pods";
    await api("POST", ns, { metadata: { name: "before" } });
    const rv = (await api("GET", ns)).json.metadata.resourceVersion;
    await api("POST", ns, { metadata: { name: "after", labels: { x: "1" } } });
    await api("PATCH", `${ns}/after`, { metadata: { labels: { x: "2" } } }, "application/merge-patch+json");
    const w = watch(`${ns}?watch=true&resourceVersion=${rv}&timeoutSeconds=2`);
    await until("replayed events", () => w.events.length >= 2);
    await api("DELETE", `${ns}/after`);
    await w.ended;
    expect(w.events.map((e) => `${e.type} ${e.object.metadata.name}`)).toEqual([
      "ADDED after",
      "MODIFIED after",
      "DELETED after",
    ]);
    const rvs = w.events.map((e) => Number(e.object.metadata.resourceVersion));
    expect([...rvs].sort((a, b) => a - b)).toEqual(rvs);
    expect(rvs[0]).toBeGreaterThan(Number(rv));
  });

  it("a label-selected watch sees objects enter and leave the selection", async () => {
    const ns = "/api/v1/namespaces/fkl/pods";
    const w = watch(`${ns}?watch=true&labelSelector=${encodeURIComponent("kubevirt.io=virt-launcher")}`);
    await until("watch open", () => fake.openWatchCount("/namespaces/fkl/") === 1);
    await api("POST", ns, { metadata: { name: "p", labels: {} } });
    await api(
      "PATCH",
      `${ns}/p`,
      { metadata: { labels: { "kubevirt.io": "virt-launcher" } } },
      "application/merge-patch+json",
    );
    await api("PATCH", `${ns}/p`, { metadata: { labels: { "kubevirt.io": "other" } } }, "application/merge-patch+json");
    await until("two events", () => w.events.length >= 2);
    w.close();
    expect(w.events.map((e) => e.type)).toEqual(["ADDED", "DELETED"]);
  });

  it("answers a watch from a compacted resourceVersion with an in-stream 410 Expired", async () => {
    const rv = (await api("GET", PODS)).json.metadata.resourceVersion;
    await api("POST", PODS, { metadata: { name: "later" } });
    fake.compact();
    const w = watch(`${PODS}?watch=true&resourceVersion=${rv}`);
    await w.ended;
    expect(w.events).toEqual([
      { type: "ERROR", object: expect.objectContaining({ kind: "Status", code: 410, reason: "Expired" }) },
    ]);
    // A watch without a resourceVersion starts with the current state.
    const fresh = watch(`${PODS}?watch=1`);
    await until("snapshot", () => fresh.events.some((e) => e.object.metadata.name === "later"));
    fresh.close();
    expect(fresh.events.every((e) => e.type === "ADDED")).toBe(true);
  });

  it("validates events.k8s.io/v1 Events like the apiserver", async () => {
    const path = "/apis/events.k8s.io/v1/namespaces/fk/events";
    const good = {
      metadata: { name: "e1" },
      eventTime: "2025-01-01T00:00:00.000000Z",
      reportingController: "ws-collector",
      reportingInstance: "pod-1",
      action: "Stop",
      reason: "Stopped",
      type: "Normal",
      note: "ok",
      regarding: { kind: "VirtualMachine", name: "vm1", namespace: "fk" },
    };
    expect((await api("POST", path, good)).status).toBe(201);
    const missing = await api("POST", path, { metadata: { name: "e2" }, reason: "X", type: "Normal" });
    expect(missing.status).toBe(422);
    expect(missing.json.message).toContain("reportingController: Required value");
    expect((await api("POST", path, { ...good, metadata: { name: "e3" }, note: "x".repeat(1025) })).status).toBe(422);
    expect(
      (await api("POST", path, { ...good, metadata: { name: "e4" }, eventTime: "2025-01-01T00:00:00Z" })).status,
    ).toBe(422);
    expect((await api("POST", path, { ...good, metadata: { name: "e5" }, type: "Error" })).status).toBe(422);
  });

  it("implements the KubeVirt stop subresource like virt-api", async () => {
    const sub = (name: string) => `/apis/subresources.kubevirt.io/v1/namespaces/fk/virtualmachines/${name}/stop`;
    expect((await api("PUT", sub("absent"), {})).status).toBe(404);
    fake.seedWorkstation({ namespace: "fk", name: "runner", podIp: "10.9.9.9" });
    const w = watch(
      `/apis/kubevirt.io/v1/namespaces/fk/virtualmachineinstances?watch=true&resourceVersion=${(await api("GET", PODS)).json.metadata.resourceVersion}`,
    );
    const accepted = await api("PUT", sub("runner"), { gracePeriod: 30 });
    expect(accepted.status).toBe(202);
    await until("VMI deleted", () => w.events.some((e) => e.type === "DELETED"));
    w.close();
    const vm = (await api("GET", "/apis/kubevirt.io/v1/namespaces/fk/virtualmachines/runner")).json;
    expect(vm.spec.runStrategy).toBe("Halted");
    expect(vm.status.printableStatus).toBe("Stopped");
    expect((await api("GET", "/apis/kubevirt.io/v1/namespaces/fk/virtualmachineinstances/runner")).status).toBe(404);
    const again = await api("PUT", sub("runner"), {});
    expect(again.status).toBe(409);
    expect(again.json.message).toContain("VM is not running");
    expect((await api("GET", sub("runner"))).status).toBe(405);
    expect((await api("PUT", sub("runner"), "{bad")).status).toBe(400);
    expect(fake.store.get(resourceByKind("VirtualMachine"), "fk", "runner")).toBeDefined();
  });

  it("injects faults a set number of times, with Retry-After, and hangs", async () => {
    fake.faults.add({ method: "GET", pathPattern: "/namespaces/fkf/", status: 429, retryAfter: 3, times: 2 });
    const first = await api("GET", "/api/v1/namespaces/fkf/pods");
    expect(first.status).toBe(429);
    expect(first.headers.get("retry-after")).toBe("3");
    expect(first.json.reason).toBe("TooManyRequests");
    expect((await api("GET", "/api/v1/namespaces/fkf/pods")).status).toBe(429);
    expect((await api("GET", "/api/v1/namespaces/fkf/pods")).status).toBe(200);
    fake.faults.add({ method: "GET", pathPattern: /fkh/, hangMs: Infinity });
    const hung = await fetch(`${fake.url}/api/v1/namespaces/fkh/pods`, {
      headers: { Authorization: `Bearer ${fake.token}` },
      signal: AbortSignal.timeout(300),
    }).then(
      () => "answered",
      () => "timed out",
    );
    expect(hung).toBe("timed out");
    const record = fake.requestsMatching("GET", "/namespaces/fkh/pods")[0]!;
    expect([record.faulted, record.delivered, record.status]).toEqual([true, false, 0]);
  });

  it("serves HTTPS with the certificate named in its kubeconfig", async () => {
    const pair = selfSignedCertificate();
    const tls = await startFakeKube({ tls: pair });
    try {
      expect(tls.url.startsWith("https://127.0.0.1:")).toBe(true);
      const kubeconfig = JSON.parse(readFileSync(tls.kubeconfigPath, "utf8"));
      expect(kubeconfig.clusters[0].cluster["certificate-authority-data"]).toBe(
        Buffer.from(pair.cert).toString("base64"),
      );
      // Node's fetch does not know this CA: the server really is TLS with its own certificate.
      const untrusted = await fetch(tls.url + PODS).then(
        () => "connected",
        (err: Error) => String(err.cause ?? err),
      );
      expect(untrusted).toMatch(/self[- ]signed|certificate/i);
    } finally {
      await tls.close();
    }
  });
});

describe("the stand-in virt-controller's VMI teardown on a stop", () => {
  it("keeps the VMI and its launcher pod terminating for the VMI's terminationGracePeriodSeconds, then removes them", async () => {
    // 20 ms per grace second: the 120 s guest shutdown of the GPU field guide takes 2.4 s here.
    const graceful = await startFakeKube({ graceSecondMs: 20 });
    try {
      graceful.seedWorkstation({ namespace: "fk", name: "slowshut" });
      const vmiPath = "/apis/kubevirt.io/v1/namespaces/fk/virtualmachineinstances/slowshut";
      const request = (method: string, path: string, body?: unknown) =>
        fetch(graceful.url + path, {
          method,
          headers: { Authorization: `Bearer ${graceful.token}`, "Content-Type": "application/json" },
          ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
        });
      // The VM template's grace, as the GPU guide writes it; the seeded VMI copies its template.
      const vmi = await (await request("GET", vmiPath)).json();
      const patched = await request("PUT", vmiPath, {
        ...vmi,
        spec: { ...vmi.spec, terminationGracePeriodSeconds: 120 },
      });
      expect(patched.status).toBe(200);

      const stop = await request(
        "PUT",
        "/apis/subresources.kubevirt.io/v1/namespaces/fk/virtualmachines/slowshut/stop",
        {},
      );
      expect(stop.status).toBe(202);
      // virt-controller acts on the recorded stop just after virt-api answers (a timer of 0 ms).
      await until(
        "the VMI to start terminating",
        () =>
          graceful.store.get(resourceByKind("VirtualMachineInstance"), "fk", "slowshut")?.metadata.deletionTimestamp !==
          undefined,
      );
      const terminating = await (await request("GET", vmiPath)).json();
      expect(terminating.metadata.deletionTimestamp).toEqual(expect.any(String));
      expect(terminating.metadata.deletionGracePeriodSeconds).toBe(120);
      const pods = await (
        await request("GET", "/api/v1/namespaces/fk/pods?labelSelector=kubevirt.io%3Dvirt-launcher")
      ).json();
      expect(pods.items.map((p: any) => p.metadata.deletionGracePeriodSeconds)).toEqual([120]);
      expect(graceful.vmiTerminations).toMatchObject([{ namespace: "fk", name: "slowshut", gracePeriodSeconds: 120 }]);
      expect(graceful.vmiTerminations[0]!.goneAtMs).toBeUndefined();

      await until(
        "the VMI to be gone",
        () => graceful.store.get(resourceByKind("VirtualMachineInstance"), "fk", "slowshut") === undefined,
      );
      expect(graceful.vmiTerminations[0]!.goneAtMs).toEqual(expect.any(Number));
      expect(graceful.store.list(resourceByKind("Pod"), "fk")).toEqual([]);
      expect(
        (
          graceful.store.get(resourceByKind("VirtualMachine"), "fk", "slowshut")?.["status"] as {
            printableStatus: string;
          }
        ).printableStatus,
      ).toBe("Stopped");
    } finally {
      await graceful.close();
    }
  });

  it("a stop's gracePeriod replaces the VMI's own before the teardown, as virt-api patches it", async () => {
    fake.seedWorkstation({ namespace: "fk", name: "forced" });
    const stop = await api("PUT", "/apis/subresources.kubevirt.io/v1/namespaces/fk/virtualmachines/forced/stop", {
      gracePeriod: 0,
    });
    expect(stop.status).toBe(202);
    await until("the teardown", () =>
      fake.vmiTerminations.some((t) => t.name === "forced" && t.goneAtMs !== undefined),
    );
    expect(fake.vmiTerminations.find((t) => t.name === "forced")?.gracePeriodSeconds).toBe(0);
  });

  it("serves CDI DataVolumes", async () => {
    const created = await api("POST", "/apis/cdi.kubevirt.io/v1beta1/namespaces/fk/datavolumes", {
      metadata: { name: "desktop-root" },
      spec: { source: { blank: {} } },
    });
    expect(created.status).toBe(201);
    expect(created.json).toMatchObject({
      apiVersion: "cdi.kubevirt.io/v1beta1",
      kind: "DataVolume",
      metadata: { name: "desktop-root", namespace: "fk" },
    });
  });
});

describe("fake Service", () => {
  /** A backend: a TCP server that answers its name, and a /readyz that says `ready`. */
  async function backend(name: string, ready: () => boolean) {
    const tcp = net.createServer((socket) => socket.end(name));
    const probe = http.createServer((_req, res) => {
      res.writeHead(ready() ? 200 : 503);
      res.end();
    });
    await Promise.all([
      new Promise<void>((r) => tcp.listen(0, "127.0.0.1", r)),
      new Promise<void>((r) => probe.listen(0, "127.0.0.1", r)),
    ]);
    return {
      port: (tcp.address() as AddressInfo).port,
      readinessPort: (probe.address() as AddressInfo).port,
      pod: name,
      close: () => Promise.all([new Promise((r) => tcp.close(r)), new Promise((r) => probe.close(r))]),
    };
  }
  const ask = (port: number) =>
    new Promise<string>((resolve) => {
      let text = "";
      const socket = net.connect(port, "127.0.0.1");
      socket.on("data", (chunk) => (text += chunk.toString()));
      socket.on("close", () => resolve(text));
      socket.on("error", () => resolve(""));
    });

  it("routes to Ready pods that carry every selected label, following label changes", async () => {
    const POD = resourceByKind("Pod");
    const labels = { app: "c" };
    for (const name of ["a", "b"])
      fake.store.create(POD, {
        metadata: { name, namespace: "svc", labels },
        spec: { containers: [{ name: "c", image: "i" }] },
      });
    let bReady = true;
    const a = await backend("a", () => true);
    const b = await backend("b", () => bReady);
    const service = await startFakeService([a, b], {
      probeIntervalMs: 50,
      selector: { store: fake.store, namespace: "svc", labels: { app: "c", leader: "true" } },
    });
    try {
      // No pod labelled: no endpoint, connections are refused.
      expect(service.readyPorts()).toEqual([]);
      expect(await ask(service.port)).toBe("");
      const label = (name: string, value: string | null) => {
        const pod = fake.store.get(POD, "svc", name)!;
        const next = { ...(pod.metadata.labels ?? {}) };
        if (value === null) delete next["leader"];
        else next["leader"] = value;
        fake.store.update(POD, { ...pod, metadata: { ...pod.metadata, labels: next } });
      };
      label("b", "true");
      await until("b as the endpoint", () => service.readyPorts().join() === String(b.port));
      expect(await ask(service.port)).toBe("b");
      // Labelled but not Ready: not an endpoint.
      bReady = false;
      await until("no endpoint", () => service.readyPorts().length === 0);
      label("b", null);
      label("a", "true");
      await until("a as the endpoint", () => service.readyPorts().join() === String(a.port));
      expect(await ask(service.port)).toBe("a");
      expect(service.changes().map((change) => change.ports)).toEqual([[b.port], [], [a.port]]);
      expect(service.connections().get(a.port)).toBe(1);
    } finally {
      await service.close();
      await Promise.all([a.close(), b.close()]);
    }
  });
});

describe("KubeVirt's start and stop per run strategy (run-strategy.ts)", () => {
  const sub = (name: string, action: "start" | "stop") =>
    `/apis/subresources.kubevirt.io/v1/namespaces/rs/virtualmachines/${name}/${action}`;
  const vmOf = async (name: string) =>
    (await api("GET", `/apis/kubevirt.io/v1/namespaces/rs/virtualmachines/${name}`)).json;
  const vmiOf = async (name: string) =>
    api("GET", `/apis/kubevirt.io/v1/namespaces/rs/virtualmachineinstances/${name}`);
  const runningVmi = async (name: string) =>
    until(`${name}'s VMI Running`, async () => (await vmiOf(name)).json?.status?.phase === "Running");
  const noVmi = async (name: string) => until(`${name}'s VMI gone`, async () => (await vmiOf(name)).status === 404);

  it("Always: stop gives Halted; start on Halted gives Always and brings a VMI through its stages", async () => {
    fake.seedWorkstation({ namespace: "rs", name: "always", runStrategy: "Always", podIp: "10.7.0.1" });
    const refused = await api("PUT", sub("always", "start"), {});
    expect(refused.status).toBe(409);
    expect(refused.json.message).toContain("VM is already running");
    expect((await api("PUT", sub("always", "stop"), {})).status).toBe(202);
    await noVmi("always");
    expect((await vmOf("always")).spec.runStrategy).toBe("Halted");
    expect((await api("PUT", sub("always", "start"), {})).status).toBe(202);
    expect((await vmOf("always")).spec.runStrategy).toBe("Always");
    await runningVmi("always");
    const vmi = (await vmiOf("always")).json;
    expect(vmi.status.phaseTransitionTimestamps.map((p: { phase: string }) => p.phase)).toEqual([
      "Pending",
      "Scheduling",
      "Scheduled",
      "Running",
    ]);
    expect(vmi.status.nodeName).toBe("node-1");
    const pods = (await api("GET", "/api/v1/namespaces/rs/pods?labelSelector=vm.kubevirt.io%2Fname%3Dalways")).json;
    // The launcher pod comes back with the VM's address: its agent connects from there again.
    expect(pods.items.map((p: any) => p.status.podIP)).toEqual(["10.7.0.1"]);
    expect((await vmOf("always")).status.printableStatus).toBe("Running");
  });

  it("Always with no VMI: start is refused (the controller brings it back by itself)", async () => {
    fake.seedWorkstation({ namespace: "rs", name: "always-down", runStrategy: "Always", started: false });
    const refused = await api("PUT", sub("always-down", "start"), {});
    expect(refused.status).toBe(409);
    expect(refused.json.message).toContain("Always does not support manual start requests");
  });

  it("Manual stays Manual through stop and start", async () => {
    fake.seedWorkstation({ namespace: "rs", name: "manual", runStrategy: "Manual" });
    expect((await api("PUT", sub("manual", "stop"), {})).status).toBe(202);
    await noVmi("manual");
    expect((await vmOf("manual")).spec.runStrategy).toBe("Manual");
    const again = await api("PUT", sub("manual", "stop"), {});
    expect(again.status).toBe(409);
    expect(again.json.message).toContain("VM is not running");
    expect((await api("PUT", sub("manual", "start"), {})).status).toBe(202);
    await runningVmi("manual");
    const vm = await vmOf("manual");
    expect(vm.spec.runStrategy).toBe("Manual");
    expect(vm.status.stateChangeRequests).toBeUndefined();
  });

  it("RerunOnFailure: start after a stop queues a Start request and keeps the strategy", async () => {
    fake.seedWorkstation({ namespace: "rs", name: "rerun", runStrategy: "RerunOnFailure" });
    expect((await api("PUT", sub("rerun", "stop"), {})).status).toBe(202);
    await noVmi("rerun");
    expect((await api("PUT", sub("rerun", "start"), {})).status).toBe(202);
    await runningVmi("rerun");
    expect((await vmOf("rerun")).spec.runStrategy).toBe("RerunOnFailure");
  });

  it("Halted: stop is refused; start gives Always; the older spec.running becomes true", async () => {
    fake.seedWorkstation({ namespace: "rs", name: "halted", runStrategy: "Halted" });
    const stop = await api("PUT", sub("halted", "stop"), {});
    expect(stop.status).toBe(409);
    expect(stop.json.message).toContain("VM is not running");
    expect((await api("PUT", sub("halted", "start"), {})).status).toBe(202);
    expect((await vmOf("halted")).spec.runStrategy).toBe("Always");
    await runningVmi("halted");
    fake.seedWorkstation({ namespace: "rs", name: "legacy", running: false });
    expect((await api("PUT", sub("legacy", "start"), {})).status).toBe(202);
    expect((await vmOf("legacy")).spec.running).toBe(true);
    expect(fake.starts.map((s) => `${s.name}:${s.runStrategy}`)).toEqual(
      expect.arrayContaining(["halted:Halted", "legacy:Halted"]),
    );
  });

  it("an unschedulable start stays Scheduling with the scheduler's message until released", async () => {
    fake.seedWorkstation({ namespace: "rs", name: "gpu", runStrategy: "Halted" });
    const message = "0/3 nodes are available: 3 Insufficient nvidia.com/gpu.";
    fake.holdScheduling("rs", "gpu", message);
    expect((await api("PUT", sub("gpu", "start"), {})).status).toBe(202);
    await until("PodScheduled=False", async () =>
      (await vmiOf("gpu")).json?.status?.conditions?.some(
        (c: any) => c.type === "PodScheduled" && c.status === "False",
      ),
    );
    const vmi = (await vmiOf("gpu")).json;
    expect(vmi.status.phase).toBe("Scheduling");
    expect(vmi.status.conditions[0]).toMatchObject({ reason: "Unschedulable", message });
    expect((await vmOf("gpu")).status.printableStatus).toBe("ErrorUnschedulable");
    fake.releaseScheduling("rs", "gpu");
    await runningVmi("gpu");
  });
});
