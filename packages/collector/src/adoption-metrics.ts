// The figures a platform team reads while it adopts ws: which agent versions run (skew), and
// what ws's own stops gave back. Registered on the leader's registry by one hook in metrics.ts.
import { Gauge, type Registry } from "prom-client";
import { countAgentVersions } from "./rollout/agent-versions.js";
import type { FleetReader } from "./view.js";

export const ADOPTION_METRIC_NAMES = ["workstation_agent_versions"] as const;

export function registerAdoptionMetrics(registry: Registry, fleet: FleetReader, nowMs: () => number): void {
  new Gauge({
    name: "workstation_agent_versions",
    help: "Connected agents by their version (Hello agent_version; at most 16 labels, the rest as other).",
    labelNames: ["version"],
    registers: [registry],
    collect() {
      this.reset();
      for (const { version, agents } of countAgentVersions(fleet.views(nowMs()))) this.set({ version }, agents);
    },
  });
}
