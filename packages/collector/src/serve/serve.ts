// `ws-collector serve`: wires the agent server, the fleet, metrics and the web
// server around a mode (platform/standalone/mode.ts, Kubernetes in platform/kube/serve.ts).
import { WrongStopLedger } from "../rates/ledger.js";
import { withWrongStops } from "../rates/observer.js";
import type { Io as ProtocolIo } from "@ws/protocol";
import { readFileSync } from "node:fs";
import type { AddressInfo } from "node:net";
import v8 from "node:v8";
import * as grpc from "@grpc/grpc-js";
import { errorMessage, installUnhandledErrorPolicy, logfmtLogger, type Logger } from "@ws/protocol";
import { AgentServer } from "../agents/server.js";
import { ReloadingServerCredentials } from "../agents/tls-files.js";
import {
  agentConnectionCap,
  connectionCapWarnings,
  describeConnectionCap,
  parseOpenFileLimit,
} from "../agents/connection-cap.js";
import { DEFAULT_HANDSHAKE_TIMEOUT_MS, DEFAULT_PENDING_PER_SOURCE } from "../agents/connection-slots.js";
import { loadKey } from "../links/key-file.js";
import { budgetedLogger } from "../lib/log-budget.js";
import { CollectorConfigError, type CollectorConfig } from "../platform/config.js";
import { parseCollectorPolicyConfig, type CollectorPolicyConfig } from "../engine/config.js";
import { resolveVmPolicy } from "../model/policy-source.js";
import { httpExposureWarnings } from "../web/exposure.js";
import { BUILTIN_DEFAULT_POLICY } from "../engine/policy.js";
import { Fleet } from "../loop/fleet.js";
import type { CollectorMode } from "../platform/mode.js";
import { readCgroupMemory } from "../lib/memory/cgroup.js";
import { MemoryGuard } from "../lib/memory/guard.js";
import { createMetrics, warmPerVmSeries } from "../metrics/metrics.js";
import { TraceRecorder } from "../loop/recorder.js";
import { standaloneMode } from "../platform/standalone/mode.js";
import { CollectorStats } from "../lib/stats.js";
import { verifyToken } from "../links/agent-token.js";
import { GivenBackLedger } from "../outreach/adoption/given-back.js";
import { withGivenBack } from "../outreach/adoption/observer.js";
import { COLLECTOR_VERSION } from "../lib/version.js";
import { createWebServer, type WebOptions } from "./router.js";
import { KeepLinks } from "../comeback/keeplink/handler.js";
import { deriveLinkKey } from "../links/keep-token.js";
import { registerHostSourceMetrics } from "../loop/hostside/metrics.js";
import { prometheusClient } from "../loop/hostside/prometheus.js";
import { HostSource } from "../loop/hostside/source.js";
import { registerNotificationMetrics } from "../outreach/notify/metrics.js";
import { Outreach } from "../outreach/notify/outreach.js";
import { StartLinks } from "../comeback/start/handler.js";
import { AddressStart, createAddressServer } from "../comeback/start/address.js";
import { stopEnds, type StopEnds } from "../loop/stop-ends.js";
import { registerStartMetrics } from "../comeback/start/metrics.js";
import { deriveStartLinkKey, startLinkUrl } from "../links/start-token.js";
import type { VmKey } from "../model/vm-key.js";
import { StartTracker } from "../comeback/start/tracker.js";
import { welcomeBack } from "../comeback/start/welcome.js";

/** How often the memory guard looks at the cgroup: a burst takes seconds to grow memory, not milliseconds. */
const MEMORY_CHECK_MS = 5_000;
/**
 * Between scrapes, the per-VM /metrics text of changed VMs is built in slices of this many VMs
 * this often (metrics/metrics.ts warmPerVmSeries): at most 1,000 VMs a second, about 15 ms of the
 * event loop each time, and a scrape that mostly joins text already built.
 */
const METRICS_WARM_EVERY_MS = 250;
const METRICS_WARM_SLICE = 250;
/** A warming round is skipped when its timer fired this late: the event loop has better things to do. */
const METRICS_WARM_MAX_LAG_MS = 200;

/** The output streams serve writes to (the environment is read by the CLI before). */
export type Io = Pick<ProtocolIo, "stdout" | "stderr">;

/** The `policy:` section, parsed by the engine; any error stops the start with every problem listed. */
export function loadPolicyConfig(config: CollectorConfig): CollectorPolicyConfig {
  const parsed = parseCollectorPolicyConfig(config.policyYaml, {
    ...BUILTIN_DEFAULT_POLICY,
    reportIntervalSeconds: config.reportIntervalSeconds,
  });
  if (!parsed.ok) throw new CollectorConfigError(parsed.errors.map((error) => `policy: ${error}`));
  return parsed.config;
}

