// The stop disputes, as whoever tunes the policy lists them (`ws-collector whatif --disputes`,
// docs/replay.md): each "this stop was a mistake" with the stop it disputes, and the knob that
// would have kept the VM. Read from the collector's /api/disputes (any mode) or from the
// VirtualMachines' last-stop annotations (`kubectl get vm -A -o json`). Pure.
import type { VmKey } from "../../model/vm-key.js";
import { vmId } from "../../model/vm-key.js";
import { suggestedIdleTimeout } from "./dispute.js";
import { lastStopKey, parseLastStop, type LastStopFacts } from "../../loop/last-stop.js";
import type { StartPlatform } from "./platform.js";

export interface DisputeRecord {
  vm: string;
  stoppedAt: string;
  reason: string;
  idleSeconds?: number;
  lastActivity?: { at: string; what: string };
  at: string;
  by: string;
  what: string;
  /** The knob that would have kept the VM: its name and value (whatif's --NAME VALUE), and the sentence. */
  knob: { name: string; value?: string; text: string };
}

/** One dispute from a last-stop record that has one; undefined otherwise. */
export function disputeRecord(vm: VmKey, stop: LastStopFacts | null | undefined): DisputeRecord | undefined {
  const dispute = stop?.raw?.dispute as Record<string, unknown> | undefined;
  if (!stop || typeof dispute !== "object" || dispute === null) return undefined;
  const text = (value: unknown, max = 500) => (typeof value === "string" ? value.slice(0, max) : "");
  return {
    vm: vmId(vm),
    stoppedAt: new Date(stop.atMs).toISOString(),
    reason: stop.reason,
    ...(stop.idleSeconds !== undefined ? { idleSeconds: stop.idleSeconds } : {}),
    ...(stop.lastActivity
      ? { lastActivity: { at: new Date(stop.lastActivity.atMs).toISOString(), what: stop.lastActivity.what } }
      : {}),
    at: text(dispute.at, 40),
    by: text(dispute.by, 200),
    what: text(dispute.what),
    knob:
      stop.idleSeconds !== undefined
        ? { name: "idle-timeout", value: suggestedIdleTimeout(stop.idleSeconds), text: text(dispute.knob, 1000) }
        : { name: "signals", text: text(dispute.knob, 1000) },
  };
}

/** Every dispute the platform keeps (the collector's /api/disputes), newest first. */
export function platformDisputes(platform: StartPlatform, visible: (owner: string | null) => boolean): DisputeRecord[] {
  const out: DisputeRecord[] = [];
  for (const vm of platform.list()) {
    const facts = platform.facts(vm);
    if (!facts || !visible(facts.owner)) continue;
    const record = disputeRecord(vm, facts.lastStop);
    if (record) out.push(record);
  }
  return out.sort((a, b) => b.at.localeCompare(a.at));
}

/**
 * The disputes in a document whatif was given: the collector's /api/disputes ({"disputes": […]})
 * or a Kubernetes VirtualMachineList with last-stop annotations under `prefix`. Throws an Error
 * naming what is wrong with anything else.
 */
export function disputesFromDocument(text: string, prefix: string): DisputeRecord[] {
  let document: unknown;
  try {
    document = JSON.parse(text);
  } catch {
    throw new Error("not JSON: give the collector's /api/disputes or `kubectl get vm -A -o json`");
  }
  const object = (document ?? {}) as { disputes?: unknown; items?: unknown; kind?: unknown };
  if (Array.isArray(object.disputes)) return object.disputes.filter(isDisputeRecord);
  if (Array.isArray(object.items)) {
    const out: DisputeRecord[] = [];
    for (const item of object.items as Array<{ metadata?: Record<string, unknown> }>) {
      const metadata = item?.metadata ?? {};
      const annotations = (metadata.annotations ?? {}) as Record<string, unknown>;
      const raw = annotations[lastStopKey(prefix)];
      if (typeof metadata.namespace !== "string" || typeof metadata.name !== "string" || typeof raw !== "string")
        continue;
      const record = disputeRecord({ namespace: metadata.namespace, name: metadata.name }, parseLastStop(raw));
      if (record) out.push(record);
    }
    return out.sort((a, b) => b.at.localeCompare(a.at));
  }
  throw new Error(
    `neither {"disputes": […]} (the collector's /api/disputes) nor a list with "items" (kubectl get vm -A -o json)${typeof object.kind === "string" ? `: got kind ${object.kind}` : ""}`,
  );
}

function isDisputeRecord(value: unknown): value is DisputeRecord {
  const record = value as DisputeRecord | null;
  return (
    typeof record === "object" &&
    record !== null &&
    typeof record.vm === "string" &&
    typeof record.stoppedAt === "string" &&
    typeof record.at === "string" &&
    typeof record.knob === "object" &&
    record.knob !== null &&
    typeof record.knob.name === "string"
  );
}
