// The figures a platform team reads while it adopts ws: which agent versions run (skew), and
// what ws's own stops gave back. Registered on the leader's registry by one hook in metrics/metrics.ts.
import { Counter, Gauge, type Registry } from "prom-client";
import type { GivenBackRow } from "../outreach/adoption/given-back.js";
import { countAgentVersions } from "./agent-versions.js";
import type { FleetReader } from "../model/vm-view.js";

/** The freed counters: name, help, and the row's field. */
const FREED: ReadonlyArray<[string, string, keyof Omit<GivenBackRow, "namespace" | "owner" | "stoppedNow">]> = [
  [
    "workstation_freed_vm_seconds_total",
    "Seconds VMs stopped by ws stayed stopped (ws's own accepted stops only: not VMs stopped by someone else or created Halted), by namespace and owner.",
    "vmSeconds",
  ],
  [
    "workstation_freed_cpu_core_seconds_total",
    "CPU core-seconds given back by ws's stops: stopped seconds × the cores the VM asks for, by namespace and owner.",
    "cpuCoreSeconds",
  ],
  [
    "workstation_freed_memory_byte_seconds_total",
    "Memory byte-seconds given back by ws's stops: stopped seconds × the VM's memory, by namespace and owner.",
    "memoryByteSeconds",
  ],
  [
    "workstation_freed_gpu_seconds_total",
    "GPU-seconds given back by ws's stops: stopped seconds × the VM's GPUs, by namespace and owner.",
    "gpuSeconds",
  ],
];

export function registerAdoptionMetrics(
  registry: Registry,
  fleet: FleetReader,
  nowMs: () => number,
  givenBack?: (nowMs: number) => GivenBackRow[],
): void {
  // One snapshot per scrape: the four counters of a row read the same instant (kept until the
  // scrape's synchronous run of collect() calls is over).
  let snapshot: GivenBackRow[] | undefined;
  const rows = (): GivenBackRow[] => {
    if (snapshot === undefined) {
      snapshot = givenBack?.(nowMs()) ?? [];
      setImmediate(() => {
        snapshot = undefined;
      });
    }
    return snapshot;
  };
  for (const [name, help, field] of FREED) {
    new Counter({
      name,
      help,
      labelNames: ["namespace", "owner"],
      registers: [registry],
      collect() {
        this.reset();
        for (const row of rows()) this.inc({ namespace: row.namespace, owner: row.owner }, row[field]);
      },
    });
  }
  new Gauge({
    name: "workstation_agent_versions",
    help: "Connected agents by their version (Hello agent_version; at most 16 labels, the rest as other).",
    labelNames: ["version"],
    registers: [registry],
    collect() {
      this.reset();
      const vms = fleet.agents ? [...fleet.agents()] : fleet.views(nowMs());
      for (const { version, agents } of countAgentVersions(vms)) this.set({ version }, agents);
    },
  });
}
