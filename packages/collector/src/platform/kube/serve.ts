// Kubernetes mode: VMs and their policy come from the KubeVirt API, a stop is
// the KubeVirt stop subresource after the safety check, decisions are audited
// as Events and annotations, and only the leader replica acts.
import * as grpc from "@grpc/grpc-js";
import type { Logger } from "@ws/protocol";
import type { VmKey } from "../../model/vm-key.js";
import type { CollectorConfig } from "../config.js";
import type { CollectorPolicyConfig } from "../../engine/config.js";
import { restoreRecord } from "../../engine/persist.js";
import type { Fleet } from "../../loop/fleet.js";
import type { CollectorMode } from "../mode.js";
import type { AuthResult } from "../../agents/server.js";
import { runnableOf, type Runnable } from "../../lib/runnable.js";
import type { CollectorStats } from "../../lib/stats.js";
import { readFileSync } from "node:fs";
import { capacityOf } from "../../outreach/adoption/given-back.js";
import { kubeActuator } from "./actuator.js";
import { KubeAudit, auditEvent } from "./audit.js";
import { contextNamespace, createKubeClients, describeError, loadKubeConfig, type KubeClients } from "./client.js";
import { CredentialIssuer } from "./credentials.js";
import { checkPeerIdentity } from "./identity.js";
import { KubeInventory } from "./inventory.js";
import { LeaderThread } from "./leader-thread.js";
import { LeaderLabel } from "./leader-label.js";
import { VmStopper } from "./stop.js";
import { VmStarter, kubeDisputeWriter, kubeReturnsWriter, kubeStartPlatform } from "./start.js";
import { WriteQueue } from "./write-queue.js";
import { isStopInEffect } from "./vm-model.js";
import { describeFreed, gpuCountOf, vmOwner } from "./vm-resources.js";
import type { InventoryVm } from "./inventory.js";
import type { VmPlatformDetails } from "../../model/vm-view.js";
import type { DormantVm } from "../../outreach/dormant/report.js";
import { resolveVmPolicy } from "../../model/policy-source.js";
import { DormantWatch } from "./dormant.js";

/** State-annotation PATCHes in flight at once (platform/kube/write-queue.ts). */
const STATE_WRITE_CONCURRENCY = 8;

/** The retry hint agents get when this replica steps down. */
const LEADER_CHANGE_RETRY_MS = 5_000;

/** True when every annotation of `wanted` already has that value (null: absent) in `current`. */
export function annotationsSay(
  current: Readonly<Record<string, string>> | undefined,
  wanted: Readonly<Record<string, string | null>>,
): boolean {
  if (!current) return false;
  for (const [key, value] of Object.entries(wanted)) if ((current[key] ?? null) !== value) return false;
  return true;
}

/** The per-VM credential issuer, when kubernetes.credentials is configured (docs/credentials.md). */
function issuerFor(
  config: KubernetesModeConfig,
  clients: KubeClients,
  tokenKey: Buffer | undefined,
  log: Logger,
): CredentialIssuer | undefined {
  const settings = config.kubernetes.credentials;
  if (!settings || !tokenKey) return undefined;
  return new CredentialIssuer(clients, tokenKey, {
    settings: {
      addresses: settings.addresses,
      ...(settings.caFile ? { caPem: readFileSync(settings.caFile, "utf8") } : {}),
      ...(settings.serverName ? { serverName: settings.serverName } : {}),
    },
    log: (level, message) => log(level, message),
  });
}

/** What Kubernetes mode reads of the collector's config: its own section and the report interval. */
export type KubernetesModeConfig = Pick<CollectorConfig, "kubernetes" | "reportIntervalSeconds" | "dormant">;

/** What the elector's callbacks reach: the fleet once it exists, and this term's writes. */
interface LeaderTerm {
  /** Set once the fleet exists (the mode's runnables are asked for with it). */
  fleet: Fleet | undefined;
  /** VMs whose state annotations this replica wrote (or found already written) since it last became the leader. */
  written: Set<string>;
}

/** The parts of Kubernetes mode, built once; the mode's functions and runnables close over them. */
interface KubeParts {
  config: KubernetesModeConfig;
  log: Logger;
  prefix: string;
  clients: KubeClients;
  inventory: KubeInventory;
  credentials: CredentialIssuer | undefined;
  audit: KubeAudit;
  leaseNamespace: string;
  leaderLabel: LeaderLabel;
  elector: LeaderThread;
  term: LeaderTerm;
  vmOf: (vm: VmKey) => InventoryVm | undefined;
  tracked: (labels: Record<string, string>) => boolean;
  writeFailed: (what: string) => (result: { ok: boolean; message: string }) => void;
}

