// Kubernetes mode: VMs and their policy come from the KubeVirt API, a stop is
// the KubeVirt stop subresource after the safety check, decisions are audited
// as Events and annotations, and only the leader replica acts.
import * as grpc from "@grpc/grpc-js";
import type { Logger } from "@ws/protocol";
import type { VmKey } from "../agents/server.js";
import type { CollectorConfig } from "../config.js";
import type { CollectorPolicyConfig } from "../engine/config.js";
import { persistedAnnotations, restoreRecord } from "../engine/persist.js";
import type { Fleet, StopEvidence } from "../fleet.js";
import type { CollectorMode } from "../serve.js";
import type { CollectorStats } from "../stats.js";
import { AUDIT_REASONS, KubeAudit, type AuditEventType } from "./audit.js";
import { contextNamespace, createKubeClients, describeError, loadKubeConfig } from "./client.js";
import { checkPeerIdentity } from "./identity.js";
import { KubeInventory } from "./inventory.js";
import { LeaderElector } from "./leader.js";
import { checkStopSafety } from "./pvcs.js";
import { describeVerdict } from "./safety.js";
import { VmStopper } from "./stop.js";
import { isStopInEffect } from "./vm-model.js";

/** The Event `action` for each reason the engine emits; unknown reasons are recorded as "Decide". */
const ACTION_FOR_REASON: Record<string, string> = {
  IdleStopPending: "Notify",
  IdleStop: "Stop",
  IdleStopCancelled: "CancelStop",
  IdleWouldStop: "ObserveStop",
  IdleStopRefused: "Stop",
  IdleStopFailed: "Stop",
  KeepRunningLink: "GrantLease",
  PolicyInvalid: "ReadPolicy",
  PolicyValid: "ReadPolicy",
  BadPolicy: "ReadPolicy",
  AgentLost: "Observe",
  AgentBack: "Observe",
};

/** Readings kept in last-stop: the latest ones; a VM with hundreds of kernels must not bloat its object. */
const LAST_STOP_READINGS = 20;

/** The "signals" of the last-stop annotation: what the engine saw when it decided the stop (pure). */
export function lastStopSignals(evidence: StopEvidence | undefined): Record<string, unknown> {
  if (!evidence) return {};
  const iso = (ms: number | undefined) => (ms === undefined || !Number.isFinite(ms) ? undefined : new Date(ms).toISOString());
  const explanation = evidence.explanation;
  if (!explanation) return { trigger: evidence.trigger };
  return {
    trigger: evidence.trigger,
    idleSeconds: explanation.idleSeconds === undefined ? undefined : Math.round(explanation.idleSeconds),
    idleTimeoutSeconds: explanation.idleTimeoutSeconds,
    lastActivity: explanation.lastActivityAtMs === undefined ? undefined : { at: iso(explanation.lastActivityAtMs), what: explanation.lastActivity },
    readings: [...explanation.readings]
      .sort((a, b) => b.atMs - a.atMs)
      .slice(0, LAST_STOP_READINGS)
      .map((reading) => ({ signal: reading.signal, strength: reading.strength, at: iso(reading.atMs), detail: reading.detail })),
    vetoes: explanation.vetoes.map((veto) => veto.kind),
    blind: explanation.blind.map((source) => source.source),
  };
}

