// Dormant workstations (issue 38 item 4): VMs stopped longer than `dormant.after`, what disks they
// still hold, and when their owner is reminded. Pure: the Kubernetes edge
// (platform/kube/dormant.ts) feeds it the VM's annotations, its PVCs and a clock.
//
// How long a VM has been stopped is durable state on the VM, like ws's other state: the
// `<prefix>dormant` annotation holds {"since": ISO, "notified": ISO?}. It is written the first
// time the collector sees the VM stopped (its time: ws's own last stop when the VM carries one,
// else that moment) and removed when the VM runs again, so a collector restart neither restarts
// the count nor resends a reminder. ws never deletes or resets anything here.
import { lastStopIn } from "../../loop/last-stop.js";
import type { DormantConfig } from "./config.js";

export interface DormantDisk {
  /** The PVC's name. */
  claim: string;
  /** status.capacity.storage (else the request) in bytes; null when the PVC could not be read. */
  bytes: number | null;
  /** spec.storageClassName; null when the PVC names none or could not be read. */
  storageClass: string | null;
  /** VolumeSnapshots of this PVC, when the collector may list them (null: not readable). */
  snapshots: number | null;
}

/** What the annotation says. */
export interface DormantState {
  sinceMs: number;
  notifiedMs?: number;
}

export interface DormantVm {
  namespace: string;
  name: string;
  owner: string | null;
  profile: string;
  stoppedSinceMs: number;
  stoppedSeconds: number;
  disks: DormantDisk[];
  /** The sum of the disks whose size is known. */
  bytes: number;
  /** The last reminder, when one was sent. */
  notifiedMs: number | null;
}

export function dormantKey(prefix: string): string {
  return `${prefix}dormant`;
}

const iso = (ms: number) => new Date(ms).toISOString().replace(/\.\d{3}Z$/, "Z");

export function formatDormantState(state: DormantState): string {
  return JSON.stringify({
    since: iso(state.sinceMs),
    ...(state.notifiedMs !== undefined ? { notified: iso(state.notifiedMs) } : {}),
  });
}

/** The annotation's state, or null when absent or not ours (a malformed value is treated as absent and rewritten). */
export function parseDormantState(text: string | undefined): DormantState | null {
  if (text === undefined || text.length > 1024) return null;
  try {
    const raw: unknown = JSON.parse(text);
    if (typeof raw !== "object" || raw === null) return null;
    const { since, notified } = raw as { since?: unknown; notified?: unknown };
    const sinceMs = typeof since === "string" ? Date.parse(since) : Number.NaN;
    if (!Number.isFinite(sinceMs)) return null;
    const notifiedMs = typeof notified === "string" ? Date.parse(notified) : Number.NaN;
    return { sinceMs, ...(Number.isFinite(notifiedMs) ? { notifiedMs } : {}) };
  } catch {
    return null;
  }
}

export interface DormantPlan {
  /** The state after this look (null: the VM runs; no state). */
  state: DormantState | null;
  /** The annotation to write: a string, null to remove it, undefined to leave it as it is. */
  write: string | null | undefined;
  /** Stopped at least `after`. */
  dormant: boolean;
  /** A reminder is due now (its time is in `state.notifiedMs` and `write`: write first, then send). */
  notify: boolean;
}

/**
 * One look at one VM. `stopped`: the VM is stopped and has no instance. A reminder is due when the
 * VM is dormant and none was sent within `notifyEvery`; the first one goes out as soon as the VM
 * becomes dormant.
 */
export function planDormant(
  vm: {
    annotations: Readonly<Record<string, string>>;
    stopped: boolean;
    /** This collector saw the VM run after ws's last stop: that stop is not when this stop began. */
    ranSinceLastStop?: boolean;
  },
  prefix: string,
  config: DormantConfig,
  nowMs: number,
): DormantPlan {
  const key = dormantKey(prefix);
  const stored = parseDormantState(vm.annotations[key]);
  if (!vm.stopped)
    return { state: null, write: vm.annotations[key] !== undefined ? null : undefined, dormant: false, notify: false };
  // ws's own stop, when the VM carries its record and it is not in the future; else now.
  const lastStopMs = vm.ranSinceLastStop
    ? undefined
    : lastStopIn(vm.annotations as Record<string, string>, prefix)?.atMs;
  const sinceMs = stored?.sinceMs ?? (lastStopMs !== undefined && lastStopMs <= nowMs ? lastStopMs : nowMs);
  const dormant = nowMs - sinceMs >= config.afterSeconds * 1000;
  const notify =
    dormant && (stored?.notifiedMs === undefined || nowMs - stored.notifiedMs >= config.notifyEverySeconds * 1000);
  const state: DormantState = notify
    ? { sinceMs, notifiedMs: nowMs }
    : { sinceMs, ...(stored?.notifiedMs !== undefined ? { notifiedMs: stored.notifiedMs } : {}) };
  const text = formatDormantState(state);
  return { state, write: text === vm.annotations[key] ? undefined : text, dormant, notify };
}

/** "200 GiB", "1.5 TiB", "512 MiB". */
export function formatBytes(bytes: number): string {
  const units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${Number.isInteger(value) ? value : value.toFixed(1)} ${units[unit]}`;
}

export function stoppedDays(vm: Pick<DormantVm, "stoppedSeconds">): number {
  return Math.floor(vm.stoppedSeconds / 86_400);
}

/** What the owner reads (webhook text): how long, how much, what to do; ws itself deletes nothing. */
export function dormantText(vm: DormantVm): string {
  const days = stoppedDays(vm);
  const how = days >= 1 ? `${days} day${days === 1 ? "" : "s"}` : `${Math.floor(vm.stoppedSeconds / 3600)} hours`;
  const who = vm.owner ? `${vm.owner}: ` : "";
  return `${who}your workstation ${vm.namespace}/${vm.name} has been stopped for ${how} and holds ${formatBytes(vm.bytes)}; start it or ask for it to be archived.`;
}

/** One bounded series: dormant VMs and their disk bytes per namespace and StorageClass. */
export interface DormantTotal {
  namespace: string;
  storageClass: string;
  vms: number;
  bytes: number;
}

/** A disk of no known class counts under "unknown"; a VM without PVCs under "none". */
export function dormantTotals(vms: readonly DormantVm[]): DormantTotal[] {
  const rows = new Map<string, DormantTotal>();
  const row = (namespace: string, storageClass: string) => {
    const id = `${namespace}\u0000${storageClass}`;
    const found = rows.get(id) ?? { namespace, storageClass, vms: 0, bytes: 0 };
    rows.set(id, found);
    return found;
  };
  for (const vm of vms) {
    const classes = new Set<string>();
    for (const disk of vm.disks) {
      const storageClass = disk.storageClass ?? "unknown";
      classes.add(storageClass);
      row(vm.namespace, storageClass).bytes += disk.bytes ?? 0;
    }
    if (vm.disks.length === 0) classes.add("none");
    for (const storageClass of classes) row(vm.namespace, storageClass).vms++;
  }
  return [...rows.values()].sort(
    (a, b) => a.namespace.localeCompare(b.namespace) || a.storageClass.localeCompare(b.storageClass),
  );
}
