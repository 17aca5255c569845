// What ws gave back: the VM-, CPU-core-, memory- and GPU-seconds during which VMs that ws itself
// stopped stayed stopped, per namespace and owner. Only ws's own accepted stops open a period
// (not a VM stopped by someone else, not one created Halted); a period closes when the VM runs
// again or is forgotten. Time is counted only while this process watches (from the stop, or from
// this process's start), so a restart or failover never counts a period twice: Prometheus's
// increase() over the counters is the figure a site reports. Pure but for the clock it is given.
import type { VmKey } from "../../model/vm-key.js";
import type { VmCapacity } from "../../model/vm-view.js";

export type { VmCapacity };

export interface GivenBackRow {
  namespace: string;
  owner: string;
  /** VMs of this namespace and owner stopped by ws right now. */
  stoppedNow: number;
  vmSeconds: number;
  cpuCoreSeconds: number;
  memoryByteSeconds: number;
  gpuSeconds: number;
}

interface Period {
  namespace: string;
  owner: string;
  capacity: VmCapacity;
  /** Counted up to here. */
  countedToMs: number;
}

const BINARY: Record<string, number> = { Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40, Pi: 2 ** 50, Ei: 2 ** 60 };
const DECIMAL: Record<string, number> = { k: 1e3, M: 1e6, G: 1e9, T: 1e12, P: 1e15, E: 1e18 };

/** A Kubernetes quantity ("16Gi", "500M", "1.5e9") in bytes, or null when it is not one. */
export function quantityBytes(text: string): number | null {
  const match = /^([0-9]+(?:\.[0-9]+)?(?:e[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$/.exec(text.trim());
  if (!match) return null;
  const unit = match[2];
  const factor = unit === undefined ? 1 : (BINARY[unit] ?? DECIMAL[unit]!);
  return Number(match[1]) * factor;
}

/** CPU as the VM asks for it ("8", "500m", "4 vCPU") in cores, or null. */
export function cpuCores(text: string): number | null {
  const vcpu = /^(\d+) vCPU$/.exec(text);
  if (vcpu) return Number(vcpu[1]);
  const milli = /^(\d+)m$/.exec(text);
  if (milli) return Number(milli[1]) / 1000;
  return /^\d+(?:\.\d+)?$/.test(text) ? Number(text) : null;
}

export class GivenBackLedger {
  private readonly open = new Map<string, Period>();
  private readonly closed = new Map<string, GivenBackRow>();

  constructor(private readonly startedAtMs: number) {}

  /** ws's stop of `vm` was accepted at `atMs`. */
  stoppedByWs(vm: VmKey, atMs: number, owner: string, capacity: VmCapacity): void {
    const id = `${vm.namespace}/${vm.name}`;
    if (this.open.has(id)) return;
    this.open.set(id, { namespace: vm.namespace, owner, capacity, countedToMs: Math.max(atMs, this.startedAtMs) });
  }

  /** The VM runs again (or is gone): its period ends at `atMs`. */
  ended(vm: VmKey, atMs: number): void {
    const id = `${vm.namespace}/${vm.name}`;
    const period = this.open.get(id);
    if (!period) return;
    this.count(period, atMs);
    this.open.delete(id);
  }

  isOpen(vm: VmKey): boolean {
    return this.open.has(`${vm.namespace}/${vm.name}`);
  }

  /** Totals per namespace and owner up to `nowMs`, open periods included; sorted. */
  rows(nowMs: number): GivenBackRow[] {
    for (const period of this.open.values()) this.count(period, nowMs);
    const rows = new Map<string, GivenBackRow>();
    for (const [key, row] of this.closed) rows.set(key, { ...row, stoppedNow: 0 });
    for (const period of this.open.values()) rows.get(`${period.namespace}\u0000${period.owner}`)!.stoppedNow++;
    return [...rows.values()].sort((a, b) => a.namespace.localeCompare(b.namespace) || a.owner.localeCompare(b.owner));
  }

  private count(period: Period, toMs: number): void {
    const seconds = Math.max(0, toMs - period.countedToMs) / 1000;
    period.countedToMs = Math.max(period.countedToMs, toMs);
    const key = `${period.namespace}\u0000${period.owner}`;
    const row = this.closed.get(key) ?? {
      namespace: period.namespace,
      owner: period.owner,
      stoppedNow: 0,
      vmSeconds: 0,
      cpuCoreSeconds: 0,
      memoryByteSeconds: 0,
      gpuSeconds: 0,
    };
    row.vmSeconds += seconds;
    row.cpuCoreSeconds += seconds * (period.capacity.cpuCores ?? 0);
    row.memoryByteSeconds += seconds * (period.capacity.memoryBytes ?? 0);
    row.gpuSeconds += seconds * period.capacity.gpus;
    this.closed.set(key, row);
  }
}

/** A VM's capacity from what its spec asks for (platform/kube/vm-model.ts VmResources). */
export function capacityOf(resources: {
  cpu: string | null;
  memory: string | null;
  gpus: ReadonlyArray<{ count: number }>;
}): VmCapacity {
  return {
    cpuCores: resources.cpu === null ? null : cpuCores(resources.cpu),
    memoryBytes: resources.memory === null ? null : quantityBytes(resources.memory),
    gpus: resources.gpus.reduce((sum, gpu) => sum + gpu.count, 0),
  };
}
