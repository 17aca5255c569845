// Dormant workstations in /metrics (docs/metrics.md, "Dormant workstations"): bounded series,
// per namespace and StorageClass, never per VM — the fleet page and /api/dormant list the VMs.
import { Gauge, type Registry } from "prom-client";
import { type DormantVm, dormantTotals } from "./report.js";

export function registerDormantMetrics(registry: Registry, report: () => DormantVm[]): void {
  const fields = [
    [
      "workstation_dormant_vms",
      "VMs stopped longer than dormant.after (default 30 days), by namespace and the StorageClass of their disks (a VM with disks of two classes counts under each; none: no PVC).",
      "vms",
    ],
    [
      "workstation_dormant_disk_bytes",
      "Bytes of PVC capacity held by dormant VMs (stopped longer than dormant.after), by namespace and StorageClass.",
      "bytes",
    ],
  ] as const;
  for (const [name, help, field] of fields)
    new Gauge({
      name,
      help,
      labelNames: ["namespace", "storageclass"],
      registers: [registry],
      collect() {
        this.reset();
        for (const row of dormantTotals(report()))
          this.set({ namespace: row.namespace, storageclass: row.storageClass }, row[field]);
      },
    });
}
