// The Kubernetes actuator: how the collector acts on a VM in Kubernetes mode. The stop is the
// most important act: the safety check first (every disk that holds state is persistent), then
// KubeVirt's stop subresource with the VM's own grace period, then its audit (the Stopped Event
// and the last-stop annotation, with what the stop freed and who owns the VM). Events carry what
// a stop frees; state annotations go through the bounded write queue.
import type { Logger } from "@ws/protocol";
import type { EventReason } from "../../engine/events.js";
import { persistedAnnotations } from "../../engine/persist.js";
import type { Actuator } from "../../loop/actions.js";
import { lastStopSignals } from "../../loop/last-stop.js";
import type { VmKey } from "../../model/vm-key.js";
import { auditEvent, type KubeAudit } from "./audit.js";
import type { KubeClients } from "./client.js";
import type { InventoryVm } from "./inventory.js";
import { checkStopSafety } from "./pvcs.js";
import { describeVerdict } from "./safety.js";
import type { VmStopper } from "./stop.js";
import { describeFreed, freedRecord } from "./vm-resources.js";
import type { WriteQueue } from "./write-queue.js";

/** Event reasons whose note says what a stop frees (or would free). */
const FREES_FOR_REASON: Partial<Record<EventReason, string>> = {
  IdleStopPending: "stopping frees",
  IdleWouldStop: "a stop would free",
  Started: "the start allocates",
};

/** How long the guest gets to shut down, as the Stopped Event says it (pure). */
export function graceNote(facts: Pick<InventoryVm, "terminationGracePeriodSeconds">): string {
  return facts.terminationGracePeriodSeconds === null
    ? "the guest got the VMI's own shutdown grace period (KubeVirt's default: the VM sets none)"
    : `the guest got its own terminationGracePeriodSeconds (${facts.terminationGracePeriodSeconds}s) to shut down`;
}

export interface KubeActuatorOptions {
  clients: KubeClients;
  vmOf: (vm: VmKey) => InventoryVm | undefined;
  audit: KubeAudit;
  stopper: VmStopper;
  stateWrites: WriteQueue<Record<string, string | null>>;
  prefix: string;
  nowMs: () => number;
  log: Logger;
  /** The VM's owner (the configured owner label); null when none. */
  ownerOf: (facts: InventoryVm) => string | null;
  /** The VM's start link from now (Stopped Event, last-stop record); undefined without links. */
  startUrl?: (vm: VmKey, nowMs: number) => string | undefined;
}

export function kubeActuator(options: KubeActuatorOptions): Actuator {
  const { clients, vmOf, audit, stopper, stateWrites, prefix, nowMs, log, ownerOf } = options;
  const writeFailed = (what: string) => (result: { ok: boolean; message: string }) => {
    if (!result.ok) log("warn", `${what} failed: ${result.message}`);
  };
  const withOwner = (facts: InventoryVm, note: string) => {
    const owner = ownerOf(facts);
    return owner ? `${note} (owner ${owner})` : note;
  };
  return {
    async stop(vm, reason, evidence) {
      const facts = vmOf(vm);
      if (!facts)
        return { outcome: "failed", message: "the VM is not in the inventory (deleted, or the watch is behind)" };
      const verdict = await checkStopSafety(clients, facts, prefix);
      if (!verdict.safe) {
        if ("transient" in verdict && verdict.transient)
          return { outcome: "failed", message: `safety check could not complete: ${verdict.reasons.join("; ")}` };
        // The engine audits the refusal (IdleStopRefused, with this message): one Event, not two.
        return { outcome: "refused", message: describeVerdict(verdict) };
      }
      // No gracePeriod is sent: the VMI keeps the VM's own terminationGracePeriodSeconds (stop.ts).
      const grace = facts.terminationGracePeriodSeconds;
      const result = await stopper.stopVm(
        vm.namespace,
        vm.name,
        grace === null ? {} : { minimumGracePeriodSeconds: grace },
      );
      if (!result.ok) return { outcome: "failed", message: result.message };
      const freed = describeFreed(facts.resources, "freed");
      const startUrl = options.startUrl?.(vm, nowMs());
      const stoppedNote = [
        `stopped: ${reason}`,
        ...(freed ? [freed] : []),
        graceNote(facts),
        `kept: ${describeVerdict(verdict)}`,
        ...(startUrl ? [`to start it again: ${startUrl}`] : []),
      ].join("; ");
      void audit
        .recordEvent(
          { namespace: vm.namespace, name: vm.name, uid: facts.uid },
          auditEvent("Stopped", withOwner(facts, stoppedNote)),
        )
        .then(writeFailed("Stopped event"));
      const owner = ownerOf(facts);
      void audit
        .recordLastStop(vm, {
          whenMs: nowMs(),
          reason,
          signals: lastStopSignals(evidence),
          frees: freedRecord(facts.resources),
          ...(startUrl ? { startUrl } : {}),
          ...(owner ? { owner } : {}),
          ...(evidence?.bootId ? { bootId: evidence.bootId } : {}),
        })
        .then(writeFailed("last-stop annotation"));
      return {
        outcome: "accepted",
        message: result.alreadyStopped
          ? `${result.message} after ${result.attempts} stop request(s)`
          : `stop accepted after ${result.attempts} attempt(s)`,
      };
    },
    event(vm, type, reason, message) {
      const facts = vmOf(vm);
      if (!facts) return;
      const lead = FREES_FOR_REASON[reason];
      const frees = lead ? describeFreed(facts.resources, lead) : null;
      const note = withOwner(facts, frees ? `${message}; ${frees}` : message);
      void audit
        .recordEvent({ namespace: vm.namespace, name: vm.name, uid: facts.uid }, auditEvent(reason, note, type))
        .then(writeFailed(`${reason} event`));
    },
    persist(vm, values) {
      stateWrites.push(`${vm.namespace}/${vm.name}`, persistedAnnotations(values, prefix));
    },
  };
}
