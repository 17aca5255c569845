// The fleet's spend, fed from what the collector already knows (docs/cost.md): at each tick every
// VM's state (the loop's record, the platform's "running"), ws's own stops (the given-back ledger),
// the VM's size from its spec, and the agent's latest CPU, memory and GPU readings. The pages,
// /api/spend and /metrics read it. Pure but for the ports and the clock it is given.
import type { VmKey } from "../../model/vm-key.js";
import type { VmCapacity, VmPlatformDetails, VmView } from "../../model/vm-view.js";
import type { VmLoopState } from "../../loop/step.js";
import type { Prices } from "./prices.js";
import {
  type ResourceSeconds,
  SpendLedger,
  type SpendKind,
  spendKinds,
  type SpendRow,
  type VmHolding,
} from "./spend.js";
import { rightSizingHint, type UsageResource, type UsageSample, UsageWindow } from "./usage.js";

/** How often the fleet is sampled; also the longest stretch one sample vouches for is twice this. */
export const SPEND_TICK_MS = 30_000;

/** What the fleet tells about one VM at a tick, beyond its view. */
export interface VmSpendFacts {
  /** The platform says an instance runs (undefined: nothing can tell; standalone). */
  running: boolean | undefined;
  profile: string;
  /** An observe-mode notice whose would-stop moment has passed: enforce mode would have stopped it. */
  wouldHaveStopped: boolean;
  capacity?: VmCapacity;
  gpuDevices?: ReadonlyArray<{ deviceName: string; count: number }>;
  /** The agent's latest readings as shares (0..1), while it is connected. */
  usage?: UsageSample;
}

export interface FleetSpendPorts {
  /** This replica counts (the leader): a read of the figures takes a sample first, so a page is never a tick behind. */
  acting?: () => boolean;
  views: (nowMs: number) => VmView[];
  /** One VM's view (for a sample at its state change); absent: changes wait for the next tick. */
  view?: (vm: VmKey, nowMs: number) => VmView | undefined;
  facts: (vm: VmKey) => VmSpendFacts | undefined;
  stoppedByWs: (vm: VmKey) => boolean;
  prices?: Prices;
}

/** One VM's size beside its use, and the hint (the right-sizing table). */
export interface VmUsageRow {
  namespace: string;
  name: string;
  owner: string;
  profile: string;
  capacity: VmCapacity;
  p95: Partial<Record<UsageResource, number>>;
  days: number;
  hint: string | null;
}

/** One VM's figures for its page: its own, its size beside its use, and its namespace/owner/profile group's. */
export interface VmSpendFigures {
  spend: Record<SpendKind, ResourceSeconds>;
  usage: VmUsageRow;
  group: SpendRow;
}

export interface SpendReport {
  /** Absent: no prices configured; the figures are resource-hours only. */
  currency?: string;
  /** When this process began counting (figures cover from then; Prometheus holds the long history). */
  sinceMs: number;
  rows: SpendRow[];
  vms: VmUsageRow[];
}

const NO_CAPACITY: VmCapacity = { cpuCores: null, memoryBytes: null, gpus: 0 };

export class FleetSpend {
  private readonly ledger: SpendLedger;
  private readonly usage = new Map<string, UsageWindow>();
  private readonly last = new Map<string, { view: VmView; facts: VmSpendFacts | undefined }>();
  private lastTickMs = Number.NEGATIVE_INFINITY;

  constructor(
    private readonly ports: FleetSpendPorts,
    private readonly sinceMs: number,
  ) {
    this.ledger = new SpendLedger({ ...(ports.prices ? { prices: ports.prices } : {}), maxGapMs: 2 * SPEND_TICK_MS });
  }

