// The collector benchmark's load generator, run as a child process (IPC):
// it opens N agent streams, each on its own HTTP/2 connection, through the
// project's grpc-js adapter, sends a Hello with a valid token, then a typical
// Report every interval at a random phase, and times each Report until the
// Directive that answers it. A stream the collector ends is opened again
// after the agent's own backoff (1 s doubling to 60 s, jittered), as agents
// do. Driven by bench/collector.ts.
import { monitorEventLoopDelay } from "node:perf_hooks";
import { tokenFor } from "../packages/collector/src/links/agent-token.js";
import { backoffDelayMs } from "@ws/protocol";
import { RECONNECT_BACKOFF } from "../packages/guest-agent/src/agent/connection.js";
import type { Report } from "@ws/protocol";
import { openAgentStream, type AgentStream } from "./lib/agent-stream.js";
import { hostileReport, reportFor, TYPICAL_VM } from "./lib/reports.js";
import { MAX_STRING, REPORT_LIMITS } from "../packages/collector/src/agents/validate.js";
import { MAX_AGENT_MESSAGE_BYTES, REPORT_ON_CHANGE_CAPABILITY, type Thresholds } from "@ws/protocol";
import {
  contractFrom,
  digestOf,
  type ReportContract,
  type SampleDigest,
  sendReason,
} from "../packages/guest-agent/src/agent/report-gate.js";
import { leaseReport, profileOf, quietReport, typingReport, type Profile } from "./lib/fleet-mix.js";

export type LoadCommand =
  | {
      cmd: "open";
      address: string;
      keyText: string;
      namespace: string;
      count: number;
      perSecond: number;
      intervalSeconds: number;
      reportLater?: boolean;
      /** The Report these VMs send (default: the typical ones); hostile VMs' round trips are not timed. */
      hostile?: "largest-allowed" | "gpu-flood";
      /** This group's own interval (default: the fleet's). */
      ownIntervalSeconds?: number;
      /** The number of this process's first VM (vm-NNNNN): a fleet split over several generators names each VM once. */
      firstIndex?: number;
      /**
       * "realistic": each VM follows its profile (lib/fleet-mix.ts) and, as the agent does, samples
       * every interval and sends what the collector's ReportWhen asks for (the agent's own gate,
       * report-gate.ts). Absent: the worst case, a full Report every interval from every VM.
       */
      mix?: "realistic";
    }
  | { cmd: "start-reporting" }
  | { cmd: "interval"; seconds: number }
  | { cmd: "stats" }
  | { cmd: "close" };

export interface LoadStats {
  opened: number;
  connected: number;
  /** Streams ended by the collector (or the network) so far. */
  ended: number;
  reconnects: number;
  /** Stream ends that carried a retry hint (the collector admitting Hellos at its limit). */
  refusedBusy: number;
  reportsSent: number;
  /** Samples the VMs took (each tick of each VM), sent or not. */
  samplesTaken: number;
  directives: number;
  /** Report → Directive round trips since the previous stats call, in ms. */
  roundTripsMs: number[];
  endReasons: string[];
  cpuSeconds: number;
  rssBytes: number;
  /** This generator's own longest event-loop delay since the previous stats call, in ms: past the 10 s keepalive timeout, its streams drop on their own. */
  loopDelayMaxMs: number;
}

interface Vm {
  name: string;
  token: string;
  stream: AgentStream;
  connected: boolean;
  ended: boolean;
  attempt: number;
  connectedAtMs: number;
  sequence: bigint;
  template: Report;
  pendingSentAt: number[];
  timer?: NodeJS.Timeout;
  /** Not timed: the hostile agents of the memory benchmark. */
  hostile: boolean;
  /** Its own report interval (hostile groups), else the fleet's. */
  intervalMs?: number;
  /** In the realistic mix: what it does, and what the agent's gate keeps. */
  profile?: Profile;
  index: number;
  contract?: ReportContract | undefined;
  thresholds?: Thresholds | undefined;
  sent?: SampleDigest | undefined;
  /** Its GPU job's period, its lease's time, its agent's restart period (ms), by profile. */
  periodMs: number;
  startedAtMs: number;
}

const TEMPLATES = Array.from({ length: 16 }, (_, i) => reportFor(TYPICAL_VM, 100 + i));
const QUIET = TEMPLATES.map(quietReport);
const TYPING = QUIET.map(typingReport);
const MAX_ROUND_TRIPS = 500_000;
/** As the agent: a stream that stayed up this long resets the backoff. */
const HEALTHY_STREAM_MS = 30_000;

