// A small stand-in for KubeVirt's metric endpoints (virt-handler's per-VMI
// domain stats and virt-api's connection gauges) that a real Prometheus
// scrapes. It serves KubeVirt's metric names and labels (kubevirt/kubevirt
// docs/observability/metrics.md) with values the test drives: the counters
// grow at the rates the test sets, between scrapes, as a running VMI's would.
import http from "node:http";
import type { AddressInfo } from "node:net";

export interface DrivenVmi {
  namespace: string;
  name: string;
  node?: string;
  vcpus: number;
  /** Busy share of each vCPU (0..1): kubevirt_vmi_vcpu_seconds_total grows by vcpus × this per second. */
  vcpuBusyRatio: number;
  receiveBytesPerSecond: number;
  transmitBytesPerSecond: number;
  /** kubevirt_vmi_network_{receive,transmit}_packets_total grow by these per second. */
  receivePacketsPerSecond: number;
  transmitPacketsPerSecond: number;
  readBytesPerSecond: number;
  writeBytesPerSecond: number;
  vncConnections: number;
  consoleConnections: number;
  portForwardTunnels: number;
}

export interface VirtHandlerStandIn {
  /** host:port to scrape at /metrics. */
  target: string;
  /** Sets (or adds) a VMI's driven values; counters keep growing from where they are. */
  set(vmi: Pick<DrivenVmi, "namespace" | "name"> & Partial<DrivenVmi>): void;
  remove(namespace: string, name: string): void;
  /** Whether virt-api's own series (kubevirt_virt_api_ready_status) are served. */
  virtApiUp: boolean;
  scrapes(): number;
  close(): Promise<void>;
}

interface Counters {
  vcpuSeconds: number;
  rx: number;
  tx: number;
  rxPackets: number;
  txPackets: number;
  read: number;
  write: number;
}

const QUIET: Omit<DrivenVmi, "namespace" | "name"> = {
  vcpus: 2,
  vcpuBusyRatio: 0.003,
  receiveBytesPerSecond: 1000,
  transmitBytesPerSecond: 1000,
  // An idle guest's chatter (ARP, NTP): a packet every half minute or so each way.
  receivePacketsPerSecond: 0.03,
  transmitPacketsPerSecond: 0.02,
  readBytesPerSecond: 0,
  writeBytesPerSecond: 0,
  vncConnections: 0,
  consoleConnections: 0,
  portForwardTunnels: 0,
};

