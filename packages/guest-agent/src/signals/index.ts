// The signal set the agent samples, built from its configuration.
import type { AgentConfig } from "../config.js";
import { createCodeServerSignal } from "./code-server.js";
import { createDesktopSignal } from "./desktop.js";
import { createDiskSignal } from "./disk.js";
import { createGpuSignal } from "./gpu.js";
import { createHomeScan } from "./home-scan.js";
import { createInhibitorsSignal } from "./inhibitors.js";
import { createJupyterSignal } from "./jupyter.js";
import { createProcessScan } from "./process-scan.js";
import { createRemoteSessionsSignal } from "./remote-sessions.js";
import { createSessionsSignal } from "./sessions.js";
import { createSystemSignal } from "./system.js";
import type { Signal } from "./types.js";
import { createWatchedServices } from "./watched-services.js";

/** Every signal except leases, which the lease service provides. */
export function createSignals(config: AgentConfig): Array<Signal<unknown>> {
  // Jupyter and code-server look into the same homes: listed once per sample, walks shared.
  const homes = createHomeScan();
  // Jupyter's discovery tells the remote-sessions signal which forwards reach a Jupyter server.
  const services = createWatchedServices();
  // System and remote-sessions look at every process: /proc listed and each stat read once per sample.
  const processes = createProcessScan();
  return [
    createJupyterSignal({ urls: config.jupyter.urls, timeoutMs: config.jupyter.timeoutMs, homes, services }),
    createSessionsSignal(),
    createRemoteSessionsSignal({ services, processes }),
    createDesktopSignal(),
    createCodeServerSignal(homes),
    createGpuSignal({
      command: config.gpu.command,
      intervalMs: config.gpu.intervalMs,
      timeoutMs: config.gpu.timeoutMs,
    }),
    createSystemSignal(processes),
    createInhibitorsSignal(),
    createDiskSignal({ mounts: config.disk.mounts }),
  ] as Array<Signal<unknown>>;
}
