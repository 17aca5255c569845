/**
 * A stand-in for a Kubernetes Service in front of several collector replicas: TCP connections go
 * to an endpoint as the endpoints controller and kube-proxy pick them: a backend whose readiness
 * probe (`GET /readyz`) answered 200 at the last poll and, when the Service has a selector, whose
 * pod (read from the fake API server's store at that poll) carries every selected label. With
 * no endpoint a connection is refused (closed at once), as a Service without endpoints does.
 * The source address the backend sees is the proxy's loopback address, as a ClusterIP Service
 * keeps the client's. Established connections stay where they are when endpoints change, as
 * with kube-proxy: only new connections follow the label.
 */
import net from "node:net";
import type { AddressInfo } from "node:net";
import { resourceByKind } from "./resources.js";
import type { ObjectStore } from "./store.js";

const POD = resourceByKind("Pod");

/** The Service's `spec.selector`, matched against pods in the fake API server. */
export interface ServiceSelector {
  store: ObjectStore;
  namespace: string;
  labels: Record<string, string>;
}

export interface ServiceBackend {
  /** The port agents' connections are forwarded to (the replica's gRPC port). */
  port: number;
  /** The replica's HTTP port, probed at /readyz. */
  readinessPort: number;
  /** The backend's pod name, for a Service with a selector. */
  pod?: string;
}

function selects(selector: ServiceSelector | undefined, backend: ServiceBackend): boolean {
  if (!selector) return true;
  if (backend.pod === undefined) return false;
  const labels = selector.store.get(POD, selector.namespace, backend.pod)?.metadata.labels ?? {};
  return Object.entries(selector.labels).every(([key, value]) => labels[key] === value);
}

export interface FakeService {
  readonly port: number;
  /** Ports of the endpoints at the last probe (Ready, and selected). */
  readyPorts(): number[];
  /** Connections forwarded so far, per backend port. */
  connections(): Map<number, number>;
  /** Every change of the endpoints, with when (performance.now()) it was seen. */
  changes(): Array<{ atMs: number; ports: number[] }>;
  close(): Promise<void>;
}

async function isReady(port: number, timeoutMs: number): Promise<boolean> {
  try {
    const response = await fetch(`http://127.0.0.1:${port}/readyz`, { signal: AbortSignal.timeout(timeoutMs) });
    await response.arrayBuffer();
    return response.status === 200;
  } catch {
    return false;
  }
}

export async function startFakeService(
  backends: ServiceBackend[],
  options: { probeIntervalMs?: number; selector?: ServiceSelector } = {},
): Promise<FakeService> {
  const probeIntervalMs = options.probeIntervalMs ?? 500;
  let ready: ServiceBackend[] = [];
  let closed = false;
  const sockets = new Set<net.Socket>();
  const forwarded = new Map<number, number>();
  const history: Array<{ atMs: number; ports: number[] }> = [];

  const probe = async () => {
    const results = await Promise.all(
      backends.map(async (backend) => ((await isReady(backend.readinessPort, probeIntervalMs * 2)) ? backend : null)),
    );
    const next = results.filter(
      (backend): backend is ServiceBackend => backend !== null && selects(options.selector, backend),
    );
    if (next.map((b) => b.port).join() !== ready.map((b) => b.port).join())
      history.push({ atMs: performance.now(), ports: next.map((b) => b.port) });
    ready = next;
  };
  await probe();
  let probing: Promise<void> = Promise.resolve();
  const timer = setInterval(() => {
    probing = probing.then(probe);
  }, probeIntervalMs);

  const server = net.createServer((client) => {
    sockets.add(client);
    client.on("close", () => sockets.delete(client));
    const target = ready[Math.floor(Math.random() * ready.length)];
    if (!target || closed) {
      client.destroy();
      return;
    }
    forwarded.set(target.port, (forwarded.get(target.port) ?? 0) + 1);
    const upstream = net.connect(target.port, "127.0.0.1");
    sockets.add(upstream);
    upstream.on("close", () => sockets.delete(upstream));
    client.pipe(upstream);
    upstream.pipe(client);
    const end = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on("error", end);
    upstream.on("error", end);
    client.on("close", end);
    upstream.on("close", end);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));

  return {
    port: (server.address() as AddressInfo).port,
    readyPorts: () => ready.map((backend) => backend.port),
    connections: () => new Map(forwarded),
    changes: () => history.map((change) => ({ ...change, ports: [...change.ports] })),
    async close() {
      closed = true;
      clearInterval(timer);
      await probing.catch(() => undefined);
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
