// `ws-collector serve`, the composition root: builds the fleet, the agent server, metrics and
// the HTTP servers around a mode (platform/standalone/mode.ts, Kubernetes in
// platform/kube/serve.ts), and registers every part that starts and stops with one Manager
// (serve/manager.ts), which starts them in order and stops them in reverse.
import { WrongStopLedger } from "../outreach/rates/ledger.js";
import { withWrongStops } from "../outreach/rates/observer.js";
import type { Io as ProtocolIo } from "@ws/protocol";
import { readFileSync } from "node:fs";
import type { AddressInfo } from "node:net";
import v8 from "node:v8";
import * as grpc from "@grpc/grpc-js";
import {
  errorMessage,
  formatDuration,
  installUnhandledErrorPolicy,
  logfmtLogger,
  type Logger,
  type Report,
} from "@ws/protocol";
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
import { FleetSpend, SPEND_TICK_MS, spendFactsOf } from "../outreach/money/fleet-spend.js";
import { withSpend } from "../outreach/money/observer.js";
import { registerSpendMetrics } from "../metrics/spend-metrics.js";
import { withGivenBack } from "../outreach/adoption/observer.js";
import { COLLECTOR_VERSION } from "../lib/version.js";
import { createWebServer, type WebOptions } from "./router.js";
import { Manager } from "./manager.js";
import { intervalRunnable, runnableOf, type Runnable } from "../lib/runnable.js";
import type { Registry } from "prom-client";
import { type AgentSession, AgentServer, type AuthResult } from "../agents/server.js";
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
import { EntryProber, sshAnswers } from "../comeback/wait/probe.js";
import type { PlacementNews } from "../comeback/wait/placement.js";
import { welcomeBack } from "../comeback/start/welcome.js";
import { ScheduleRunner } from "../comeback/schedule/runner.js";
import { ScheduleEditor } from "../comeback/schedule/editor.js";
import { SchedulePage } from "../comeback/schedule/page.js";
import { ScheduleAgentRequests } from "../comeback/schedule/agent-requests.js";
import { scheduleOf } from "../comeback/schedule/schedules.js";
import { registerWarmMetrics, WarmRunner } from "../comeback/warm/runner.js";
import { parseWarmStarts, WARM_STARTS_ANNOTATION, warmWaitingPolicy } from "../comeback/warm/starts.js";
import type { Policy } from "../engine/types.js";

/** How often the memory guard looks at the cgroup: a burst takes seconds to grow memory, not milliseconds. */
const MEMORY_CHECK_MS = 5_000;
/** A scheduled start missed by more than this (the collector was down) is not made up for. */
const SCHEDULE_CATCH_UP_MS = 15 * 60_000;
/** A scheduled start the platform refused is tried again this often, for at most an hour. */
const SCHEDULE_RETRY_MS = 60_000;
const SCHEDULE_GIVE_UP_MS = 60 * 60_000;
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