export async function startVirtHandler(nowMs: () => number = Date.now): Promise<VirtHandlerStandIn> {
  const vmis = new Map<string, { driven: DrivenVmi; counters: Counters; atMs: number }>();
  let scrapes = 0;
  const advance = () => {
    const now = nowMs();
    for (const entry of vmis.values()) {
      const seconds = Math.max(0, (now - entry.atMs) / 1000);
      const d = entry.driven;
      entry.counters.vcpuSeconds += d.vcpus * d.vcpuBusyRatio * seconds;
      entry.counters.rx += d.receiveBytesPerSecond * seconds;
      entry.counters.tx += d.transmitBytesPerSecond * seconds;
      entry.counters.rxPackets += d.receivePacketsPerSecond * seconds;
      entry.counters.txPackets += d.transmitPacketsPerSecond * seconds;
      entry.counters.read += d.readBytesPerSecond * seconds;
      entry.counters.write += d.writeBytesPerSecond * seconds;
      entry.atMs = now;
    }
  };
  const standIn: VirtHandlerStandIn = {
    target: "",
    virtApiUp: true,
    set(vmi) {
      advance();
      const key = `${vmi.namespace}/${vmi.name}`;
      const existing = vmis.get(key);
      const driven = { ...QUIET, ...existing?.driven, ...vmi } as DrivenVmi;
      vmis.set(key, {
        driven,
        counters: existing?.counters ?? {
          vcpuSeconds: 1000,
          rx: 5e6,
          tx: 5e6,
          rxPackets: 4e4,
          txPackets: 3e4,
          read: 1e8,
          write: 1e8,
        },
        atMs: existing?.atMs ?? nowMs(),
      });
    },
    remove(namespace, name) {
      vmis.delete(`${namespace}/${name}`);
    },
    scrapes: () => scrapes,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
  const render = (): string => {
    advance();
    const lines: string[] = [];
    const family = (name: string, type: string, help: string) =>
      lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`);
    family(
      "kubevirt_vmi_vcpu_seconds_total",
      "counter",
      "Total amount of time spent in each state by each vcpu (cpu_time excluding hypervisor time).",
    );
    for (const { driven, counters } of vmis.values()) {
      const base = `name="${driven.name}",namespace="${driven.namespace}",node="${driven.node ?? "node-1"}"`;
      for (let id = 0; id < driven.vcpus; id++)
        lines.push(
          `kubevirt_vmi_vcpu_seconds_total{id="${id}",${base},state="running"} ${counters.vcpuSeconds / driven.vcpus}`,
        );
    }
    const perVmi = (name: string, help: string, extra: string, value: (c: Counters) => number) => {
      family(name, "counter", help);
      for (const { driven, counters } of vmis.values())
        lines.push(
          `${name}{${extra},name="${driven.name}",namespace="${driven.namespace}",node="${driven.node ?? "node-1"}"} ${value(counters)}`,
        );
    };
    perVmi(
      "kubevirt_vmi_network_receive_bytes_total",
      "Total network traffic received in bytes.",
      'interface="default"',
      (c) => c.rx,
    );
    perVmi(
      "kubevirt_vmi_network_transmit_bytes_total",
      "Total network traffic transmitted in bytes.",
      'interface="default"',
      (c) => c.tx,
    );
    perVmi(
      "kubevirt_vmi_network_receive_packets_total",
      "Total network traffic received packets.",
      'interface="default"',
      (c) => c.rxPackets,
    );
    perVmi(
      "kubevirt_vmi_network_transmit_packets_total",
      "Total network traffic transmitted packets.",
      'interface="default"',
      (c) => c.txPackets,
    );
    perVmi(
      "kubevirt_vmi_storage_read_traffic_bytes_total",
      "Total number of bytes read from storage.",
      'drive="rootdisk"',
      (c) => c.read,
    );
    perVmi(
      "kubevirt_vmi_storage_write_traffic_bytes_total",
      "Total number of written bytes.",
      'drive="rootdisk"',
      (c) => c.write,
    );
    if (standIn.virtApiUp) {
      family(
        "kubevirt_virt_api_ready_status",
        "gauge",
        "Indication for a virt-api server that is ready to serve requests.",
      );
      lines.push('kubevirt_virt_api_ready_status{pod="virt-api-0"} 1');
      const gauge = (name: string, help: string, value: (d: DrivenVmi) => number) => {
        family(name, "gauge", help);
        // virt-api creates a VMI's series on its first connection: a VMI never connected has none.
        // A value below zero is served as set: what a broken exporter or relabelling would show.
        for (const { driven } of vmis.values())
          if (value(driven) !== 0)
            lines.push(`${name}{namespace="${driven.namespace}",vmi="${driven.name}"} ${value(driven)}`);
      };
      gauge(
        "kubevirt_vnc_active_connections",
        "Amount of active VNC connections, broken down by namespace and vmi name.",
        (d) => d.vncConnections,
      );
      gauge(
        "kubevirt_console_active_connections",
        "Amount of active Console connections, broken down by namespace and vmi name.",
        (d) => d.consoleConnections,
      );
      gauge(
        "kubevirt_portforward_active_tunnels",
        "Amount of active portforward tunnels, broken down by namespace and vmi name.",
        (d) => d.portForwardTunnels,
      );
    }
    return `${lines.join("\n")}\n`;
  };
  const server = http.createServer((req, res) => {
    if (req.url !== "/metrics") {
      res.writeHead(404).end();
      return;
    }
    scrapes++;
    res.writeHead(200, { "content-type": "text/plain; version=0.0.4" });
    res.end(render());
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  standIn.target = `127.0.0.1:${(server.address() as AddressInfo).port}`;
  return standIn;
}
