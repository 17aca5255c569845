// `ws-collector serve`: wires the agent server, the fleet, the actuator, metrics and the web server.
import { readFileSync } from "node:fs";
import type { AddressInfo } from "node:net";
import * as grpc from "@grpc/grpc-js";
import { logfmtLogger, type Logger } from "@ws/protocol";
import { AgentServer, type VmKey } from "./agents/server.js";
import { loadKey } from "./cli.js";
import type { CollectorConfig } from "./config.js";
import { parseCollectorPolicyConfig } from "./engine/config.js";
import { Fleet, type Actuator } from "./fleet.js";
import { createMetrics } from "./metrics.js";
import { staticPolicySource } from "./policy-source.js";
import { TraceRecorder } from "./replay/recorder.js";
import { runStopCommand } from "./standalone/stop-command.js";
import { CollectorStats } from "./stats.js";
import { verifyToken } from "./token.js";
import { COLLECTOR_VERSION } from "./version.js";
import { createWebServer } from "./web/server.js";

interface Io {
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream;
}

function standaloneActuator(config: CollectorConfig, log: Logger): Actuator {
  const command = config.standalone.stopCommand;
  return {
    async stop(vm: VmKey, reason: string) {
      if (!command) {
        log("info", `STOP ${vm.namespace}/${vm.name} (standalone, no stopCommand configured: logged only): ${reason}`, { vm: `${vm.namespace}/${vm.name}` });
        return { outcome: "accepted" as const, message: "logged (no stopCommand configured)" };
      }
      const result = await runStopCommand(command, vm);
      return { outcome: result.ok ? ("accepted" as const) : ("failed" as const), message: result.message };
    },
    event(vm, type, reason, message) {
      log(type === "Warning" ? "warn" : "info", `event ${reason}: ${message}`, { vm: `${vm.namespace}/${vm.name}` });
    },
    // Standalone state lives in memory only: a restart starts every VM's idle clock again (never earlier stops).
    persist() {},
  };
}

function splitHostPort(address: string): { host: string; port: number } {
  const index = address.lastIndexOf(":");
  return { host: address.slice(0, index).replace(/^\[|\]$/g, "") || "0.0.0.0", port: Number(address.slice(index + 1)) };
}

export async function serve(config: CollectorConfig, io: Io): Promise<number> {
  const nowMs = () => Date.now();
  const log = logfmtLogger((line) => io.stderr.write(line), nowMs);
  if (config.mode === "kubernetes") {
    const { serveKubernetes } = await import("./kube/serve.js");
    return serveKubernetes(config, io, log);
  }
  const key = loadKey(config.tokenKeyFile);
  const policyConfig = parseCollectorPolicyConfig(config.policyYaml);
  const stats = new CollectorStats();
  const recorder = config.recordTrace ? new TraceRecorder(config.recordTrace) : undefined;
  const fleet = new Fleet({
    log,
    nowMs,
    actuator: standaloneActuator(config, log),
    authenticate: (vm, token) =>
      verifyToken(key, vm.namespace, vm.name, token)
        ? { ok: true }
        : { ok: false, code: grpc.status.UNAUTHENTICATED, reason: `token does not match VM ${vm.namespace}/${vm.name} (ws-collector token prints the right one)` },
    policySource: staticPolicySource(
      { ...policyConfig.defaults, reportIntervalSeconds: config.reportIntervalSeconds },
      policyConfig.profiles,
      "workstation.aik8s.run/",
      config.standalone.vms,
    ),
    ...(recorder ? { record: (event) => recorder.record(event) } : {}),
  });
  const agents = new AgentServer({ sink: fleet, stats, log, nowMs });
  const credentials = config.grpc.certFile
    ? grpc.ServerCredentials.createSsl(null, [{ cert_chain: readFileSync(config.grpc.certFile), private_key: readFileSync(config.grpc.keyFile!) }], false)
    : grpc.ServerCredentials.createInsecure();
  const grpcPort = await agents.listen(config.grpc.listen, credentials);
  const registry = createMetrics(fleet, stats, nowMs, () => agents.streamCount);
  const web = createWebServer({
    fleet,
    registry,
    nowMs,
    ready: () => true,
    info: () => ({ version: COLLECTOR_VERSION, mode: "standalone", leader: true }),
  });
  const http = splitHostPort(config.http.listen);
  await new Promise<void>((resolve, reject) => {
    web.once("error", reject);
    web.listen(http.port, http.host, () => resolve());
  });
  const httpPort = (web.address() as AddressInfo).port;
  fleet.start(config.tickSeconds);
  log("info", "collector serving", {
    mode: "standalone",
    version: COLLECTOR_VERSION,
    grpc: `${splitHostPort(config.grpc.listen).host}:${grpcPort}`,
    http: `${http.host}:${httpPort}`,
    tls: Boolean(config.grpc.certFile),
    stop: config.standalone.stopCommand ? config.standalone.stopCommand.join(" ") : "log only",
  });
  if (!config.grpc.certFile) log("warn", "gRPC without TLS: tokens travel in clear; use grpc.certFile/keyFile or a mesh outside a test setup");

  await new Promise<void>((resolve) => {
    process.once("SIGTERM", () => resolve());
    process.once("SIGINT", () => resolve());
  });
  log("info", "shutting down");
  fleet.stopTicking();
  await agents.close();
  await new Promise<void>((resolve) => web.close(() => resolve()));
  web.closeAllConnections?.();
  await recorder?.close();
  return 0;
}
