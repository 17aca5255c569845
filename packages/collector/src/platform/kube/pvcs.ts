/**
 * The safety check's I/O: read each PVC a VM's volumes name (a DataVolume's PVC has the
 * DataVolume's name), then let the pure `stopSafety` decide. An API failure is not a verdict on
 * the VM: it comes back as `transient`, so the caller tries again later instead of refusing.
 */
import { describeError, httpStatusOf, type KubeClients } from "./client.js";
import {
  DEFAULT_ANNOTATION_PREFIX,
  claimsToCheck,
  stopSafety,
  type PvcFacts,
  type SafetyInput,
  type SafetyVerdict,
} from "./safety.js";

export type SafetyCheck = SafetyVerdict | { safe: false; transient: true; reasons: string[] };

export async function readPvcFacts(clients: KubeClients, namespace: string, claimName: string): Promise<PvcFacts> {
  try {
    const pvc = await clients.core.readNamespacedPersistentVolumeClaim({ namespace, name: claimName });
    return { name: claimName, phase: pvc.status?.phase ?? "Unknown" };
  } catch (err) {
    if (httpStatusOf(err) === 404) return { name: claimName, phase: null };
    throw err;
  }
}

export async function checkStopSafety(
  clients: KubeClients,
  vm: SafetyInput & { namespace: string },
  prefix: string = DEFAULT_ANNOTATION_PREFIX,
): Promise<SafetyCheck> {
  const pvcs = new Map<string, PvcFacts>();
  for (const claim of claimsToCheck(vm.volumes)) {
    try {
      pvcs.set(claim, await readPvcFacts(clients, vm.namespace, claim));
    } catch (err) {
      return {
        safe: false,
        transient: true,
        reasons: [`cannot read PVC ${JSON.stringify(claim)}: ${describeError(err)}`],
      };
    }
  }
  return stopSafety(vm, pvcs, prefix);
}
