// Standalone mode: the VMs and their policy come from the config file, every replica acts,
// a stop is the configured argv command (or a log line), Events are log lines, and state lives
// in memory only.
import type { Logger } from "@ws/protocol";
import type { CollectorConfig } from "../config.js";
import type { CollectorPolicyConfig } from "../engine/config.js";
import type { CollectorMode } from "../mode.js";
import { staticPolicySource } from "../policy-source.js";
import { runStopCommand } from "./stop-command.js";

export function standaloneMode(config: CollectorConfig, policy: CollectorPolicyConfig, log: Logger): CollectorMode {
  const command = config.standalone.stopCommand;
  return {
    name: "standalone",
    policySource: staticPolicySource(
      { ...policy.defaults, reportIntervalSeconds: config.reportIntervalSeconds },
      policy.profiles,
      policy.annotationPrefix,
      config.standalone.vms,
    ),
    leader: () => true,
    actuator: {
      async stop(vm, reason) {
        if (!command) {
          log(
            "info",
            `STOP ${vm.namespace}/${vm.name} (standalone, no stopCommand configured: logged only): ${reason}`,
            { vm: `${vm.namespace}/${vm.name}` },
          );
          return { outcome: "accepted", message: "logged (no stopCommand configured)" };
        }
        const result = await runStopCommand(command, vm);
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