  /**
   * Samples the fleet at `nowMs`. `readUsage`: also add each VM's readings to its usage window (the
   * timer's ticks only, so a page read often does not weigh the p95 towards when people look).
   */
  tick(nowMs: number, readUsage = true): void {
    this.lastTickMs = nowMs;
    const views = this.ports.views(nowMs);
    const seen = new Set<string>();
    const holdings = views.map((view) => {
      seen.add(`${view.namespace}/${view.name}`);
      return this.holdingOf(view, nowMs, readUsage);
    });
    for (const id of [...this.usage.keys()]) if (!seen.has(id)) this.usage.delete(id);
    for (const id of [...this.last.keys()]) if (!seen.has(id)) this.last.delete(id);
    this.ledger.sample(holdings, nowMs);
  }

  /**
   * One VM's state changed (the fleet observer's decision): its time since its previous sample
   * counts under that sample's state, so a change is counted when it happens, not at the next tick.
   */
  touch(vm: VmKey, nowMs: number): void {
    const view = this.ports.view?.(vm, nowMs);
    if (view && this.ports.acting?.() !== false) this.ledger.sampleOne(this.holdingOf(view, nowMs, false), nowMs);
  }

  private holdingOf(view: VmView, nowMs: number, readUsage: boolean): VmHolding {
    const id = `${view.namespace}/${view.name}`;
    const facts = this.ports.facts(view);
    this.last.set(id, { view, facts });
    if (readUsage && facts?.usage) {
      const window = this.usage.get(id) ?? new UsageWindow();
      this.usage.set(id, window);
      window.add(facts.usage, nowMs);
    }
    return {
      namespace: view.namespace,
      name: view.name,
      owner: view.owner ?? "",
      profile: facts?.profile ?? "",
      capacity: facts?.capacity ?? NO_CAPACITY,
      gpuDevices: facts?.gpuDevices ?? [],
      kinds: spendKinds({
        running: facts?.running,
        connected: view.connected,
        state: view.state,
        stoppedByWs: this.ports.stoppedByWs(view),
        wouldHaveStopped: facts?.wouldHaveStopped ?? false,
      }),
    };
  }

  /** Sums per namespace, owner and profile (to /metrics: counters that only go up). */
  rows(): SpendRow[] {
    return this.ledger.rows();
  }

  get priced(): boolean {
    return this.ports.prices !== undefined;
  }

  /** The prices' currency; undefined without prices (figures in resource-hours). */
  get currency(): string | undefined {
    return this.ports.prices?.currency;
  }

  /** Takes a sample now when this replica counts and the last one is over a second old (a page or /api/spend read). */
  private refresh(nowMs: number): void {
    if (this.ports.acting?.() && nowMs - this.lastTickMs >= 1000) this.tick(nowMs, false);
  }

  report(nowMs: number): SpendReport {
    this.refresh(nowMs);
    return {
      ...(this.currency !== undefined ? { currency: this.currency } : {}),
      sinceMs: this.sinceMs,
      rows: this.ledger.rows(),
      vms: [...this.last.keys()].sort().map((id) => this.usageRow(id, nowMs)!),
    };
  }

  /** One VM: its spend since this process started, its size beside its use, and the hint. */
  vm(vm: VmKey, nowMs: number): VmSpendFigures | undefined {
    this.refresh(nowMs);
    const spend = this.ledger.vm(vm.namespace, vm.name);
    const usage = this.usageRow(`${vm.namespace}/${vm.name}`, nowMs);
    if (!spend || !usage) return undefined;
    return { spend, usage, group: this.ledger.group(usage.namespace, usage.owner, usage.profile) };
  }

  private usageRow(id: string, nowMs: number): VmUsageRow | undefined {
    const last = this.last.get(id);
    if (!last) return undefined;
    const capacity = last.facts?.capacity ?? NO_CAPACITY;
    const { p95, days } = this.usage.get(id)?.p95(nowMs) ?? { p95: {}, days: 0 };
    return {
      namespace: last.view.namespace,
      name: last.view.name,
      owner: last.view.owner ?? "",
      profile: last.facts?.profile ?? "",
      capacity,
      p95,
      days,
      hint: rightSizingHint(p95, days, capacity),
    };
  }
}