async function listenOn(server: import("node:http").Server, address: { host: string; port: number }): Promise<number> {
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(address.port, address.host, () => resolve());
  });
  return (server.address() as AddressInfo).port;
}

/** This process's open-file soft limit (/proc/self/limits); undefined where it cannot be read. */
function readOpenFileLimit(): number | undefined {
  try {
    return parseOpenFileLimit(readFileSync("/proc/self/limits", "utf8"));
  } catch {
    return undefined;
  }
}

function splitHostPort(address: string): { host: string; port: number } {
  const index = address.lastIndexOf(":");
  return { host: address.slice(0, index).replace(/^\[|\]$/g, "") || "0.0.0.0", port: Number(address.slice(index + 1)) };
}

export async function serve(config: CollectorConfig, io: Io): Promise<number> {
  const nowMs = () => Date.now();
  const log = budgetedLogger(
    logfmtLogger((line) => io.stderr.write(line), nowMs),
    { nowMs },
  );
  const key = loadKey(config.tokenKeyFile);
  const policy = loadPolicyConfig(config);
  const stats = new CollectorStats();
  const removeErrorPolicy = installUnhandledErrorPolicy({ log, counts: stats.unhandledErrors });
  const startUrl = startLinkFor(config, key);
  const mode =
    config.mode === "kubernetes"
      ? await (await import("../platform/kube/serve.js")).kubernetesMode(config, policy, log, stats, nowMs, key, {
          startUrl,
        })
      : standaloneMode(config, policy, log, nowMs);
  try {
    return await run(config, mode, key, stats, log, nowMs);
  } finally {
    removeErrorPolicy();
  }
}

/** The VM's start link, valid for start.linkTtl from `nowMs`; undefined without notifications.publicUrl. */
function startLinkFor(config: CollectorConfig, key: Buffer): (vm: VmKey, nowMs: number) => string | undefined {
  const startKey = deriveStartLinkKey(key);
  const base = config.notifications.publicUrl;
  return (vm, nowMs) => (base ? startLinkUrl(base, startKey, vm, nowMs, config.start.linkTtlSeconds) : undefined);
}

/** Host-side evidence (hostside/): KubeVirt's per-VM metrics, queried on their own cadence. */
function startHostSource(
  config: CollectorConfig,
  fleet: Fleet,
  mode: CollectorMode,
  log: Logger,
  nowMs: () => number,
): HostSource {
  const host = config.hostSide!;
  let client: ReturnType<typeof prometheusClient>;
  try {
    client = prometheusClient({ ...host.prometheus });
  } catch (error) {
    throw new CollectorConfigError([`hostSide.prometheus: ${errorMessage(error)}`]);
  }
  const source = new HostSource({
    client,
    sink: fleet,
    log,
    nowMs,
    intervalSeconds: host.intervalSeconds,
    windowSeconds: host.windowSeconds,
    labels: host.labels,
    connectionsWitness: host.connectionsWitness,
    acting: mode.leader,
  });
  source.start();
  return source;
}

