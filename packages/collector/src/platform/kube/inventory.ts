/**
 * The collector's view of the cluster's workstations, kept current by three list-watches (no
 * per-VM polling): VirtualMachines (policy labels/annotations, run strategy, volumes),
 * VirtualMachineInstances (running or not) and virt-launcher pods (the IPs an agent's stream
 * must come from). Listeners hear about every VM whose view changed.
 */
import { Watch } from "@kubernetes/client-node";
import type { BackoffPolicy, Sleep } from "../../lib/retry.js";
import type { KubeClients } from "./client.js";
import { ListWatcher, type ListWatchSource, type WatchEventType } from "./listwatch.js";
import { launcherPodFacts, vmFacts, vmiFacts, type LauncherPodFacts, type VmFacts, type VmiFacts } from "./vm-model.js";

export type { VmVolume } from "./vm-model.js";

export interface InventoryVm extends VmFacts {
  /** The running instance, if any: what the starting page shows of it too. */
  vmi: Pick<VmiFacts, "uid" | "phase" | "nodeName" | "createdAtMs" | "phaseTimes" | "unschedulable"> | null;
  vmiPhase: string | null;
  /** The IP of the VM's running virt-launcher pod (the address its agent connects from). */
  launcherPodIp: string | null;
  /** Every IP of every live launcher pod of this VM (dual stack; both pods during a live migration). */
  launcherPodIps: string[];
}

export type InventoryChange =
  | { kind: "added"; namespace: string; name: string; vm: InventoryVm; previous: null }
  | { kind: "updated"; namespace: string; name: string; vm: InventoryVm; previous: InventoryVm }
  | { kind: "removed"; namespace: string; name: string; vm: null; previous: InventoryVm };

export interface InventoryOptions {
  /** Watch one namespace only (default: all). */
  namespace?: string;
  /** Only VMs matching this label selector, e.g. "workstation.aik8s.run/autostop=enabled". */
  vmLabelSelector?: string;
  watchTimeoutSeconds?: number;
  backoff?: BackoffPolicy;
  random?: () => number;
  sleep?: Sleep;
  onError?: (message: string) => void;
}

const LAUNCHER_SELECTOR = "kubevirt.io=virt-launcher";

function keyOf(namespace: string, name: string): string {
  return `${namespace}/${name}`;
}

function sameView(a: InventoryVm, b: InventoryVm): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

export class KubeInventory {
  private readonly vms = new Map<string, VmFacts>();
  private readonly vmis = new Map<string, VmiFacts>();
  /** Launcher pods by pod key. */
  private readonly pods = new Map<string, LauncherPodFacts>();
  private readonly views = new Map<string, InventoryVm>();
  private readonly listeners = new Set<(change: InventoryChange) => void>();
  private readonly watchers: ListWatcher[];
  private synced = false;

  constructor(
    clients: KubeClients,
    private readonly options: InventoryOptions = {},
  ) {
    const watch = new Watch(clients.kubeConfig);
    const ns = options.namespace;
    const common = {
      watch,
      ...(options.watchTimeoutSeconds !== undefined ? { watchTimeoutSeconds: options.watchTimeoutSeconds } : {}),
      ...(options.backoff ? { backoff: options.backoff } : {}),
      ...(options.random ? { random: options.random } : {}),
      ...(options.sleep ? { sleep: options.sleep } : {}),
      onError: (message: string) => this.options.onError?.(message),
    };
    const kubevirtSource = (plural: string, labelSelector?: string): ListWatchSource => ({
      path: ns
        ? `/apis/kubevirt.io/v1/namespaces/${encodeURIComponent(ns)}/${plural}`
        : `/apis/kubevirt.io/v1/${plural}`,
      ...(labelSelector ? { labelSelector } : {}),
      list: async () => {
        const params = { group: "kubevirt.io", version: "v1", plural, ...(labelSelector ? { labelSelector } : {}) };
        const list: unknown = ns
          ? await clients.custom.listNamespacedCustomObject({ ...params, namespace: ns })
          : await clients.custom.listClusterCustomObject(params);
        return listResult(list);
      },
    });
    const podSource: ListWatchSource = {
      path: ns ? `/api/v1/namespaces/${encodeURIComponent(ns)}/pods` : "/api/v1/pods",
      labelSelector: LAUNCHER_SELECTOR,
      list: async () => {
        const list = ns
          ? await clients.core.listNamespacedPod({ namespace: ns, labelSelector: LAUNCHER_SELECTOR })
          : await clients.core.listPodForAllNamespaces({ labelSelector: LAUNCHER_SELECTOR });
        return listResult(list);
      },
    };
    this.watchers = [
      new ListWatcher(
        kubevirtSource("virtualmachines", options.vmLabelSelector),
        this.cacheHandler(this.vms, vmFacts, (f) => [keyOf(f.namespace, f.name)]),
        common,
      ),
      new ListWatcher(
        kubevirtSource("virtualmachineinstances"),
        this.cacheHandler(this.vmis, vmiFacts, (f) => [keyOf(f.namespace, f.name)]),
        common,
      ),
      new ListWatcher(
        podSource,
        this.cacheHandler(
          this.pods,
          launcherPodFacts,
          (f) => [keyOf(f.namespace, f.vmName)],
          (f) => keyOf(f.namespace, f.name),
        ),
        common,
      ),
    ];
  }