const vms: Vm[] = [];
const loopDelay = monitorEventLoopDelay({ resolution: 20 });
loopDelay.enable();
/** The number the next VM opened gets. */
let nextIndex = 0;
let intervalMs = 15_000;
/** Until start-reporting, accepted streams only hold their connection (to weigh a connection alone). */
let reporting = true;
let reportsSent = 0;
let samplesTaken = 0;
let directives = 0;
let ended = 0;
let reconnects = 0;
let refusedBusy = 0;
let closing = false;
let address = "";
let namespace = "";
let roundTrips: number[] = [];
const endReasons = new Map<string, number>();

function schedule(vm: Vm): void {
  clearTimeout(vm.timer);
  const every = vm.intervalMs ?? intervalMs;
  // A random phase, as VMs booted at different times report at different moments.
  vm.timer = setTimeout(() => {
    send(vm);
    vm.timer = setInterval(() => send(vm), every);
  }, Math.random() * every);
}

function send(vm: Vm): void {
  samplesTaken++;
  const report = vm.profile ? sampleOf(vm) : vm.template;
  if (vm.profile && vm.profile !== "old-agent" && vm.profile !== "pending-stop") {
    // As the agent does (agent/runtime.ts): the sample goes out when the collector wants it.
    const now = performance.now();
    const digest = digestOf(report, now, vm.thresholds);
    if (sendReason(vm.contract, vm.sent, digest, now, vm.intervalMs ?? intervalMs) === undefined) return;
    vm.sent = digest;
  }
  vm.sequence++;
  // As the agent does: the newest snapshot with this stream's next sequence number.
  if (vm.stream.sendReport({ ...report, sequence: vm.sequence })) {
    reportsSent++;
    vm.pendingSentAt.push(performance.now());
  }
}

/** What a VM of the realistic mix samples now. */
function sampleOf(vm: Vm): Report {
  const quiet = QUIET[vm.index % QUIET.length]!;
  const sinceStartMs = performance.now() - vm.startedAtMs;
  switch (vm.profile) {
    case "typing":
      return TYPING[vm.index % TYPING.length]!;
    case "gpu-job":
      // A job runs for one period, then the GPU idles for one.
      return Math.floor(sinceStartMs / vm.periodMs) % 2 === 0 ? vm.template : quiet;
    case "lease":
      return sinceStartMs >= vm.periodMs
        ? leaseReport(quiet, vm.name.slice(-8).padStart(8, "0"), (sinceStartMs - vm.periodMs) / 1000)
        : quiet;
    case "pending-stop":
    case "old-agent":
      return vm.template;
    default:
      return quiet;
  }
}

function connect(vm: Vm): void {
  vm.connected = false;
  vm.ended = false;
  vm.pendingSentAt = [];
  vm.contract = undefined;
  vm.sent = undefined;
  const onChange = vm.profile !== undefined && vm.profile !== "old-agent" && vm.profile !== "pending-stop";
  vm.stream = openAgentStream(
    address,
    { namespace, name: vm.name },
    vm.token,
    {
      onDirective(directive) {
        directives++;
        if (directive.policy?.thresholds) vm.thresholds = directive.policy.thresholds;
        if (directive.reportWhen) vm.contract = contractFrom(directive.reportWhen, performance.now());
        if (!vm.connected) {
          // The first Directive answers the Hello: the stream is accepted, reporting starts.
          vm.connected = true;
          vm.connectedAtMs = performance.now();
          if (reporting) schedule(vm);
          return;
        }
        const sentAt = vm.pendingSentAt.shift();
        if (sentAt !== undefined && !vm.hostile && roundTrips.length < MAX_ROUND_TRIPS)
          roundTrips.push(performance.now() - sentAt);
      },
      onEnd(reason, retryAfterMs) {
        ended++;
        vm.ended = true;
        clearTimeout(vm.timer);
        clearInterval(vm.timer);
        endReasons.set(reason, (endReasons.get(reason) ?? 0) + 1);
        if (closing) return;
        if (vm.connected && performance.now() - vm.connectedAtMs > HEALTHY_STREAM_MS) vm.attempt = 0;
        // As the agent does (guest-agent connection.ts): a retry hint from a busy collector, ±50 %, else the backoff.
        const delay =
          retryAfterMs !== undefined
            ? Math.round(retryAfterMs * (0.5 + Math.random()))
            : backoffDelayMs(vm.attempt + 1, RECONNECT_BACKOFF, Math.random);
        if (retryAfterMs !== undefined) refusedBusy++;
        else vm.attempt++;
        setTimeout(() => {
          if (closing) return;
          reconnects++;
          connect(vm);
        }, delay);
      },
    },
    onChange ? [REPORT_ON_CHANGE_CAPABILITY] : [],
  );
  if (vm.profile === "restarting") {
    // The agent restarts (an upgrade, a crash): its stream ends and a new one starts at once.
    setTimeout(() => {
      if (closing || vm.ended) return;
      clearTimeout(vm.timer);
      clearInterval(vm.timer);
      vm.stream.close();
      reconnects++;
      connect(vm);
    }, vm.periodMs);
  }
}