/** Host-side evidence (hostside/): KubeVirt's per-VM metrics, queried on their own cadence once started. */
function hostSourceFor(
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
  return new HostSource({
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
}

/** What run() builds before anything starts, passed between the functions that build and register it. */
interface Wiring {
  config: CollectorConfig;
  mode: CollectorMode;
  key: Buffer;
  stats: CollectorStats;
  log: Logger;
  nowMs: () => number;
  startUrl: (vm: VmKey, nowMs: number) => string | undefined;
  /** The profiles' start schedules (policy.profiles.NAME.schedule); a VM's own annotation wins. */
  profileSchedules: Readonly<Record<string, string>>;
  /** The starts asked for: the start links' and the welcome back's (how long a start waited to be placed). */
  startTracker: StartTracker;
}

/**
 * Builds the collector around `mode` and registers its runnables with one Manager, in the order
 * they may start; it stops them in reverse. A server that must close after the parts that feed
 * it (the agent server after the mode's elector, the HTTP servers after the agents) is
 * registered as its own runnable before them, and its port opens in a later one.
 */
async function run(
  config: CollectorConfig,
  mode: CollectorMode,
  key: Buffer,
  stats: CollectorStats,
  log: Logger,
  nowMs: () => number,
): Promise<number> {
  const wiring: Wiring = {
    config,
    mode,
    key,
    stats,
    log,
    nowMs,
    startUrl: startLinkFor(config, key),
    // Validated when the collector started (loadPolicyConfig): parsing it again cannot fail.
    profileSchedules: loadPolicyConfig(config).profileSchedules ?? {},
    startTracker: new StartTracker(),
  };
  const manager = new Manager(log);
  const collector = buildCollector(wiring, () => manager.ready());
  for (const runnable of collector.runnables) manager.add(runnable);
  await manager.start();
  logServing(wiring, collector.serving());
  await new Promise<void>((resolve) => {
    process.once("SIGTERM", () => resolve());
    process.once("SIGINT", () => resolve());
  });
  log("info", "shutting down");
  await manager.stop();
  return 0;
}

/** Everything the collector runs, built and not started: its runnables in start order, and where it serves once started. */
function buildCollector(
  wiring: Wiring,
  ready: () => boolean,
): { runnables: Runnable[]; serving: () => Parameters<typeof logServing>[1] } {
  const { config, mode, log, nowMs } = wiring;
  const recorder = config.recordTrace
    ? new TraceRecorder(config.recordTrace, { onError: (error) => log("warn", `trace recording: ${error.message}`) })
    : undefined;
  const warmRef: WarmRef = {};
  const { fleet, outreach, givenBack, spend, wrongStops } = buildFleet(wiring, recorder, warmRef);
  // `ws-lease schedule` rides on the Reports: answered once the schedule editor exists, below.
  let scheduleFromAgents: ScheduleAgentRequests | undefined;
  const { agents, tls } = agentServerFor(wiring, fleet, (session, report) =>
    scheduleFromAgents?.handle(session, report),
  );
  const guard = memoryGuard(config, log, outreach);
  const registry = collectorMetrics(wiring, fleet, agents, tls, guard, givenBack);
  registerNotificationMetrics(registry, outreach.sender);
  // Dormant VMs' owners get their monthly reminder through the VM's webhooks.
  mode.dormant?.onReminder((vm, metadata) => outreach.remindDormant(vm, metadata, nowMs()));
  registerSpendMetrics(registry, () => spend.rows(), spend.priced);
  const hostSource = config.hostSide ? hostSourceFor(config, fleet, mode, log, nowMs) : undefined;
  if (hostSource) registerHostSourceMetrics(registry, hostSource.status);
  const startLinks = startLinksFor(wiring, fleet, outreach, registry, wrongStops);
  const schedules = schedulesFor(wiring, fleet, outreach, startLinks);
  const warm = warmStartsFor(wiring, fleet, startLinks);
  if (warm) warmRef.runner = warm;
  registerWarmMetrics(registry, () => warm?.counts ?? { used: 0, wasted: 0 });
  scheduleFromAgents = schedules.fromAgents;
  const http = httpServers(wiring, ready, {
    fleet,
    registry,
    history: outreach.history,
    keepLinks: keepLinksFor(wiring, fleet),
    startLinks,
    givenBack,
    spend,
    schedules,
    warm,
    wrongStops,
  });
  const agentPort = agentListener(wiring, agents, tls ?? grpc.ServerCredentials.createInsecure());
  const runnables: Runnable[] = [
    {
      name: "trace recorder and webhook sender",
      start: () => async () => {
        await recorder?.close();
        outreach.sender.close();
      },
    },
    { name: "HTTP servers", start: () => () => http.close() },
    { name: "agent server", start: () => () => agents.close() },
    ...(mode.runnables?.(fleet) ?? []),
    ...(hostSource
      ? [
          runnableOf(
            "host-side poller",
            () => hostSource.start(),
            () => hostSource.stop(),
          ),
        ]
      : []),
    ...timedRunnables(wiring, { fleet, startLinks, schedules, warm, spend, registry, tls }),
    memoryGuardRunnable(guard),
    agentPort.runnable,
    { name: "HTTP ports", start: () => http.listen() },
  ];
  return {
    runnables,
    serving: () => ({
      grpcPort: agentPort.port(),
      connectionCap: agentPort.cap,
      http: http.addresses(),
      hostSide: hostSource ? hostSource.status.endpoint : "off (hostSide unset)",
    }),
  };
}

/**
 * What runs on timers once the fleet's inputs are wired: start links and schedules looked at,
 * the spend sampled, the fleet's deadlines, /metrics warmed between scrapes, the certificate re-read.
 */
function timedRunnables(
  wiring: Wiring,
  parts: {
    fleet: Fleet;
    startLinks: StartLinks | undefined;
    schedules: Schedules;
    warm: WarmRunner | undefined;
    spend: FleetSpend;
    registry: Registry;
    tls: ReloadingServerCredentials | undefined;
  },
): Runnable[] {
  const { config } = wiring;
  const { fleet, startLinks, schedules, warm, spend, registry, tls } = parts;
  return [
    intervalRunnable("start-link watch", 1000, () => startLinks?.watch()),
    intervalRunnable("schedule pass", config.start.schedulePassSeconds * 1000, () => void schedules.runner?.pass()),
    intervalRunnable("warm-start pass", config.start.schedulePassSeconds * 1000, () => void warm?.pass()),
    intervalRunnable("spend sampling", SPEND_TICK_MS, () => {
      if (wiring.mode.leader()) spend.tick(wiring.nowMs());
    }),
    runnableOf(
      "fleet deadlines",
      () => fleet.start(),
      () => fleet.stopTicking(),
    ),
    metricsWarming(registry),
    ...(tls
      ? [
          runnableOf(
            "certificate reload",
            () => tls.watch(config.grpc.certCheckSeconds * 1000),
            () => tls.stop(),
          ),
        ]
      : []),
  ];
}

/** The agents' gRPC server, and its certificate when TLS is on (a renewed one is served without a restart, agents/tls-files.ts). */
function agentServerFor(
  wiring: Wiring,
  fleet: Fleet,
  scheduleRequests: (session: AgentSession, report: Report) => void,
): { agents: AgentServer; tls: ReloadingServerCredentials | undefined } {
  const { config, stats, log, nowMs } = wiring;
  const agents = new AgentServer({
    sink: {
      authenticate: (vm, token, peer) => fleet.authenticate(vm, token, peer),
      connected: (session) => fleet.connected(session),
      report: (session, report, receivedAtMs, truncated) => {
        fleet.report(session, report, receivedAtMs, truncated);
        if (report.scheduleRequests.length > 0) scheduleRequests(session, report);
      },
      disconnected: (session, reason, goodbye) => fleet.disconnected(session, reason, goodbye),
    },
    stats,
    log,
    nowMs,
    ...(config.grpc.hellosPerSecond !== undefined ? { hellosPerSecond: config.grpc.hellosPerSecond } : {}),
  });
  const tls = config.grpc.certFile
    ? ReloadingServerCredentials.fromFiles({ certFile: config.grpc.certFile, keyFile: config.grpc.keyFile! }, log)
    : undefined;
  return { agents, tls };
}

/** The fleet, with outreach (notices, webhooks, history) and what ws gave back observing its decisions. */
function buildFleet(
  wiring: Wiring,
  recorder: TraceRecorder | undefined,
  warmRef: WarmRef,
): { fleet: Fleet; outreach: Outreach; givenBack: GivenBackLedger; spend: FleetSpend; wrongStops: WrongStopLedger } {
  const { config, mode, key, stats, log, nowMs, startUrl } = wiring;
  let fleetRef: Fleet | undefined;
  let spendRef: FleetSpend | undefined;
  const outreach = new Outreach({
    config: config.notifications,
    log,
    metadataFor: (vm) => mode.policySource.metadataFor(vm),
    prefix: mode.policySource.prefix,
    linkKey: deriveLinkKey(key),
    startUrl,
    // The fleet exists by the time a notice goes out (outreach only observes its decisions).
    stopEndsOf: (vm): StopEnds | undefined => stopEnds(fleetRef!.loopState(vm)?.latest?.report),
  });
  // What ws's own stops gave back (docs/metrics.md, "What ws gave back").
  const givenBack = new GivenBackLedger(nowMs());
  // How often ws's stops were wrong, per profile (outreach/rates/ledger.ts).
  const wrongStops = new WrongStopLedger(nowMs());
  const fleet = new Fleet({
    log,
    stats,
    // The spend is sampled at each change of a VM's state (outreach/money/observer.ts); it exists once the fleet does.
    observer: withSpend(
      withWrongStops(
        withGivenBack(outreach, givenBack, (vm) => mode.vmDetails?.(vm), nowMs),
        wrongStops,
      ),
      (vm, now) => spendRef?.touch(vm, now),
    ),
    nowMs,
    actuator: mode.actuator,
    policySource: mode.policySource,
    // The schedule's "stop by" (docs/coming-back.md): read from the VM's annotation on every refresh, so a restart loses nothing.
    scheduleOf: (vm) =>
      scheduleOf(
        mode.policySource.metadataFor(vm).annotations,
        mode.policySource.prefix,
        config.start.timeZone,
        wiring.profileSchedules,
      )?.schedule,
    runsUnder: warmRunsUnder(mode, warmRef),
    acting: mode.leader,
    reportHeartbeatMs: config.reportHeartbeatSeconds * 1000,
    // Start readiness is not delayed by reports on change: a start waiting for sshd or Jupyter hears every sample.
    hearEverySample: (vm, now) =>
      wiring.startTracker.awaitsReady(vm, now)
        ? "a start waits for the entry service"
        : warmRef.runner?.waitingSince(vm) !== undefined
          ? "a warm start waits for its person"
          : undefined,
    ...(mode.restore ? { restore: mode.restore } : {}),
    ...(mode.vmRunning ? { vmRunning: mode.vmRunning } : {}),
    ...(mode.vmDetails ? { vmDetails: mode.vmDetails } : {}),
    // The welcome back, in the first Directive of an agent of a boot after ws's stop (docs/coming-back.md).
    greeting: (vm, bootId) => {
      const now = nowMs();
      const lastStop = mode.startPlatform?.facts(vm)?.lastStop;
      return welcomeBack(lastStop, bootId, now, startUrl(vm, now), wiring.startTracker.placementOf(vm));
    },
    authenticate: (vm, token, peer) => authenticateAgent(wiring, vm, token, peer),
    ...(recorder ? { record: (event) => recorder.record(event) } : {}),
  });
  fleetRef = fleet;
  // What the fleet holds and costs (docs/cost.md): sampled on the leader, which holds the agents.
  const spend = new FleetSpend(
    {
      acting: mode.leader,
      views: (now) => fleet.views(now),
      view: (vm, now) => fleet.view(vm, now),
      facts: (vm) => spendFactsOf(fleet.loopState(vm), mode.vmDetails?.(vm)),
      stoppedByWs: (vm) => givenBack.isOpen(vm),
      ...(config.prices ? { prices: config.prices } : {}),
    },
    nowMs(),
  );
  spendRef = spend;
  return { fleet, outreach, givenBack, spend, wrongStops };
}

/** An agent's Hello: only the leader takes agents; the token must be the VM's; then the mode's own checks. */
async function authenticateAgent(wiring: Wiring, vm: VmKey, token: string, peer: string): Promise<AuthResult> {
  const { mode, key } = wiring;
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
}

/** The memory guard: it sheds the per-VM detail series and the chart points near the cgroup's limit. */
function memoryGuard(config: CollectorConfig, log: Logger, outreach: Outreach): MemoryGuard {
  return new MemoryGuard({
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
    // The detail series go by themselves (vmSeries reads guard.shedding); the chart points are dropped.
    sheddable: [outreach.history],
  });
}

/** The guard's first look at start, then one every MEMORY_CHECK_MS. */
function memoryGuardRunnable(guard: MemoryGuard): Runnable {
  return {
    name: "memory guard",
    start() {
      guard.check();
      const timer = setInterval(() => guard.check(), MEMORY_CHECK_MS);
      timer.unref();
      return () => clearInterval(timer);
    },
  };
}

/** What /metrics says of the collector's memory: the cgroup's working set (else RSS), its limit, shedding. */
function memoryReading(guard: MemoryGuard): { workingSetBytes: number; limitBytes?: number; shedding: boolean } {
  const sample = guard.sample;
  return {
    workingSetBytes: sample?.cgroup?.workingSetBytes ?? process.memoryUsage.rss(),
    ...(sample?.cgroup?.limitBytes !== undefined ? { limitBytes: sample.cgroup.limitBytes } : {}),
    shedding: guard.shedding,
  };
}

/**
 * Idle-time work: the per-VM /metrics text of changed VMs built between scrapes. A timer that
 * fires late says the event loop is busy (a reconnect burst), and the scrape builds what is left
 * as it always did.
 */
function metricsWarming(registry: Registry): Runnable {
  return {
    name: "metrics warming",
    start() {
      let warmDueAt = performance.now() + METRICS_WARM_EVERY_MS;
      const timer = setInterval(() => {
        const late = performance.now() - warmDueAt;
        warmDueAt = performance.now() + METRICS_WARM_EVERY_MS;
        if (late <= METRICS_WARM_MAX_LAG_MS) warmPerVmSeries(registry, METRICS_WARM_SLICE);
      }, METRICS_WARM_EVERY_MS);
      timer.unref();
      return () => clearInterval(timer);
    },
  };
}

/** The agents' port: the connection cap (warned about when below the fleet), then listen. */
function agentListener(
  wiring: Wiring,
  agents: AgentServer,
  credentials: grpc.ServerCredentials,
): { runnable: Runnable; port: () => number; cap: ReturnType<typeof agentConnectionCap> } {
  const { config, mode, log } = wiring;
  // One descriptor per agent: the cap keeps the rest for the API server and the Lease (agents/connection-cap.ts).
  const cap = agentConnectionCap(readOpenFileLimit(), config.grpc.maxConnections);
  let port = 0;
  const runnable: Runnable = {
    name: "agent port",
    async start() {
      // The fleet's size is known once the mode's runnables (the inventory) have started.
      for (const warning of connectionCapWarnings(cap, mode.fleetSize()))
        log("warn", warning, {
          vms: mode.fleetSize(),
          cap: cap.limit,
          ...(cap.openFileLimit !== undefined ? { nofile: cap.openFileLimit } : {}),
        });
      port = await agents.listen(
        {
          ...splitHostPort(config.grpc.listen),
          ...(cap.limit !== undefined ? { maxConnections: cap.limit } : {}),
          handshakeTimeoutMs: config.grpc.handshakeTimeoutMs ?? DEFAULT_HANDSHAKE_TIMEOUT_MS,
          maxPendingConnectionsPerSource:
            config.grpc.maxPendingConnectionsPerSource ?? DEFAULT_PENDING_PER_SOURCE[config.mode],
        },
        credentials,
      );
      return undefined; // closed by the "agent server" runnable, after the mode's
    },
  };
  return { runnable, port: () => port, cap };
}

/** Keep-running links (docs/coming-back.md): a granted keep is an Event on the VM. */
function keepLinksFor(wiring: Wiring, fleet: Fleet): KeepLinks {
  const { config, mode, key, log, nowMs } = wiring;
  return new KeepLinks({
    granter: fleet,
    linkKey: deriveLinkKey(key),
    choicesHours: config.notifications.keepChoicesHours,
    nowMs,
    log,
    audit: (vm, message) => mode.actuator.event(vm, "Normal", "KeepRunningLink", message),
  });
}

/** Start links and the starting page (docs/coming-back.md), where the mode can start a VM; their metrics either way. */
function startLinksFor(
  wiring: Wiring,
  fleet: Fleet,
  outreach: Outreach,
  registry: Registry,
  wrongStops: WrongStopLedger,
): StartLinks | undefined {
  const { config, mode, key, log, nowMs } = wiring;
  const tracker = wiring.startTracker;
  // Every profile from 0, so that increase() counts a profile's first dispute too.
  const disputes = new Map<string, number>(["", ...Object.keys(mode.policySource.profiles)].map((p) => [p, 0]));
  const startLinks = mode.startPlatform
    ? new StartLinks({
        platform: mode.startPlatform,
        tracker,
        prober: new EntryProber(sshAnswers, nowMs),
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
          stopDisputed(wiring, fleet, outreach, vm, dispute, stop);
        },
        placement: (vm, news) => startPlacement(wiring, fleet, outreach, vm, news),
      })
    : undefined;
  registerStartMetrics(registry, tracker, () => disputes);
  return startLinks;
}

interface Schedules {
  runner?: ScheduleRunner;
  editor?: ScheduleEditor;
  page?: SchedulePage;
  fromAgents?: ScheduleAgentRequests;
}

/** The VMs' start schedules (docs/coming-back.md): they fire through the start path as trigger `schedule`. */
function schedulesFor(wiring: Wiring, fleet: Fleet, outreach: Outreach, startLinks: StartLinks | undefined): Schedules {
  const { config, mode, log, nowMs } = wiring;
  const platform = mode.startPlatform;
  if (!platform) return {};
  const runner = startLinks
    ? new ScheduleRunner({
        platform,
        start: (request) => startLinks.start(request),
        prefix: mode.policySource.prefix,
        siteZone: config.start.timeZone,
        profileSchedules: wiring.profileSchedules,
        nowMs,
        leader: mode.leader,
        catchUpMs: SCHEDULE_CATCH_UP_MS,
        retryMs: SCHEDULE_RETRY_MS,
        giveUpMs: SCHEDULE_GIVE_UP_MS,
        audit: (vm, type, reason, message) => mode.actuator.event(vm, type, reason, message),
        tellOwner: (vm, message) => {
          const policy = fleet.loopState(vm)?.policy ?? resolveVmPolicy(mode.policySource, vm, undefined).policy;
          outreach.scheduled(
            { kind: "schedule", vm, atMs: nowMs(), mode: policy.mode, reason: message, explanation: message },
            policy,
          );
        },
        log: (level, message) => log(level, message),
      })
    : undefined;
  const editor = new ScheduleEditor({
    platform,
    prefix: mode.policySource.prefix,
    siteZone: config.start.timeZone,
    profileSchedules: wiring.profileSchedules,
    nowMs,
    audit: (vm, message) => mode.actuator.event(vm, "Normal", "ScheduleSet", message),
  });
  const page = startLinks
    ? new SchedulePage({
        editor,
        platform,
        ...(config.http.identity ? { identity: config.http.identity } : {}),
        formToken: (vm) => startLinks.formToken(vm),
        validToken: (vm, token) => startLinks.validToken(vm, token),
      })
    : undefined;
  return {
    ...(runner ? { runner } : {}),
    editor,
    ...(page ? { page } : {}),
    fromAgents: new ScheduleAgentRequests(editor),
  };
}

/**
 * A learned warm start nobody came for yet runs under its window as idle-timeout (docs/policy.md):
 * from the VM's annotation (Kubernetes: right after a restart), or the runner's last pass (where the
 * platform keeps the record itself: standalone, in memory).
 */
function warmRunsUnder(mode: CollectorMode, warmRef: WarmRef): (vm: VmKey, policy: Policy) => Policy {
  const { policySource } = mode;
  const key = `${policySource.prefix}${WARM_STARTS_ANNOTATION}`;
  return (vm, policy) => {
    const since = warmRef.runner?.waitingSince(vm);
    const records =
      since !== undefined
        ? [{ atMs: since, outcome: "waiting" as const }]
        : parseWarmStarts(policySource.metadataFor(vm).annotations[key]);
    return warmWaitingPolicy(policy, records);
  };
}

/** The warm-start runner, made after the fleet that reads it (a late binding, like the schedule's agent requests). */
interface WarmRef {
  runner?: WarmRunner;
}

/** Learned warm starts (docs/policy.md): they fire through the start path as trigger `warm`, where the mode can start a VM. */
function warmStartsFor(wiring: Wiring, fleet: Fleet, startLinks: StartLinks | undefined): WarmRunner | undefined {
  const { config, mode, log, nowMs } = wiring;
  const platform = mode.startPlatform;
  if (!platform || !startLinks) return undefined;
  return new WarmRunner({
    platform,
    start: (request) => startLinks.start(request),
    prefix: mode.policySource.prefix,
    siteZone: config.start.timeZone,
    profileSchedules: wiring.profileSchedules,
    policyOf: (vm) => {
      const resolved = resolveVmPolicy(mode.policySource, vm, undefined);
      return { policy: resolved.policy, errors: resolved.errors.length > 0 };
    },
    lastHumanAtMs: (vm) => fleet.loopState(vm)?.record?.lastHumanAtMs,
    nowMs,
    leader: mode.leader,
    audit: (vm, type, reason, message) => mode.actuator.event(vm, type, reason, message),
    foundWarm: (_vm, atMs) => wiring.startTracker.foundWarm(atMs),
    log: (level, message) => log(level, message),
  });
}

/** A start the scheduler cannot place, or placed at last: an Event on the VM and the owner told. */
function startPlacement(wiring: Wiring, fleet: Fleet, outreach: Outreach, vm: VmKey, news: PlacementNews): void {
  const { mode, nowMs } = wiring;
  const waited = formatDuration(news.waitedSeconds);
  const reason =
    news.kind === "unplaced"
      ? `${news.message} (${news.reason}; waited ${waited} so far)`
      : `after ${waited}${news.node ? ` on node ${news.node}` : ""}`;
  mode.actuator.event(
    vm,
    news.kind === "unplaced" ? "Warning" : "Normal",
    news.kind === "unplaced" ? "StartUnschedulable" : "StartPlaced",
    news.kind === "unplaced" ? `the start cannot be placed: ${reason}` : `the start was placed ${reason}`,
  );
  const policy = fleet.loopState(vm)?.policy ?? resolveVmPolicy(mode.policySource, vm, undefined).policy;
  outreach.startPlacement(
    { kind: news.kind, vm, atMs: nowMs(), mode: policy.mode, reason, explanation: reason },
    policy,
  );
}

type DisputedHook = NonNullable<ConstructorParameters<typeof StartLinks>[0]["disputed"]>;

/** "This stop was a mistake": a Warning Event on the VM and the dispute sent to the webhooks. */
function stopDisputed(
  wiring: Wiring,
  fleet: Fleet,
  outreach: Outreach,
  ...[vm, dispute, stop]: Parameters<DisputedHook>
): void {
  const { mode } = wiring;
  const what = dispute.what ? `"${dispute.what}"` : "no details given";
  mode.actuator.event(
    vm,
    "Warning",
    "StopDisputed",
    `${dispute.by} says the stop of ${new Date(stop.atMs).toISOString()} was a mistake: ${what}; the stop: ${stop.reason}; ${dispute.knob}`,
  );
  // A VM stopped before this collector started has no loop (no agent since): its policy comes
  // from its labels and annotations, so its dispute is still sent.
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
}

/** An HTTP server and the address it listens on (its port once listening). */
interface HttpListener {
  server: import("node:http").Server;
  address: { host: string; port: number };
  port?: number;
}

/**
 * The pages' server, the probes' own (with http.metricsListen: Prometheus and the kubelet get
 * their own port and the pages' port serves no /metrics, since it sits behind the site's auth
 * proxy and the series name every VM and owner), and the workstations' fixed addresses (the
 * gateway's error page for a stopped VM, docs/coming-back.md).
 */
function httpServers(
  wiring: Wiring,
  ready: () => boolean,
  parts: {
    fleet: Fleet;
    registry: Registry;
    history: Outreach["history"];
    keepLinks: KeepLinks;
    startLinks: StartLinks | undefined;
    givenBack: GivenBackLedger;
    spend: FleetSpend;
    schedules: Schedules;
    warm: WarmRunner | undefined;
    wrongStops: WrongStopLedger;
  },
): { listen: () => Promise<undefined>; close: () => Promise<void>; addresses: () => ServingAddresses } {
  const { config, mode, stats, log, nowMs, startUrl } = wiring;
  const { startLinks } = parts;
  const webOptions = {
    fleet: parts.fleet,
    registry: parts.registry,
    nowMs,
    // Ready once every runnable before the listeners runs (the inventory synced, the agents'
    // port open), and not while shutting down; the leader's pod label, not readiness, routes
    // the agents (platform/kube/leader-label.ts).
    ready,
    info: () => ({ version: COLLECTOR_VERSION, mode: mode.name, leader: mode.leader() }),
    history: parts.history,
    keepLinks: parts.keepLinks,
    ...(startLinks ? { startLinks } : {}),
    ...(mode.startPlatform ? { startPlatform: mode.startPlatform } : {}),
    leaderUrl: config.start.leaderUrl,
    replica: config.kubernetes.identity,
    startUrl,
    givenBack: (now) => parts.givenBack.rows(now),
    spend: parts.spend,
    ...(mode.dormant ? { dormant: mode.dormant.report } : {}),
    rates: (now: number) => parts.wrongStops.rates(now),
    ...(parts.schedules.page ? { schedulePage: parts.schedules.page } : {}),
    ...(parts.schedules.editor ? { scheduleOf: (vm: VmKey) => parts.schedules.editor!.status(vm) } : {}),
    ...(parts.warm ? { warmStartOf: (vm: VmKey) => parts.warm!.status(vm) } : {}),
    onRefused: (why, detail) => {
      stats.countHttpRefusal(why);
      log(why === "handler-error" ? "error" : "warn", `HTTP request refused: ${why} (${detail})`, { reason: why });
    },
  } satisfies WebOptions;
  const pages: HttpListener = {
    server: createWebServer({
      ...webOptions,
      routes: config.http.metricsListen ? "pages" : "all",
      ...(config.http.identity ? { identity: config.http.identity } : {}),
    }),
    address: splitHostPort(config.http.listen),
  };
  const probes: HttpListener | undefined = config.http.metricsListen
    ? {
        server: createWebServer({ ...webOptions, routes: "probes" }),
        address: splitHostPort(config.http.metricsListen),
      }
    : undefined;
  const wake = wakeListener(wiring, startLinks);
  const listeners = [pages, ...(probes ? [probes] : []), ...(wake ? [wake] : [])];
  const at = (listener: HttpListener | undefined) =>
    listener ? `${listener.address.host}:${listener.port}` : undefined;
  return {
    async listen() {
      for (const listener of listeners) listener.port = await listenOn(listener.server, listener.address);
      return undefined; // closed by the "HTTP servers" runnable, after the agents'
    },
    async close() {
      for (const { server } of listeners)
        await new Promise<void>((resolve) => {
          server.close(() => resolve());
          server.closeAllConnections?.();
        });
    },
    addresses: () => ({ http: at(pages)!, metrics: at(probes), wake: at(wake) }),
  };
}

/** Where the HTTP side listens, for the "collector serving" line. */
interface ServingAddresses {
  http: string;
  metrics: string | undefined;
  wake: string | undefined;
}

/** The "collector serving" line, and the warnings about what this configuration leaves open. */
function logServing(
  wiring: Wiring,
  serving: {
    grpcPort: number;
    connectionCap: ReturnType<typeof agentConnectionCap>;
    http: ServingAddresses;
    hostSide: string;
  },
): void {
  const { config, mode, log } = wiring;
  log("info", "collector serving", {
    mode: mode.name,
    version: COLLECTOR_VERSION,
    grpc: `${splitHostPort(config.grpc.listen).host}:${serving.grpcPort}`,
    agentConnections: describeConnectionCap(serving.connectionCap),
    http: serving.http.http,
    ...(serving.http.metrics ? { metrics: serving.http.metrics } : {}),
    ...(serving.http.wake ? { wake: serving.http.wake } : {}),
    pages: config.http.identity ? `behind login (${config.http.identity.userHeader})` : "open",
    tls: Boolean(config.grpc.certFile),
    webhooks:
      config.notifications.webhooks.length +
      Object.values(config.notifications.profiles).reduce((n, list) => n + list.length, 0),
    keepLinks: config.notifications.publicUrl ? "on" : "off (notifications.publicUrl unset)",
    hostSide: serving.hostSide,
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
}

/** The collector's own registry: the fleet's series, the agents' connections, certificates, memory, what ws gave back. */
function collectorMetrics(
  wiring: Wiring,
  fleet: Fleet,
  agents: AgentServer,
  tls: ReloadingServerCredentials | undefined,
  guard: MemoryGuard,
  givenBack: GivenBackLedger,
): Registry {
  const { config, mode, stats, nowMs } = wiring;
  return createMetrics(fleet, stats, nowMs, () => agents.streamCount, {
    agentConnections: () => ({ open: agents.connectionCount, limit: agents.connectionLimit }),
    ...(tls ? { certificates: () => [{ cert: "grpc", expiryMs: tls.expiryMs }] } : {}),
    leader: mode.leader,
    mode: mode.name,
    vmSeries: () => (guard.shedding ? "default" : config.metrics.vmSeries),
    memory: () => memoryReading(guard),
    givenBack: (now) => givenBack.rows(now),
    ...(mode.dormant ? { dormant: mode.dormant.report } : {}),
  });
}

/** The workstations' fixed addresses (start.wakeListen): the gateway's error page for a stopped VM (docs/coming-back.md). */
function wakeListener(wiring: Wiring, startLinks: StartLinks | undefined): HttpListener | undefined {
  const { config, mode, log, nowMs } = wiring;
  if (!config.start.wakeListen || !startLinks || !mode.startPlatform) return undefined;
  return {
    server: createAddressServer(
      new AddressStart({
        platform: mode.startPlatform,
        links: startLinks,
        ...(config.http.identity ? { identity: config.http.identity } : {}),
        nowMs,
        leader: mode.leader,
      }),
      (message) => log("error", `fixed address: ${message}`),
    ),
    address: splitHostPort(config.start.wakeListen),
  };
}
