// What the fleet holds and costs (docs/cost.md), as counters per namespace, owner and profile:
// never per VM, so the per-VM series budget stays as it is (docs/metrics.md, "Series per VM").
// A restart starts the counters again from 0; Prometheus's increase() takes that as a counter
// reset, so the recording rules' 30-day figures stay right (packaging/prometheus/workstation-alerts.yaml).
import { Counter, type Registry } from "prom-client";
import { type ResourceSeconds, SPEND_KINDS, type SpendKind, type SpendRow } from "../outreach/money/spend.js";

/** The label value of each kind: held, in_use, given_back, would_give_back. */
export const SPEND_KIND_LABEL: Record<SpendKind, string> = {
  held: "held",
  inUse: "in_use",
  givenBack: "given_back",
  wouldGiveBack: "would_give_back",
};
/** Resource-seconds for these kinds only: given back is already workstation_freed_*_total. */
const RESOURCE_KINDS: readonly SpendKind[] = ["held", "inUse", "wouldGiveBack"];
const RESOURCES: ReadonlyArray<[string, keyof ResourceSeconds]> = [
  ["cpu_core", "cpuCore"],
  ["memory_gib", "memoryGiB"],
  ["gpu", "gpu"],
];

export function registerSpendMetrics(registry: Registry, rows: () => SpendRow[], priced: boolean): void {
  // One snapshot per scrape, as the given-back counters do: both families read the same instant.
  let snapshot: SpendRow[] | undefined;
  const current = (): SpendRow[] => {
    if (snapshot === undefined) {
      snapshot = rows();
      setImmediate(() => {
        snapshot = undefined;
      });
    }
    return snapshot;
  };
  new Counter({
    name: "workstation_resource_seconds_total",
    help: "Resource-seconds VMs held while running (kind=held), while in use: a person or accepted work, the engine's Active (in_use), and in observe mode past the would-stop moment: what enforce mode would have given back (would_give_back); resource is cpu_core, memory_gib or gpu, from the VM's spec. By namespace, owner and profile.",
    labelNames: ["namespace", "owner", "profile", "kind", "resource"],
    registers: [registry],
    collect() {
      this.reset();
      for (const row of current())
        for (const kind of RESOURCE_KINDS)
          for (const [resource, field] of RESOURCES) {
            const value = row.spend[kind][field];
            if (value > 0)
              this.inc(
                {
                  namespace: row.namespace,
                  owner: row.owner,
                  profile: row.profile,
                  kind: SPEND_KIND_LABEL[kind],
                  resource,
                },
                value,
              );
          }
    },
  });
  if (!priced) return;
  new Counter({
    name: "workstation_spend_total",
    help: "Money, in the configured prices' currency: what VMs held while running (kind=held), while in use (in_use), what ws's stops gave back (given_back) and what enforce mode would have given back in observe mode (would_give_back). By namespace, owner and profile.",
    labelNames: ["namespace", "owner", "profile", "kind"],
    registers: [registry],
    collect() {
      this.reset();
      for (const row of current())
        for (const kind of SPEND_KINDS)
          if (row.spend[kind].money > 0)
            this.inc(
              { namespace: row.namespace, owner: row.owner, profile: row.profile, kind: SPEND_KIND_LABEL[kind] },
              row.spend[kind].money,
            );
    },
  });
}