export async function kubernetesMode(
  config: KubernetesModeConfig,
  policy: CollectorPolicyConfig,
  log: Logger,
  stats: CollectorStats,
  nowMs: () => number,
  tokenKey?: Buffer,
  links: { startUrl?: (vm: VmKey, nowMs: number) => string | undefined } = {},
): Promise<CollectorMode> {
  const parts = kubeParts(config, policy.annotationPrefix, log, stats, nowMs, tokenKey);
  const { clients, inventory, prefix, vmOf, tracked } = parts;
  // The owner label (platform.example.com/user in the field guides) and what a stop frees.
  const ownerOf = (facts: InventoryVm) => vmOwner(facts.labels, config.kubernetes.ownerLabel);
  const actuator = kubeActuator({
    clients,
    vmOf,
    audit: parts.audit,
    stopper: new VmStopper(clients),
    stateWrites: stateWriteQueue(parts),
    prefix,
    nowMs,
    log,
    ownerOf,
    ...(links.startUrl ? { startUrl: links.startUrl } : {}),
  });
  const policySource = {
    defaults: { ...policy.defaults, reportIntervalSeconds: config.reportIntervalSeconds },
    profiles: policy.profiles,
    prefix,
    metadataFor: (vm: VmKey) => {
      const facts = vmOf(vm);
      return { labels: facts?.labels ?? {}, annotations: facts?.annotations ?? {} };
    },
  };
  const dormant = dormantWatchFor(parts, ownerOf, policySource, nowMs);
  return {
    name: "kubernetes",
    dormant: dormant.port,
    leader: () => parts.elector.isLeader(),
    fleetSize: () => inventory.list().filter((vm) => tracked(vm.labels)).length,
    // The start link's page and button (platform/kube/start.ts).
    startPlatform: kubeStartPlatform(
      () => inventory.list(),
      vmOf,
      new VmStarter(clients),
      config.kubernetes.ownerLabel,
      prefix,
      kubeDisputeWriter(clients, prefix),
      (vm, annotations) => parts.audit.patchAnnotations(vm, annotations),
      kubeReturnsWriter(clients, prefix),
    ),
    policySource,
    restore: (vm, now) => {
      const facts = vmOf(vm);
      if (!facts) return undefined;
      const restored = restoreRecord(facts.annotations, now, prefix);
      for (const problem of restored.problems) log("warn", `${vm.namespace}/${vm.name}: ${problem}`);
      return restored.record;
    },
    vmDetails: (vm) => {
      const facts = vmOf(vm);
      return facts ? detailsOf(facts, ownerOf) : undefined;
    },
    vmRunning: (vm) => {
      const facts = vmOf(vm);
      return facts ? !isStopInEffect(facts, facts.vmi) && facts.vmi !== null : undefined;
    },
    authenticate: (vm, peer) => authenticateAgent(parts, ownerOf, vm, peer),
    actuator,
    runnables: (fleet) => [
      ...kubeRunnables(parts, fleet),
      runnableOf(
        "dormant watch",
        () => dormant.watch.start(),
        () => dormant.watch.stop(),
      ),
    ],
  };
}

/** VMs stopped for weeks, their disks and a monthly reminder (platform/kube/dormant.ts); the reminder goes where serve/serve.ts says. */
function dormantWatchFor(
  parts: KubeParts,
  ownerOf: (facts: InventoryVm) => string | null,
  policySource: Parameters<typeof resolveVmPolicy>[0],
  nowMs: () => number,
): { watch: DormantWatch; port: NonNullable<CollectorMode["dormant"]> } {
  let remind: (
    vm: DormantVm,
    metadata: { labels: Record<string, string>; annotations: Record<string, string> },
  ) => void = () => {};
  const watch = new DormantWatch({
    clients: parts.clients,
    list: () => parts.inventory.list(),
    tracked: (vm) => parts.tracked(vm.labels),
    prefix: parts.prefix,
    config: parts.config.dormant,
    nowMs,
    isLeader: () => parts.elector.isLeader(),
    ownerOf,
    profileOf: (vm) => resolveVmPolicy(policySource, vm, undefined).policy.profile,
    patch: (vm, annotations) => parts.audit.patchAnnotations(vm, annotations),
    notify: (vm, facts) => remind(vm, { labels: facts.labels, annotations: facts.annotations }),
    log: (level, message) => parts.log(level, message),
  });
  return {
    watch,
    port: {
      report: () => watch.report(),
      onReminder: (send) => {
        remind = send;
      },
    },
  };
}