export async function kubernetesMode(
  config: CollectorConfig,
  policy: CollectorPolicyConfig,
  log: Logger,
  stats: CollectorStats,
  nowMs: () => number,
): Promise<CollectorMode> {
  const kc = loadKubeConfig(config.kubernetes.kubeconfig ? { kubeconfigPath: config.kubernetes.kubeconfig } : { inCluster: true });
  const clients = createKubeClients(kc, {
    onRequest: (info) => stats.countKubeRequest(info.method, info.status === null ? "timeout" : String(info.status)),
  });
  const prefix = policy.annotationPrefix;
  const inventory = new KubeInventory(clients, { onError: (message) => log("warn", `kubernetes watch: ${message}`) });
  const stopper = new VmStopper(clients);
  const audit = new KubeAudit(clients, { reportingInstance: config.kubernetes.identity, nowMs, annotationPrefix: prefix });
  const leaseNamespace = config.kubernetes.kubeconfig ? config.kubernetes.leaseNamespace : (contextNamespace(kc) ?? config.kubernetes.leaseNamespace);
  let fleetRef: Fleet | undefined;

  const elector = new LeaderElector(clients, {
    namespace: leaseNamespace,
    leaseName: config.kubernetes.leaseName,
    identity: config.kubernetes.identity,
    nowMs,
    onStartedLeading: () => {
      log("info", "became the leader: acting on VMs", { identity: config.kubernetes.identity });
      // Timers resume from the annotations the previous leader wrote.
      fleetRef?.resetRecords();
    },
    onStoppedLeading: (reason) => {
      log("warn", `lost the leadership (${reason}): no longer acting; agents will reconnect to the leader`);
      fleetRef?.closeAllSessions(grpc.status.UNAVAILABLE, "this collector replica is no longer the leader; reconnect");
    },
    onError: (message) => log("warn", `leader election: ${message}`),
  });

  const vmOf = (vm: VmKey) => inventory.get(vm.namespace, vm.name);
  const writeFailed = (what: string) => (result: { ok: boolean; message: string }) => {
    if (!result.ok) log("warn", `${what} failed: ${result.message}`);
  };
  const tracked = (labels: Record<string, string>) => labels[`${prefix}autostop`] !== undefined;

  return {
    name: "kubernetes",
    leader: () => elector.isLeader(),
    policySource: {
      defaults: { ...policy.defaults, reportIntervalSeconds: config.reportIntervalSeconds },
      profiles: policy.profiles,
      prefix,
      metadataFor: (vm) => {
        const facts = vmOf(vm);
        return { labels: facts?.labels ?? {}, annotations: facts?.annotations ?? {} };
      },
    },
    restore: (vm, now) => {
      const facts = vmOf(vm);
      if (!facts) return undefined;
      const restored = restoreRecord(facts.annotations, now, prefix);
      for (const problem of restored.problems) log("warn", `${vm.namespace}/${vm.name}: ${problem}`);
      return restored.record;
    },
    vmRunning: (vm) => {
      const facts = vmOf(vm);
      return facts ? !isStopInEffect(facts, facts.vmi) && facts.vmi !== null : undefined;
    },
    authenticate: async (vm, peer) => {
      const facts = vmOf(vm);
      if (!facts) {
        return { ok: false, code: grpc.status.PERMISSION_DENIED, kind: "unknown-vm", reason: `no VirtualMachine ${vm.namespace}/${vm.name} is known` };
      }
      const verdict = checkPeerIdentity(peer, vm, facts.launcherPodIps);
      if (verdict.ok) return { ok: true };
      void audit
        .recordEvent({ namespace: vm.namespace, name: vm.name, uid: facts.uid }, { type: "Warning", reason: "IdentityRejected", action: AUDIT_REASONS.IdentityRejected.action, note: verdict.reason })
        .then(writeFailed("identity event"));
      return { ok: false, code: grpc.status.PERMISSION_DENIED, reason: verdict.reason };
    },
    actuator: {
      async stop(vm, reason, evidence) {
        const facts = vmOf(vm);
        if (!facts) return { outcome: "failed", message: "the VM is not in the inventory (deleted, or the watch is behind)" };
        const verdict = await checkStopSafety(clients, facts, prefix);
        if (!verdict.safe) {
          if ("transient" in verdict && verdict.transient) return { outcome: "failed", message: `safety check could not complete: ${verdict.reasons.join("; ")}` };
          const message = describeVerdict(verdict);
          void audit
            .recordEvent({ namespace: vm.namespace, name: vm.name, uid: facts.uid }, { type: "Warning", reason: "StopRefused", action: "Stop", note: `refused to stop: ${message}` })
            .then(writeFailed("StopRefused event"));
          return { outcome: "refused", message };
        }
        const result = await stopper.stopVm(vm.namespace, vm.name, {});
        if (!result.ok) return { outcome: "failed", message: result.message };
        void audit
          .recordEvent({ namespace: vm.namespace, name: vm.name, uid: facts.uid }, { type: "Normal", reason: "Stopped", action: "Stop", note: `stopped: ${reason}` })
          .then(writeFailed("Stopped event"));
        void audit.recordLastStop(vm, { whenMs: nowMs(), reason, signals: lastStopSignals(evidence) }).then(writeFailed("last-stop annotation"));
        return { outcome: "accepted", message: result.alreadyStopped ? `${result.message} after ${result.attempts} stop request(s)` : `stop accepted after ${result.attempts} attempt(s)` };
      },
      event(vm, type, reason, message) {
        const facts = vmOf(vm);
        if (!facts) return;
        void audit
          .recordEvent({ namespace: vm.namespace, name: vm.name, uid: facts.uid }, { type: type as AuditEventType, reason, action: ACTION_FOR_REASON[reason] ?? "Decide", note: message })
          .then(writeFailed(`${reason} event`));
      },
      persist(vm, values) {
        void audit.patchAnnotations(vm, persistedAnnotations(values, prefix)).then(writeFailed("state annotations"));
      },
    },
    start: async (fleet) => {
      fleetRef = fleet;
      inventory.onChange((change) => {
        const vm = { namespace: change.namespace, name: change.name };
        if (change.kind === "removed") fleet.remove(vm);
        else if (tracked(change.vm.labels) || (change.previous && tracked(change.previous.labels))) fleet.track(vm);
      });
      try {
        await inventory.start();
      } catch (error) {
        throw new Error(`cannot watch VirtualMachines: ${describeError(error)}`);
      }
      for (const vm of inventory.list()) if (tracked(vm.labels)) fleet.track(vm);
      elector.start();
      log("info", "kubernetes inventory synced", { vms: inventory.list().length, lease: `${leaseNamespace}/${config.kubernetes.leaseName}` });
      return async () => {
        await elector.stop({ release: true });
        await inventory.stop();
      };
    },
  };
}
