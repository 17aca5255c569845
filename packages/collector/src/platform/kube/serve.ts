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
import { VmStarter, kubeDisputeWriter, kubeStartPlatform } from "./start.js";
import { WriteQueue } from "./write-queue.js";
import { isStopInEffect } from "./vm-model.js";
import { describeFreed, gpuCountOf, vmOwner } from "./vm-resources.js";
import type { InventoryVm } from "./inventory.js";
import type { VmPlatformDetails } from "../../model/vm-view.js";
import type { DormantVm } from "../../dormant/report.js";
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
  config: CollectorConfig,
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

export async function kubernetesMode(
  config: CollectorConfig,
  policy: CollectorPolicyConfig,
  log: Logger,
  stats: CollectorStats,
  nowMs: () => number,
  tokenKey?: Buffer,
  links: { startUrl?: (vm: VmKey, nowMs: number) => string | undefined } = {},
): Promise<CollectorMode> {
  const kubeSource = config.kubernetes.kubeconfig
    ? { kubeconfigPath: config.kubernetes.kubeconfig }
    : { inCluster: true };
  const kc = loadKubeConfig(kubeSource);
  const clients = createKubeClients(kc, {
    onRequest: (info) => stats.countKubeRequest(info.method, info.status === null ? "timeout" : String(info.status)),
  });
  const prefix = policy.annotationPrefix;
  const inventory = new KubeInventory(clients, {
    onError: (message) => log("warn", `kubernetes watch: ${message}`),
    ...(config.kubernetes.watchNamespace ? { namespace: config.kubernetes.watchNamespace } : {}),
  });
  const credentials = issuerFor(config, clients, tokenKey, log);
  const stopper = new VmStopper(clients);
  const audit = new KubeAudit(clients, {
    reportingInstance: config.kubernetes.identity,
    nowMs,
    annotationPrefix: prefix,
  });
  const leaseNamespace = config.kubernetes.kubeconfig
    ? config.kubernetes.leaseNamespace
    : (contextNamespace(kc) ?? config.kubernetes.leaseNamespace);
  let fleetRef: Fleet | undefined;
  // The agents' Service selects this label: the leader carries it, nobody else (platform/kube/leader-label.ts).
  const leaderLabel = new LeaderLabel(clients, {
    namespace: leaseNamespace,
    podName: config.kubernetes.identity,
    onError: (message) => log("warn", `leader label: ${message}`),
    onInfo: (message) => log("info", `leader label: ${message}`),
  });

  /** VMs whose state annotations this replica wrote (or found already written) since it last became the leader. */
  const writtenThisTerm = new Set<string>();
  // On a thread of its own, so that a reconnect burst on this event loop cannot starve the renewals (platform/kube/leader-thread.ts).
  const elector = new LeaderThread({
    source: kubeSource,
    settings: {
      namespace: leaseNamespace,
      leaseName: config.kubernetes.leaseName,
      identity: config.kubernetes.identity,
    },
    nowMs,
    onRequest: (method, status) => stats.countKubeRequest(method, status === null ? "timeout" : String(status)),
    onStartedLeading: () => {
      log("info", "became the leader: acting on VMs", { identity: config.kubernetes.identity });
      writtenThisTerm.clear();
      // Timers resume from the annotations the previous leader wrote.
      fleetRef?.resetRecords();
      void leaderLabel.want(true);
    },
    onStoppedLeading: (reason) => {
      log("warn", `lost the leadership (${reason}): no longer acting; agents will reconnect to the leader`);
      void leaderLabel.want(false);
      // The agents come back spread over 2.5–7.5 s (the hint ±50 %), by when the new leader is elected, not as one burst.
      fleetRef?.closeAllSessions(
        grpc.status.UNAVAILABLE,
        "this collector replica is no longer the leader; reconnect",
        LEADER_CHANGE_RETRY_MS,
      );
    },
    onError: (message) => log("warn", `leader election: ${message}`),
  });

  const vmOf = (vm: VmKey) => inventory.get(vm.namespace, vm.name);
  // State annotations: bounded PATCHes in flight, a VM's waiting write merged with its newer one.
  const stateWrites = new WriteQueue<Record<string, string | null>>({
    concurrency: STATE_WRITE_CONCURRENCY,
    merge: (older, newer) => ({ ...older, ...newer }),
    write: async (id, annotations) => {
      // A replica that stepped down meanwhile leaves the VM to the new leader (it restores and writes on its transitions).
      if (!elector.isLeader()) return;
      const [namespace = "", name = ""] = id.split("/");
      // A reconnect burst after a restart or a failover: the first write of this term mostly says
      // what the annotations (restored from) already say. Only then is the inventory's copy known
      // to be this term's latest; after this replica's own first write it may lag behind it.
      const first = !writtenThisTerm.has(id);
      writtenThisTerm.add(id);
      if (first && annotationsSay(vmOf({ namespace, name })?.annotations, annotations)) return;
      writeFailed("state annotations")(await audit.patchAnnotations({ namespace, name }, annotations));
    },
  });
  const writeFailed = (what: string) => (result: { ok: boolean; message: string }) => {
    if (!result.ok) log("warn", `${what} failed: ${result.message}`);
  };
  const tracked = (labels: Record<string, string>) => labels[`${prefix}autostop`] !== undefined;
  // Issue 20: the owner label (platform.example.com/user in the field guides) and what a stop frees.
  const ownerOf = (facts: InventoryVm) => vmOwner(facts.labels, config.kubernetes.ownerLabel);
  const withOwner = (facts: InventoryVm, note: string) => {
    const owner = ownerOf(facts);
    return owner ? `${note} (owner ${owner})` : note;
  };
  const detailsOf = (facts: InventoryVm): VmPlatformDetails => {
    const owner = ownerOf(facts);
    const frees = describeFreed(facts.resources);
    return {
      ...(owner ? { owner } : {}),
      ...(frees ? { frees } : {}),
      gpuCount: gpuCountOf(facts.resources),
      capacity: capacityOf(facts.resources),
    };
  };

  const actuator = kubeActuator({
    clients,
    vmOf,
    audit,
    stopper,
    stateWrites,
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
  // Issue 38: VMs stopped for weeks, their disks and a monthly reminder (platform/kube/dormant.ts).
  let remind: (
    vm: DormantVm,
    metadata: { labels: Record<string, string>; annotations: Record<string, string> },
  ) => void = () => {};
  const dormant = new DormantWatch({
    clients,
    list: () => inventory.list(),
    tracked: (vm) => tracked(vm.labels),
    prefix,
    config: config.dormant,
    nowMs,
    isLeader: () => elector.isLeader(),
    ownerOf,
    profileOf: (vm) => resolveVmPolicy(policySource, vm, undefined).policy.profile,
    patch: (vm, annotations) => audit.patchAnnotations(vm, annotations),
    notify: (vm, facts) => remind(vm, { labels: facts.labels, annotations: facts.annotations }),
    log: (level, message) => log(level, message),
  });

  return {
    name: "kubernetes",
    dormant: {
      report: () => dormant.report(),
      onReminder: (send) => {
        remind = send;
      },
    },
    leader: () => elector.isLeader(),
    fleetSize: () => inventory.list().filter((vm) => tracked(vm.labels)).length,
    // Issue 24: the start link's page and button (platform/kube/start.ts).
    startPlatform: kubeStartPlatform(
      () => inventory.list(),
      vmOf,
      new VmStarter(clients),
      config.kubernetes.ownerLabel,
      prefix,
      kubeDisputeWriter(clients, prefix),
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
      return facts ? detailsOf(facts) : undefined;
    },
    vmRunning: (vm) => {
      const facts = vmOf(vm);
      return facts ? !isStopInEffect(facts, facts.vmi) && facts.vmi !== null : undefined;
    },
    authenticate: async (vm, peer) => {
      const facts = vmOf(vm);
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
      void audit
        .recordEvent(
          { namespace: vm.namespace, name: vm.name, uid: facts.uid },
          auditEvent("IdentityRejected", withOwner(facts, verdict.reason)),
        )
        .then(writeFailed("identity event"));
      return { ok: false, code: grpc.status.PERMISSION_DENIED, reason: verdict.reason };
    },
    actuator,
    start: async (fleet) => {
      fleetRef = fleet;
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
      void leaderLabel.start();
      elector.start();
      dormant.start();
      log("info", "kubernetes inventory synced", {
        vms: inventory.list().length,
        lease: `${leaseNamespace}/${config.kubernetes.leaseName}`,
      });
      return async () => {
        await dormant.stop();
        await elector.stop({ release: true });
        await leaderLabel.close();
        await inventory.stop();
      };
    },
  };
}
