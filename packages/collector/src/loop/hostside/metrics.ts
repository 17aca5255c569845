// The host-side source's own health, built at scrape time from its status.
import { Counter, Gauge, type Registry } from "prom-client";
import type { HostSourceStatus } from "./source.js";

export function registerHostSourceMetrics(registry: Registry, status: HostSourceStatus): void {
  new Gauge({
    name: "workstation_host_source_up",
    help: "1 when the last round of host-side queries to Prometheus succeeded, 0 when it failed (no VM is judged on the host side then).",
    registers: [registry],
    collect() {
      if (status.lastRoundOk !== undefined) this.set(status.lastRoundOk ? 1 : 0);
    },
  });
  new Counter({
    name: "workstation_host_source_rounds_total",
    help: "Rounds of host-side queries to Prometheus, by outcome (ok, failed).",
    labelNames: ["outcome"],
    registers: [registry],
    collect() {
      this.reset();
      this.inc({ outcome: "ok" }, status.rounds - status.failures);
      this.inc({ outcome: "failed" }, status.failures);
    },
  });
  new Gauge({
    name: "workstation_host_source_impossible_vms",
    help: "VMs whose host-side reading failed in the last successful round because Prometheus answered what cannot be true for them (below zero, NaN, Inf, stamped in the future).",
    registers: [registry],
    collect() {
      if (status.lastImpossibleVms !== undefined) this.set(status.lastImpossibleVms);
    },
  });
  new Gauge({
    name: "workstation_host_source_vms",
    help: "VMs with KubeVirt series in the last successful round of host-side queries.",
    registers: [registry],
    collect() {
      if (status.lastVms !== undefined) this.set(status.lastVms);
    },
  });
}