/** The agent's CPU busy share, memory in use (1 − available/total) and mean GPU utilisation of one Report. */
export function usageOfReport(report: {
  system?: { cpuBusyRatio?: number | undefined; memoryTotalBytes: bigint; memoryAvailableBytes: bigint } | undefined;
  gpu?: { gpus: ReadonlyArray<{ utilizationRatio?: number | undefined }> } | undefined;
}): UsageSample {
  const sample: UsageSample = {};
  const system = report.system;
  if (system?.cpuBusyRatio !== undefined && Number.isFinite(system.cpuBusyRatio)) sample.cpu = system.cpuBusyRatio;
  if (system && system.memoryTotalBytes > 0n)
    sample.memory = 1 - Number(system.memoryAvailableBytes) / Number(system.memoryTotalBytes);
  const gpus: number[] = [];
  for (const gpu of report.gpu?.gpus ?? [])
    if (gpu.utilizationRatio !== undefined && Number.isFinite(gpu.utilizationRatio)) gpus.push(gpu.utilizationRatio);
  if (gpus.length > 0) sample.gpu = gpus.reduce((a, b) => a + b, 0) / gpus.length;
  return sample;
}

/** A VM's spend facts from its loop state and the platform's details (undefined: the fleet does not know it). */
export function spendFactsOf(
  loop: Readonly<Pick<VmLoopState, "running" | "policy" | "record" | "latest" | "connected">> | undefined,
  details: VmPlatformDetails | undefined,
): VmSpendFacts | undefined {
  if (!loop) return undefined;
  const notice = loop.record?.notice;
  return {
    running: loop.running,
    profile: loop.policy.profile ?? "",
    wouldHaveStopped: notice?.mode === "observe" && notice.wouldStopAtMs !== undefined,
    ...(details?.capacity
      ? { capacity: details.capacity }
      : loop.latest
        ? { capacity: factsOfReport(loop.latest).capacity }
        : {}),
    ...(details?.gpuDevices ? { gpuDevices: details.gpuDevices } : {}),
    ...(loop.connected && loop.latest ? { usage: factsOfReport(loop.latest).usage } : {}),
  };
}

/**
 * What the spend reads of one received Report, worked out once per Report. The collector keeps a
 * VM's latest Report as its bytes, so `report` decodes it at each read: the spend sampling read
 * every VM's every 30 s, and at 10k VMs that was one synchronous pass of 0.45 to 1.3 s (benchmark
 * 2, a CPU profile of the collector's longest stalls), the Report→Directive tail. A VM that sent
 * nothing since the previous tick now costs a lookup.
 */
const reportFacts = new WeakMap<object, { capacity: VmCapacity; usage: UsageSample }>();

function factsOfReport(latest: NonNullable<VmLoopState["latest"]>): { capacity: VmCapacity; usage: UsageSample } {
  let facts = reportFacts.get(latest);
  if (!facts) {
    const report = latest.report;
    facts = { capacity: guestCapacity(report), usage: usageOfReport(report) };
    reportFacts.set(latest, facts);
  }
  return facts;
}

/**
 * What the guest sees, for a VM with no spec to read (standalone): its CPUs, memory and GPUs from
 * the agent's latest Report. Kubernetes VMs take their size from the VM spec instead (what a stop frees).
 */
export function guestCapacity(report: {
  system?: { cpuCount: number; memoryTotalBytes: bigint } | undefined;
  gpu?: { gpus: ReadonlyArray<unknown> } | undefined;
}): VmCapacity {
  return {
    cpuCores: report.system?.cpuCount ? report.system.cpuCount : null,
    memoryBytes: report.system?.memoryTotalBytes ? Number(report.system.memoryTotalBytes) : null,
    gpus: report.gpu?.gpus.length ?? 0,
  };
}