  /** Starts watching; resolves once VMs, VMIs and launcher pods have each been listed once. */
  async start(): Promise<void> {
    await Promise.all(this.watchers.map((w) => w.start()));
    // Views are first composed once all three lists are in, so each VM is announced once, whole.
    this.synced = true;
    for (const vmKey of this.vms.keys()) this.refresh(vmKey);
  }

  async stop(): Promise<void> {
    await Promise.all(this.watchers.map((w) => w.stop()));
  }

  /** True once the first lists are in: before that, an absent VM may simply not be known yet. */
  isSynced(): boolean {
    return this.synced;
  }

  get(namespace: string, name: string): InventoryVm | undefined {
    return this.views.get(keyOf(namespace, name));
  }

  list(): InventoryVm[] {
    return [...this.views.values()];
  }

  /** Calls back on every added, changed or removed VM view; returns an unsubscribe function. */
  onChange(listener: (change: InventoryChange) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Lists and watches done so far, per resource, for diagnostics. */
  watchStats(): { vms: ListWatcher["stats"]; vmis: ListWatcher["stats"]; pods: ListWatcher["stats"] } {
    const [vms, vmis, pods] = this.watchers.map((w) => ({ ...w.stats }));
    return { vms: vms!, vmis: vmis!, pods: pods! };
  }

  private cacheHandler<T>(
    cache: Map<string, T>,
    project: (obj: unknown) => T | null,
    affectedVms: (facts: T) => string[],
    cacheKey: (facts: T) => string = (f) => affectedVms(f)[0]!,
  ) {
    return {
      replace: (items: unknown[]) => {
        const touched = new Set<string>();
        for (const facts of cache.values()) for (const k of affectedVms(facts)) touched.add(k);
        cache.clear();
        for (const item of items) {
          const facts = project(item);
          if (!facts) continue;
          cache.set(cacheKey(facts), facts);
          for (const k of affectedVms(facts)) touched.add(k);
        }
        for (const k of touched) this.refresh(k);
      },
      event: (type: WatchEventType, object: unknown) => {
        const facts = project(object);
        if (!facts) return;
        const k = cacheKey(facts);
        const before = cache.get(k);
        if (type === "DELETED") cache.delete(k);
        else cache.set(k, facts);
        const touched = new Set([...(before ? affectedVms(before) : []), ...affectedVms(facts)]);
        for (const vmKey of touched) this.refresh(vmKey);
      },
    };
  }

  private compose(vmKey: string): InventoryVm | null {
    const vm = this.vms.get(vmKey);
    if (!vm) return null;
    const vmi = this.vmis.get(vmKey) ?? null;
    const pods = [...this.pods.values()]
      .filter(
        (p) => p.namespace === vm.namespace && p.vmName === vm.name && p.phase !== "Succeeded" && p.phase !== "Failed",
      )
      .sort((a, b) => Number(b.phase === "Running") - Number(a.phase === "Running") || a.name.localeCompare(b.name));
    const ips = [...new Set(pods.flatMap((p) => p.ips))];
    const running = pods.find((p) => p.phase === "Running" && p.ips.length > 0);
    return {
      ...vm,
      vmi: vmi
        ? {
            uid: vmi.uid,
            phase: vmi.phase,
            nodeName: vmi.nodeName,
            createdAtMs: vmi.createdAtMs,
            phaseTimes: vmi.phaseTimes,
            unschedulable: vmi.unschedulable,
          }
        : null,
      vmiPhase: vmi?.phase ?? null,
      launcherPodIp: running?.ips[0] ?? null,
      launcherPodIps: ips,
    };
  }

  private refresh(vmKey: string): void {
    if (!this.synced) return;
    const previous = this.views.get(vmKey) ?? null;
    const next = this.compose(vmKey);
    let change: InventoryChange | null = null;
    if (next && !previous)
      change = { kind: "added", namespace: next.namespace, name: next.name, vm: next, previous: null };
    else if (next && previous && !sameView(previous, next))
      change = { kind: "updated", namespace: next.namespace, name: next.name, vm: next, previous };
    else if (!next && previous)
      change = { kind: "removed", namespace: previous.namespace, name: previous.name, vm: null, previous };
    if (next) this.views.set(vmKey, next);
    else this.views.delete(vmKey);
    if (!change) return;
    for (const listener of [...this.listeners]) {
      try {
        listener(change);
      } catch (err) {
        this.options.onError?.(
          `inventory listener failed on ${vmKey}: ${err instanceof Error ? err.message : String(err)}`,
        );
      }
    }
  }
}

function listResult(list: unknown): { items: unknown[]; resourceVersion: string } {
  const l = list as { items?: unknown; metadata?: { resourceVersion?: unknown } };
  const items = Array.isArray(l.items) ? l.items : [];
  const rv = l.metadata?.resourceVersion;
  if (typeof rv !== "string" || rv === "") throw new Error("list answer without metadata.resourceVersion");
  return { items, resourceVersion: rv };
}