/** The API clients, the inventory, the audit, the leader label and the elector, not yet started. */
function kubeParts(
  config: KubernetesModeConfig,
  prefix: string,
  log: Logger,
  stats: CollectorStats,
  nowMs: () => number,
  tokenKey: Buffer | undefined,
): KubeParts {
  const kubeSource = config.kubernetes.kubeconfig
    ? { kubeconfigPath: config.kubernetes.kubeconfig }
    : { inCluster: true };
  const kc = loadKubeConfig(kubeSource);
  const clients = createKubeClients(kc, {
    onRequest: (info) => stats.countKubeRequest(info.method, info.status === null ? "timeout" : String(info.status)),
  });
  const inventory = new KubeInventory(clients, {
    onError: (message) => log("warn", `kubernetes watch: ${message}`),
    ...(config.kubernetes.watchNamespace ? { namespace: config.kubernetes.watchNamespace } : {}),
  });
  const leaseNamespace = config.kubernetes.kubeconfig
    ? config.kubernetes.leaseNamespace
    : (contextNamespace(kc) ?? config.kubernetes.leaseNamespace);
  // The agents' Service selects this label: the leader carries it, nobody else (platform/kube/leader-label.ts).
  const leaderLabel = new LeaderLabel(clients, {
    namespace: leaseNamespace,
    podName: config.kubernetes.identity,
    onError: (message) => log("warn", `leader label: ${message}`),
    onInfo: (message) => log("info", `leader label: ${message}`),
  });
  const term: LeaderTerm = { fleet: undefined, written: new Set() };
  return {
    config,
    log,
    prefix,
    clients,
    inventory,
    credentials: issuerFor(config, clients, tokenKey, log),
    audit: new KubeAudit(clients, { reportingInstance: config.kubernetes.identity, nowMs, annotationPrefix: prefix }),
    leaseNamespace,
    leaderLabel,
    elector: leaderElector(config, log, leaderLabel, leaseNamespace, term, kubeSource, stats, nowMs),
    term,
    vmOf: (vm) => inventory.get(vm.namespace, vm.name),
    tracked: (labels) => labels[`${prefix}autostop`] !== undefined,
    writeFailed: (what) => (result) => {
      if (!result.ok) log("warn", `${what} failed: ${result.message}`);
    },
  };
}

/** The Lease elector, on a thread of its own so that a reconnect burst on this event loop cannot starve the renewals (platform/kube/leader-thread.ts). */
function leaderElector(
  config: KubernetesModeConfig,
  log: Logger,
  leaderLabel: LeaderLabel,
  leaseNamespace: string,
  term: LeaderTerm,
  source: Parameters<typeof loadKubeConfig>[0],
  stats: CollectorStats,
  nowMs: () => number,
): LeaderThread {
  return new LeaderThread({
    source,
    settings: {
      namespace: leaseNamespace,
      leaseName: config.kubernetes.leaseName,
      identity: config.kubernetes.identity,
    },
    nowMs,
    onRequest: (method, status) => stats.countKubeRequest(method, status === null ? "timeout" : String(status)),
    onStartedLeading: () => {
      log("info", "became the leader: acting on VMs", { identity: config.kubernetes.identity });
      term.written.clear();
      // Timers resume from the annotations the previous leader wrote.
      term.fleet?.resetRecords();
      void leaderLabel.want(true);
    },
    onStoppedLeading: (reason) => {
      log("warn", `lost the leadership (${reason}): no longer acting; agents will reconnect to the leader`);
      void leaderLabel.want(false);
      // The agents come back spread over 2.5–7.5 s (the hint ±50 %), by when the new leader is elected, not as one burst.
      term.fleet?.closeAllSessions(
        grpc.status.UNAVAILABLE,
        "this collector replica is no longer the leader; reconnect",
        LEADER_CHANGE_RETRY_MS,
      );
    },
    onError: (message) => log("warn", `leader election: ${message}`),
  });
}

