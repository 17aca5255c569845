// Standalone mode: the VMs and their policy come from the config file, every replica acts,
// a stop is the configured argv command (or a log line), Events are log lines, and state lives
// in memory only.
import type { Logger } from "@ws/protocol";
import type { CollectorConfig } from "../config.js";
import type { CollectorPolicyConfig } from "../../engine/config.js";
import type { CollectorMode } from "../mode.js";
import { staticPolicySource } from "../../model/policy-source.js";
import type { Fleet } from "../../loop/fleet.js";
import { ownerOf } from "../../outreach/notify/config.js";
import { StandaloneStarts } from "./start.js";
import { runStopCommand } from "./stop-command.js";

/** What standalone mode reads of the collector's config: its own section, the report interval, the owner label. */
export type StandaloneModeConfig = Pick<CollectorConfig, "standalone" | "reportIntervalSeconds" | "notifications">;

export function standaloneMode(
  config: StandaloneModeConfig,
  policy: CollectorPolicyConfig,
  log: Logger,
  nowMs: () => number = Date.now,
): CollectorMode {
  const command = config.standalone.stopCommand;
  const policySource = staticPolicySource(
    { ...policy.defaults, reportIntervalSeconds: config.reportIntervalSeconds },
    policy.profiles,
    policy.annotationPrefix,
    config.standalone.vms,
  );
  let fleet: Fleet | undefined;
  const starts = new StandaloneStarts({
    ...(config.standalone.startCommand ? { startCommand: config.standalone.startCommand } : {}),
    configured: () =>
      Object.keys(config.standalone.vms).map((id) => {
        const [namespace = "", name = ""] = id.split("/");
        return { namespace, name };
      }),
    labels: (vm) => policySource.metadataFor(vm).labels,
    annotations: (vm) => policySource.metadataFor(vm).annotations,
    prefix: policySource.prefix,
    owner: (vm) =>
      ownerOf(config.notifications, policySource.metadataFor(vm).labels, policySource.metadataFor(vm).annotations),
    connectedAtMs: (vm) => fleet?.view(vm, nowMs())?.connectedAtMs,
    nowMs,
  });
  return {
    name: "standalone",
    policySource,
    leader: () => true,
    fleetSize: () => Object.keys(config.standalone.vms).length,
    // The start command, and the starting page's view of the VM (platform/standalone/start.ts).
    startPlatform: starts,
    runnables: (created) => {
      fleet = created;
      return [];
    },
    actuator: {
      async stop(vm, reason, evidence) {
        if (!command) {
          log(
            "info",
            `STOP ${vm.namespace}/${vm.name} (standalone, no stopCommand configured: logged only): ${reason}`,
            { vm: `${vm.namespace}/${vm.name}` },
          );
          return { outcome: "accepted", message: "logged (no stopCommand configured)" };
        }
        const result = await runStopCommand(command, vm);
        if (result.ok) starts.recordStop(vm, reason, evidence, nowMs());
        return { outcome: result.ok ? "accepted" : "failed", message: result.message };
      },
      event(vm, type, reason, message) {
        log(type === "Warning" ? "warn" : "info", `event ${reason}: ${message}`, { vm: `${vm.namespace}/${vm.name}` });
      },
      // Standalone state lives in memory only: after a restart every idle clock starts again (later stops, never earlier).
      persist() {},
    },
  };
}
