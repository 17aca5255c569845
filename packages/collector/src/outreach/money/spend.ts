// What the fleet holds and what it costs (docs/cost.md): per VM, the seconds it was held (running),
// in use (the engine's Active: a person or accepted work), given back (stopped by ws's own stop)
// and would have been given back in enforce mode (observe mode past its would-stop), each times
// the VM's cores, memory and GPUs, and in money when prices are configured. Summed per namespace,
// owner and profile. Pure but for the clock it is given: a sample at each tick integrates the
// time since the VM's previous sample under the previous sample's state (a step function), so the
// figures never count time this process did not watch. Restarts: see `maxGapMs` and docs/cost.md.
import type { VmCapacity } from "../../model/vm-view.js";
import { gpuHourPrice, type Prices } from "./prices.js";

export const SPEND_KINDS = ["held", "inUse", "givenBack", "wouldGiveBack"] as const;
export type SpendKind = (typeof SPEND_KINDS)[number];

/** One VM at one sample: what it holds and which kinds it counts under now. */
export interface VmHolding {
  namespace: string;
  name: string;
  owner: string;
  profile: string;
  capacity: VmCapacity;
  /** GPUs by device name (the VM spec's `gpus`), for the price per device; their counts sum to capacity.gpus. */
  gpuDevices: ReadonlyArray<{ deviceName: string; count: number }>;
  kinds: Readonly<Record<SpendKind, boolean>>;
}

/** Seconds of each resource, and money when prices are configured (else 0). */
export interface ResourceSeconds {
  vm: number;
  cpuCore: number;
  memoryGiB: number;
  gpu: number;
  money: number;
}

export interface SpendRow {
  namespace: string;
  owner: string;
  profile: string;
  vms: number;
  spend: Record<SpendKind, ResourceSeconds>;
}

const zero = (): ResourceSeconds => ({ vm: 0, cpuCore: 0, memoryGiB: 0, gpu: 0, money: 0 });
const zeros = (): Record<SpendKind, ResourceSeconds> => ({
  held: zero(),
  inUse: zero(),
  givenBack: zero(),
  wouldGiveBack: zero(),
});

/** What one hour of `holding` costs under `prices` (0 without prices). */
export function hourlyCost(holding: Pick<VmHolding, "capacity" | "gpuDevices">, prices: Prices | undefined): number {
  if (!prices) return 0;
  // GPUs the spec counts but names no device of (standalone, a spec read before names were kept): the default price.
  const named = holding.gpuDevices.reduce((sum, g) => sum + g.count, 0);
  const gpus =
    holding.gpuDevices.reduce((sum, g) => sum + g.count * gpuHourPrice(prices, g.deviceName), 0) +
    Math.max(0, holding.capacity.gpus - named) * (prices.gpuHour.default ?? 0);
  return (
    (holding.capacity.cpuCores ?? 0) * prices.cpuCoreHour +
    ((holding.capacity.memoryBytes ?? 0) / 2 ** 30) * prices.memoryGiBHour +
    gpus
  );
}

/** `seconds` of `holding` as resource-seconds and money. */
export function resourceSeconds(
  holding: Pick<VmHolding, "capacity" | "gpuDevices">,
  seconds: number,
  prices: Prices | undefined,
): ResourceSeconds {
  return {
    vm: seconds,
    cpuCore: seconds * (holding.capacity.cpuCores ?? 0),
    memoryGiB: (seconds * (holding.capacity.memoryBytes ?? 0)) / 2 ** 30,
    gpu: seconds * holding.capacity.gpus,
    money: (seconds / 3600) * hourlyCost(holding, prices),
  };
}

function add(into: ResourceSeconds, more: ResourceSeconds): void {
  into.vm += more.vm;
  into.cpuCore += more.cpuCore;
  into.memoryGiB += more.memoryGiB;
  into.gpu += more.gpu;
  into.money += more.money;
}

interface VmEntry {
  holding: VmHolding;
  atMs: number;
  totals: Record<SpendKind, ResourceSeconds>;
}

export interface SpendLedgerOptions {
  prices?: Prices;
  /**
   * The longest stretch one sample vouches for: a gap longer than this (the process was paused,
   * the event loop stalled) counts only this much, so a figure never holds time nobody watched.
   */
  maxGapMs: number;
}

const groupKey = (h: Pick<VmHolding, "namespace" | "owner" | "profile">) =>
  `${h.namespace}\u0000${h.owner}\u0000${h.profile}`;

export class SpendLedger {
  private readonly vms = new Map<string, VmEntry>();
  /** Totals of VMs no longer sampled, so a group's counters never go down. */
  private readonly gone = new Map<string, SpendRow>();

  constructor(private readonly options: SpendLedgerOptions) {}

  get prices(): Prices | undefined {
    return this.options.prices;
  }