/** State annotations: bounded PATCHes in flight, a VM's waiting write merged with its newer one. */
function stateWriteQueue(parts: KubeParts): WriteQueue<Record<string, string | null>> {
  return new WriteQueue<Record<string, string | null>>({
    concurrency: STATE_WRITE_CONCURRENCY,
    merge: (older, newer) => ({ ...older, ...newer }),
    write: async (id, annotations) => {
      // A replica that stepped down meanwhile leaves the VM to the new leader (it restores and writes on its transitions).
      if (!parts.elector.isLeader()) return;
      const [namespace = "", name = ""] = id.split("/");
      // A reconnect burst after a restart or a failover: the first write of this term mostly says
      // what the annotations (restored from) already say. Only then is the inventory's copy known
      // to be this term's latest; after this replica's own first write it may lag behind it.
      const written = parts.term.written;
      const first = !written.has(id);
      written.add(id);
      if (first && annotationsSay(parts.vmOf({ namespace, name })?.annotations, annotations)) return;
      parts.writeFailed("state annotations")(await parts.audit.patchAnnotations({ namespace, name }, annotations));
    },
  });
}

/** Owner, what a stop frees, declared GPUs and capacity of a VM, from its VirtualMachine. */
function detailsOf(facts: InventoryVm, ownerOf: (facts: InventoryVm) => string | null): VmPlatformDetails {
  const owner = ownerOf(facts);
  const frees = describeFreed(facts.resources);
  return {
    ...(owner ? { owner } : {}),
    ...(frees ? { frees } : {}),
    gpuCount: gpuCountOf(facts.resources),
    capacity: capacityOf(facts.resources),
    gpuDevices: facts.resources.gpus.map((gpu) => ({ deviceName: gpu.deviceName, count: gpu.count })),
  };
}

/** After the token: the VM must be known and the peer its launcher pod (a refusal is an Event on the VM). */
async function authenticateAgent(
  parts: KubeParts,
  ownerOf: (facts: InventoryVm) => string | null,
  vm: VmKey,
  peer: string,
): Promise<AuthResult> {
  const facts = parts.vmOf(vm);
  if (!facts) {
    return {
      ok: false,
      code: grpc.status.PERMISSION_DENIED,
      kind: "unknown-vm",
      reason: `no VirtualMachine ${vm.namespace}/${vm.name} is known`,
    };
  }
  const verdict = checkPeerIdentity(peer, vm, facts.launcherPodIps);
  if (verdict.ok) return { ok: true };
  const owner = ownerOf(facts);
  void parts.audit
    .recordEvent(
      { namespace: vm.namespace, name: vm.name, uid: facts.uid },
      auditEvent("IdentityRejected", owner ? `${verdict.reason} (owner ${owner})` : verdict.reason),
    )
    .then(parts.writeFailed("identity event"));
  return { ok: false, code: grpc.status.PERMISSION_DENIED, reason: verdict.reason };
}

/**
 * Kubernetes mode's runnables, for serve/manager.ts: the list-watch (synced before anything
 * listens), the leader label and the elector; stopped in reverse (the Lease released first).
 */
function kubeRunnables(parts: KubeParts, fleet: Fleet): Runnable[] {
  const { inventory, credentials, tracked, leaderLabel, elector, log, config } = parts;
  parts.term.fleet = fleet;
  return [
    {
      name: "kubernetes list-watch",
      async start() {
        inventory.onChange((change) => {
          const vm = { namespace: change.namespace, name: change.name };
          if (change.kind !== "removed" && tracked(change.vm.labels)) credentials?.observe(change.vm);
          if (change.kind === "removed") fleet.remove(vm);
          else if (tracked(change.vm.labels) || (change.previous && tracked(change.previous.labels))) fleet.track(vm);
        });
        try {
          await inventory.start();
        } catch (error) {
          throw new Error(`cannot watch VirtualMachines: ${describeError(error)}`);
        }
        for (const vm of inventory.list()) if (tracked(vm.labels)) fleet.track(vm);
        for (const vm of inventory.list()) if (tracked(vm.labels)) credentials?.observe(vm);
        return () => inventory.stop();
      },
    },
    {
      name: "leader label",
      start() {
        void leaderLabel.start();
        return () => leaderLabel.close();
      },
    },
    {
      name: "leader election",
      start() {
        elector.start();
        log("info", "kubernetes inventory synced", {
          vms: inventory.list().length,
          lease: `${parts.leaseNamespace}/${config.kubernetes.leaseName}`,
        });
        return () => elector.stop({ release: true });
      },
    },
  ];
}