async function open(command: Extract<LoadCommand, { cmd: "open" }>): Promise<void> {
  intervalMs = command.intervalSeconds * 1000;
  reporting = !command.reportLater;
  address = command.address;
  namespace = command.namespace;
  const key = Buffer.from(command.keyText, "utf8");
  const hostile = command.hostile
    ? hostileReport(command.hostile, REPORT_LIMITS, MAX_STRING, MAX_AGENT_MESSAGE_BYTES)
    : undefined;
  const batch = Math.max(1, Math.round(command.perSecond / 20));
  if (command.firstIndex !== undefined) nextIndex = Math.max(nextIndex, command.firstIndex);
  for (let i = 0; i < command.count; i++) {
    const name = `vm-${String(nextIndex++).padStart(5, "0")}`;
    const vm: Vm = {
      name,
      token: tokenFor(key, namespace, name),
      connected: false,
      ended: false,
      attempt: 0,
      connectedAtMs: 0,
      sequence: 0n,
      template: hostile ?? TEMPLATES[vms.length % TEMPLATES.length]!,
      pendingSentAt: [],
      hostile: hostile !== undefined,
      ...(command.ownIntervalSeconds ? { intervalMs: command.ownIntervalSeconds * 1000 } : {}),
      stream: undefined as unknown as AgentStream,
      index: nextIndex - 1,
      ...(command.mix === "realistic" && !hostile ? { profile: profileOf(nextIndex - 1) } : {}),
      periodMs: 0,
      startedAtMs: performance.now(),
    };
    // GPU jobs of 2-6 minutes; a lease within the first 2 minutes; an agent restart every 3-6 minutes.
    if (vm.profile === "gpu-job") vm.periodMs = 120_000 + Math.random() * 240_000;
    if (vm.profile === "lease") vm.periodMs = Math.random() * 120_000;
    if (vm.profile === "restarting") vm.periodMs = 180_000 + Math.random() * 180_000;
    vms.push(vm);
    connect(vm);
    if ((i + 1) % batch === 0) await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

function stats(): LoadStats {
  const usage = process.cpuUsage();
  const result: LoadStats = {
    opened: vms.length,
    connected: vms.filter((vm) => vm.connected && !vm.ended).length,
    ended,
    reconnects,
    refusedBusy,
    reportsSent,
    samplesTaken,
    directives,
    roundTripsMs: roundTrips,
    endReasons: [...endReasons.entries()].map(([reason, count]) => `${count}× ${reason}`),
    cpuSeconds: (usage.user + usage.system) / 1e6,
    rssBytes: process.memoryUsage.rss(),
    loopDelayMaxMs: loopDelay.max / 1e6,
  };
  loopDelay.reset();
  roundTrips = [];
  return result;
}

process.on("message", (message: LoadCommand) => {
  const reply = (value: unknown) => process.send?.(value);
  switch (message.cmd) {
    case "open":
      void open(message).then(
        () => reply({ ok: true }),
        (error: Error) => reply({ ok: false, error: error.message }),
      );
      return;
    case "start-reporting":
      reporting = true;
      for (const vm of vms) if (vm.connected && !vm.ended) schedule(vm);
      reply({ ok: true });
      return;
    case "interval":
      intervalMs = message.seconds * 1000;
      for (const vm of vms) if (vm.connected) schedule(vm);
      reply({ ok: true });
      return;
    case "stats":
      reply(stats());
      return;
    case "close":
      closing = true;
      for (const vm of vms) {
        clearTimeout(vm.timer);
        clearInterval(vm.timer);
        vm.stream.close();
      }
      reply({ ok: true });
      setTimeout(() => process.exit(0), 200);
      return;
  }
});
process.on("disconnect", () => process.exit(0));