async function run(
  config: CollectorConfig,
  mode: CollectorMode,
  key: Buffer,
  stats: CollectorStats,
  log: Logger,
  nowMs: () => number,
): Promise<number> {
  const recorder = config.recordTrace
    ? new TraceRecorder(config.recordTrace, { onError: (error) => log("warn", `trace recording: ${error.message}`) })
    : undefined;
  // Issue 17: history, webhooks and keep-running links, wired through the fleet's observer hook.
  const linkKey = deriveLinkKey(key);
  const startUrl = startLinkFor(config, key);
  let fleetRef: Fleet | undefined;
  const fleetOf = (): Fleet => fleetRef!;
  const outreach = new Outreach({
    config: config.notifications,
    log,
    metadataFor: (vm) => mode.policySource.metadataFor(vm),
    prefix: mode.policySource.prefix,
    linkKey,
    startUrl,
    // The fleet exists by the time a notice goes out (outreach only observes its decisions).
    stopEndsOf: (vm): StopEnds | undefined => stopEnds(fleetOf().loopState(vm)?.latest?.report),
  });
  // What ws's own stops gave back (docs/metrics.md, "What ws gave back").
  const givenBack = new GivenBackLedger(nowMs());
  // Issue 38: how often ws's stops were wrong, per profile (rates/ledger.ts).
  const wrongStops = new WrongStopLedger(nowMs());
  const fleet = new Fleet({
    log,
    stats,
    observer: withWrongStops(
      withGivenBack(outreach, givenBack, (vm) => mode.vmDetails?.(vm), nowMs),
      wrongStops,
    ),
    nowMs,
    actuator: mode.actuator,
    policySource: mode.policySource,
    acting: mode.leader,
    reportHeartbeatMs: config.reportHeartbeatSeconds * 1000,
    ...(mode.restore ? { restore: mode.restore } : {}),
    ...(mode.vmRunning ? { vmRunning: mode.vmRunning } : {}),
    ...(mode.vmDetails ? { vmDetails: mode.vmDetails } : {}),
    // Issue 24: the welcome back, in the first Directive of an agent of a boot after ws's stop.
    greeting: (vm, bootId) => {
      const now = nowMs();
      return welcomeBack(mode.startPlatform?.facts(vm)?.lastStop, bootId, now, startUrl(vm, now));
    },
    authenticate: async (vm, token, peer) => {
      if (!mode.leader())
        return {
          ok: false,
          code: grpc.status.UNAVAILABLE,
          kind: "not-leader",
          reason: "this collector replica is not the leader; reconnect",
        };
      if (!verifyToken(key, vm.namespace, vm.name, token)) {
        return {
          ok: false,
          code: grpc.status.UNAUTHENTICATED,
          reason: `token does not match VM ${vm.namespace}/${vm.name} (ws-collector token prints the right one)`,
        };
      }
      return mode.authenticate ? mode.authenticate(vm, peer) : { ok: true };
    },
    ...(recorder ? { record: (event) => recorder.record(event) } : {}),
  });
  fleetRef = fleet;
  const agents = new AgentServer({
    sink: fleet,
    stats,
    log,
    nowMs,
    ...(config.grpc.hellosPerSecond !== undefined ? { hellosPerSecond: config.grpc.hellosPerSecond } : {}),
  });
  // A renewed certificate is served without a restart (agents/tls-files.ts).
  const tls = config.grpc.certFile
    ? ReloadingServerCredentials.fromFiles({ certFile: config.grpc.certFile, keyFile: config.grpc.keyFile! }, log)
    : undefined;
  tls?.watch(config.grpc.certCheckSeconds * 1000);
  const credentials = tls ?? grpc.ServerCredentials.createInsecure();
  const stopMode = mode.start ? await mode.start(fleet) : async () => {};
  // One descriptor per agent: the cap keeps the rest for the API server and the Lease (agents/connection-cap.ts).
  const connectionCap = agentConnectionCap(readOpenFileLimit(), config.grpc.maxConnections);
  for (const warning of connectionCapWarnings(connectionCap, mode.fleetSize()))
    log("warn", warning, {
      vms: mode.fleetSize(),
      cap: connectionCap.limit,
      ...(connectionCap.openFileLimit !== undefined ? { nofile: connectionCap.openFileLimit } : {}),
    });
  const grpcPort = await agents.listen(
    {
      ...splitHostPort(config.grpc.listen),
      ...(connectionCap.limit !== undefined ? { maxConnections: connectionCap.limit } : {}),
      handshakeTimeoutMs: config.grpc.handshakeTimeoutMs ?? DEFAULT_HANDSHAKE_TIMEOUT_MS,
      maxPendingConnectionsPerSource:
        config.grpc.maxPendingConnectionsPerSource ?? DEFAULT_PENDING_PER_SOURCE[config.mode],
    },
    credentials,
  );
  const guard = new MemoryGuard({
    sample: () => {
      const heap = v8.getHeapStatistics();
      return {
        cgroup: readCgroupMemory(config.memory.cgroupRoot),
        heapUsedBytes: heap.used_heap_size,
        heapLimitBytes: heap.heap_size_limit,
      };
    },
    shedRatio: config.memory.shedRatio,
    log: (level, message, fields) => log(level, message, fields),
    // The detail series go by themselves (vmSeries below reads guard.shedding); the chart points are dropped.
    sheddable: [outreach.history],
  });
  guard.check();
  const memoryTimer = setInterval(() => guard.check(), MEMORY_CHECK_MS);
  memoryTimer.unref();
  const registry = createMetrics(fleet, stats, nowMs, () => agents.streamCount, {
    agentConnections: () => ({ open: agents.connectionCount, limit: agents.connectionLimit }),
    ...(tls ? { certificates: () => [{ cert: "grpc", expiryMs: tls.expiryMs }] } : {}),
    leader: mode.leader,
    mode: mode.name,
    vmSeries: () => (guard.shedding ? "default" : config.metrics.vmSeries),
    memory: () => {
      const sample = guard.sample;
      return {
        workingSetBytes: sample?.cgroup?.workingSetBytes ?? process.memoryUsage.rss(),
        ...(sample?.cgroup?.limitBytes !== undefined ? { limitBytes: sample.cgroup.limitBytes } : {}),
        shedding: guard.shedding,
      };
    },
    givenBack: (now) => givenBack.rows(now),
    ...(mode.dormant ? { dormant: mode.dormant.report } : {}),
  });
  registerNotificationMetrics(registry, outreach.sender);
  // Issue 38: dormant VMs' owners get their monthly reminder through the VM's webhooks.
  mode.dormant?.onReminder((vm, metadata) => outreach.remindDormant(vm, metadata, nowMs()));
  // Idle-time work: a timer that fires late says the event loop is busy (a reconnect burst), and the scrape builds what is left as it always did.
  let warmDueAt = performance.now() + METRICS_WARM_EVERY_MS;
  const metricsWarmTimer = setInterval(() => {
    const late = performance.now() - warmDueAt;
    warmDueAt = performance.now() + METRICS_WARM_EVERY_MS;
    if (late <= METRICS_WARM_MAX_LAG_MS) warmPerVmSeries(registry, METRICS_WARM_SLICE);
  }, METRICS_WARM_EVERY_MS);
  metricsWarmTimer.unref();
  const hostSource = config.hostSide ? startHostSource(config, fleet, mode, log, nowMs) : undefined;
  if (hostSource) registerHostSourceMetrics(registry, hostSource.status);
  const keepLinks = new KeepLinks({
    granter: fleet,
    linkKey,
    choicesHours: config.notifications.keepChoicesHours,
    nowMs,
    log,
    audit: (vm, message) => mode.actuator.event(vm, "Normal", "KeepRunningLink", message),
  });
  // Issue 24: start links and the starting page (docs/coming-back.md).
  const startTracker = new StartTracker();
  // Every profile from 0, so that increase() counts a profile's first dispute too.
  const disputes = new Map<string, number>(["", ...Object.keys(mode.policySource.profiles)].map((p) => [p, 0]));
  const startLinks = mode.startPlatform
    ? new StartLinks({
        platform: mode.startPlatform,
        tracker: startTracker,
        linkKey: deriveStartLinkKey(key),
        config: config.start,
        prefix: mode.policySource.prefix,
        agentOf: (vm) => {
          const loop = fleet.loopState(vm);
          if (!loop) return undefined;
          const view = fleet.view(vm, nowMs());
          return {
            ...(view?.connectedAtMs !== undefined ? { connectedAtMs: view.connectedAtMs } : {}),
            ...(loop.latest ? { latest: loop.latest } : {}),
            profile: loop.policy?.profile ?? "",
          };
        },
        nowMs,
        log,
        audit: (vm, message) => mode.actuator.event(vm, "Normal", "Started", message),
        disputed: (vm, dispute, stop) => {
          const profile = fleet.loopState(vm)?.policy?.profile ?? "";
          disputes.set(profile, (disputes.get(profile) ?? 0) + 1);
          wrongStops.disputed(profile, nowMs());
          const what = dispute.what ? `"${dispute.what}"` : "no details given";
          mode.actuator.event(
            vm,
            "Warning",
            "StopDisputed",
            `${dispute.by} says the stop of ${new Date(stop.atMs).toISOString()} was a mistake: ${what}; the stop: ${stop.reason}; ${dispute.knob}`,
          );
          // A VM stopped before this collector started has no loop (no agent since): its policy
          // comes from its labels and annotations, so its dispute is still sent (issue 34).
          const policy = fleet.loopState(vm)?.policy ?? resolveVmPolicy(mode.policySource, vm, undefined).policy;
          outreach.disputed(
            {
              kind: "dispute",
              vm,
              atMs: dispute.atMs,
              mode: policy.mode,
              reason: `${what} (the stop: ${stop.reason})`,
              hint: dispute.knob,
              explanation: stop.reason,
            },
            policy,
          );
        },
      })
    : undefined;
  registerStartMetrics(registry, startTracker, () => disputes);
  const startWatch = setInterval(() => startLinks?.watch(), 1000);
  startWatch.unref();
  const webOptions = {
    fleet,
    registry,
    nowMs,
    // Every replica that got this far is Ready (the inventory synced, both ports open); the
    // leader's pod label, not readiness, routes the agents (platform/kube/leader-label.ts).
    ready: () => true,
    info: () => ({ version: COLLECTOR_VERSION, mode: mode.name, leader: mode.leader() }),
    history: outreach.history,
    keepLinks,
    ...(startLinks ? { startLinks } : {}),
    ...(mode.startPlatform ? { startPlatform: mode.startPlatform } : {}),
    leaderUrl: config.start.leaderUrl,
    replica: config.kubernetes.identity,
    startUrl,
    givenBack: (now) => givenBack.rows(now),
    ...(mode.dormant ? { dormant: mode.dormant.report } : {}),
    rates: (now) => wrongStops.rates(now),
    onRefused: (why, detail) => {
      stats.countHttpRefusal(why);
      log(why === "handler-error" ? "error" : "warn", `HTTP request refused: ${why} (${detail})`, { reason: why });
    },
  } satisfies WebOptions;
  // With metricsListen, Prometheus and the probes get their own port and the pages' port serves
  // no /metrics (it sits behind the site's auth proxy; the series name every VM and owner).
  const web = createWebServer({
    ...webOptions,
    routes: config.http.metricsListen ? "pages" : "all",
    ...(config.http.identity ? { identity: config.http.identity } : {}),
  });
  const probes = config.http.metricsListen ? createWebServer({ ...webOptions, routes: "probes" }) : undefined;
  const http = splitHostPort(config.http.listen);
  const httpPort = await listenOn(web, http);
  const metricsAddress = config.http.metricsListen ? splitHostPort(config.http.metricsListen) : undefined;
  const metricsPort = probes && metricsAddress ? await listenOn(probes, metricsAddress) : undefined;
  // The workstations' fixed addresses: the gateway's error page for a stopped VM (docs/coming-back.md).
  const wake =
    config.start.wakeListen && startLinks && mode.startPlatform
      ? createAddressServer(
          new AddressStart({
            platform: mode.startPlatform,
            links: startLinks,
            ...(config.http.identity ? { identity: config.http.identity } : {}),
            nowMs,
            leader: mode.leader,
          }),
          (message) => log("error", `fixed address: ${message}`),
        )
      : undefined;
  const wakeAddress = wake ? splitHostPort(config.start.wakeListen) : undefined;
  const wakePort = wake && wakeAddress ? await listenOn(wake, wakeAddress) : undefined;
  fleet.start();
  log("info", "collector serving", {
    mode: mode.name,
    version: COLLECTOR_VERSION,
    grpc: `${splitHostPort(config.grpc.listen).host}:${grpcPort}`,
    agentConnections: describeConnectionCap(connectionCap),
    http: `${http.host}:${httpPort}`,
    ...(metricsAddress ? { metrics: `${metricsAddress.host}:${metricsPort}` } : {}),
    ...(wakeAddress ? { wake: `${wakeAddress.host}:${wakePort}` } : {}),
    pages: config.http.identity ? `behind login (${config.http.identity.userHeader})` : "open",
    tls: Boolean(config.grpc.certFile),
    webhooks:
      config.notifications.webhooks.length +
      Object.values(config.notifications.profiles).reduce((n, list) => n + list.length, 0),
    keepLinks: config.notifications.publicUrl ? "on" : "off (notifications.publicUrl unset)",
    hostSide: hostSource ? hostSource.status.endpoint : "off (hostSide unset)",
    ...(mode.name === "standalone"
      ? {
          stop: config.standalone.stopCommand ? config.standalone.stopCommand.join(" ") : "log only",
          start: config.standalone.startCommand ? config.standalone.startCommand.join(" ") : "none (the page says how)",
        }
      : {}),
  });
  if (!config.notifications.publicUrl)
    log(
      "warn",
      'no way back: notifications.publicUrl is unset, so no notice, webhook or welcome back carries a keep-running or start link; set it to the address users reach the pages at (docs/install.md, "The way back"). Enforce mode in Kubernetes refuses to start without it',
    );
  for (const warning of httpExposureWarnings({
    mode: mode.name,
    identity: config.http.identity !== undefined,
    metricsListen: Boolean(config.http.metricsListen),
  }))
    log("warn", warning);
  if (!config.grpc.certFile)
    log(
      "warn",
      "gRPC without TLS: tokens travel in clear; set grpc.certFile/keyFile or use a mesh outside a test setup",
    );

  await new Promise<void>((resolve) => {
    process.once("SIGTERM", () => resolve());
    process.once("SIGINT", () => resolve());
  });
  log("info", "shutting down");
  clearInterval(memoryTimer);
  tls?.stop();
  clearInterval(metricsWarmTimer);
  fleet.stopTicking();
  clearInterval(startWatch);
  hostSource?.stop();
  await stopMode();
  await agents.close();
  for (const server of [web, ...(probes ? [probes] : []), ...(wake ? [wake] : [])])
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections?.();
    });
  await recorder?.close();
  outreach.sender.close();
  return 0;
}