  /** The fleet at `nowMs`: each VM's time since its previous sample counts under that sample's kinds. */
  sample(holdings: Iterable<VmHolding>, nowMs: number): void {
    const seen = new Set<string>();
    for (const holding of holdings) {
      seen.add(`${holding.namespace}/${holding.name}`);
      this.sampleOne(holding, nowMs);
    }
    for (const [id, entry] of this.vms)
      if (!seen.has(id)) {
        this.count(entry, nowMs);
        this.retire(entry);
        this.vms.delete(id);
      }
  }

  /** One VM at `nowMs` (its state changed): its time since its previous sample counts under that sample's kinds. */
  sampleOne(holding: VmHolding, nowMs: number): void {
    const id = `${holding.namespace}/${holding.name}`;
    const entry = this.vms.get(id);
    if (!entry) {
      this.vms.set(id, { holding, atMs: nowMs, totals: zeros() });
      return;
    }
    this.count(entry, nowMs);
    // A VM whose owner or profile changed starts a new group: what it spent stays with the old one.
    if (groupKey(entry.holding) !== groupKey(holding)) {
      this.retire(entry);
      entry.totals = zeros();
    }
    entry.holding = holding;
  }

  /** One VM's totals since this process first sampled it (the VM page). */
  vm(namespace: string, name: string): Record<SpendKind, ResourceSeconds> | undefined {
    return this.vms.get(`${namespace}/${name}`)?.totals;
  }

  /** The totals of one namespace, owner and profile (the VM page's group), VMs gone since included. */
  group(namespace: string, owner: string, profile: string): SpendRow {
    const key = groupKey({ namespace, owner, profile });
    const gone = this.gone.get(key);
    const row: SpendRow = { namespace, owner, profile, vms: 0, spend: gone ? copy(gone.spend) : zeros() };
    for (const entry of this.vms.values()) {
      if (groupKey(entry.holding) !== key) continue;
      row.vms++;
      for (const kind of SPEND_KINDS) add(row.spend[kind], entry.totals[kind]);
    }
    return row;
  }

  /** Totals per namespace, owner and profile, VMs gone since included; sorted. */
  rows(): SpendRow[] {
    const rows = new Map<string, SpendRow>();
    for (const [key, row] of this.gone) rows.set(key, { ...row, vms: 0, spend: copy(row.spend) });
    for (const entry of this.vms.values()) {
      const key = groupKey(entry.holding);
      const row = rows.get(key) ?? {
        namespace: entry.holding.namespace,
        owner: entry.holding.owner,
        profile: entry.holding.profile,
        vms: 0,
        spend: zeros(),
      };
      row.vms++;
      for (const kind of SPEND_KINDS) add(row.spend[kind], entry.totals[kind]);
      rows.set(key, row);
    }
    return [...rows.values()].sort(
      (a, b) =>
        a.namespace.localeCompare(b.namespace) || a.owner.localeCompare(b.owner) || a.profile.localeCompare(b.profile),
    );
  }

  private count(entry: VmEntry, nowMs: number): void {
    const seconds = Math.min(Math.max(0, nowMs - entry.atMs), this.options.maxGapMs) / 1000;
    entry.atMs = Math.max(entry.atMs, nowMs);
    if (seconds === 0) return;
    const spent = resourceSeconds(entry.holding, seconds, this.options.prices);
    for (const kind of SPEND_KINDS) if (entry.holding.kinds[kind]) add(entry.totals[kind], spent);
  }

  private retire(entry: VmEntry): void {
    const key = groupKey(entry.holding);
    const row = this.gone.get(key) ?? {
      namespace: entry.holding.namespace,
      owner: entry.holding.owner,
      profile: entry.holding.profile,
      vms: 0,
      spend: zeros(),
    };
    for (const kind of SPEND_KINDS) add(row.spend[kind], entry.totals[kind]);
    this.gone.set(key, row);
  }
}

function copy(spend: Record<SpendKind, ResourceSeconds>): Record<SpendKind, ResourceSeconds> {
  return {
    held: { ...spend.held },
    inUse: { ...spend.inUse },
    givenBack: { ...spend.givenBack },
    wouldGiveBack: { ...spend.wouldGiveBack },
  };
}

/** Which kinds a VM counts under, from the engine's view of it (pure; the rule of docs/cost.md). */
export function spendKinds(vm: {
  /** The platform says an instance runs (Kubernetes); undefined where nothing tells (standalone: a connected agent runs). */
  running: boolean | undefined;
  connected: boolean;
  state: string;
  /** ws's own accepted stop holds the VM stopped (outreach/adoption/given-back.ts). */
  stoppedByWs: boolean;
  /** Observe mode and the would-stop moment has passed: enforce mode would have stopped it. */
  wouldHaveStopped: boolean;
}): Record<SpendKind, boolean> {
  const held = vm.running ?? (vm.connected && vm.state !== "Stopped" && vm.state !== "Stopping");
  return {
    held,
    inUse: held && vm.state === "Active",
    givenBack: !held && vm.stoppedByWs,
    wouldGiveBack: held && vm.wouldHaveStopped,
  };
}
