// The Fleet's table of VMs: one entry per VM (its loop state, its agent session, its policy as
// resolved from the platform's metadata, what acting on it has done), kept in a map by id with a
// sorted list for the pages and /metrics. Also how an entry's policy is resolved again when the
// VM's metadata changes. The Fleet (loop/fleet.ts) composes this with the deadlines, the action
// runner, the views and the agent side.
import type { Schedule } from "@ws/protocol";
import type { AgentSession } from "../agents/server.js";
import type { Policy, PolicyError, PolicyFallback, ResolvedPolicy } from "../engine/types.js";
import { resolveVmPolicy, type PolicySource } from "../model/policy-source.js";
import { type VmKey, vmId } from "../model/vm-key.js";
import { newVmActing, type VmActing } from "./actions.js";
import type { ReportPlan } from "./report-when.js";
import { newVmLoopState, type StepInput, type VmLoopState } from "./step.js";

export interface VmEntry {
  key: VmKey;
  id: string;
  loop: VmLoopState;
  session?: AgentSession;
  lastValidPolicy?: Policy;
  policyErrors: PolicyError[];
  fallback: PolicyFallback;
  acting: VmActing;
  agentVersion: string;
  peer: string;
  /** What validation cut from the latest Report. */
  truncated: string[];
  /** Bumped on every change the view can show (/metrics rebuilds the VM's series then). */
  version: number;
  /** The record must be restored (from annotations) before the next decision: new, or a new leadership. */
  needsRestore: boolean;
  /** The ReportWhen in force on the session (loop/report-when.ts); undefined: every sample, as a stream starts. */
  reportPlan?: ReportPlan | undefined;
}

/** What a policy resolution that found errors reports (counted and logged by the Fleet). */
export type PolicyErrorsFound = (entry: VmEntry, resolved: ResolvedPolicy) => void;

export class VmEntries {
  private readonly vms = new Map<string, VmEntry>();
  private sorted: VmEntry[] | undefined;

  constructor(
    private readonly policySource: PolicySource,
    private readonly policyErrorsFound: PolicyErrorsFound,
    /** The VM's valid start schedule (comeback/schedule/), whose "stop by" the engine enforces; absent: none. */
    private readonly scheduleOf?: (vm: VmKey) => Schedule | undefined,
    /** The policy the engine runs the VM under, from the one resolved (a waiting warm start's window); absent: as resolved. */
    private readonly runsUnder?: (vm: VmKey, policy: Policy) => Policy,
  ) {}

  get(vm: VmKey): VmEntry | undefined {
    return this.vms.get(vmId(vm));
  }

  byId(id: string): VmEntry | undefined {
    return this.vms.get(id);
  }

  /** The VM's entry, made on first sight with the policy its metadata resolves to now. */
  entryFor(vm: VmKey): VmEntry {
    const id = vmId(vm);
    let entry = this.vms.get(id);
    if (!entry) {
      const key = { namespace: vm.namespace, name: vm.name };
      // A new VM has no last valid policy: its loop starts with what its policy resolves to now.
      const resolved = resolveVmPolicy(this.policySource, key, undefined);
      entry = {
        key,
        id,
        loop: newVmLoopState(resolved.policy),
        policyErrors: [],
        fallback: "none",
        acting: newVmActing(),
        agentVersion: "",
        peer: "",
        truncated: [],
        version: 0,
        needsRestore: true,
      };
      this.applyPolicy(entry, resolved);
      entry.loop.policyStatus = policyInput(entry).status;
      this.vms.set(id, entry);
      this.sorted = undefined;
    }
    return entry;
  }

  delete(vm: VmKey): VmEntry | undefined {
    const entry = this.vms.get(vmId(vm));
    this.vms.delete(vmId(vm));
    this.sorted = undefined;
    return entry;
  }

  values(): IterableIterator<VmEntry> {
    return this.vms.values();
  }

  /** Every entry, by id (the order of the pages and /metrics). */
  sortedEntries(): VmEntry[] {
    this.sorted ??= [...this.vms.values()].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    return this.sorted;
  }

  /** Resolves the VM's policy from its metadata; true when it (or its errors) changed. */
  applyPolicy(
    entry: VmEntry,
    resolved = resolveVmPolicy(this.policySource, entry.key, entry.lastValidPolicy),
  ): boolean {
    const stopByChanged = this.applyStopBy(entry);
    const errorsChanged = JSON.stringify(resolved.errors) !== JSON.stringify(entry.policyErrors);
    const policy = this.runsUnder ? this.runsUnder(entry.key, resolved.policy) : resolved.policy;
    const policyChanged = JSON.stringify(policy) !== JSON.stringify(entry.loop.policy);
    // The same policy keeps its object: the evidence kept for the latest Report stays valid.
    if (policyChanged) entry.loop.policy = policy;
    entry.lastValidPolicy = resolved.lastValid ?? entry.lastValidPolicy;
    entry.policyErrors = resolved.errors;
    entry.fallback = resolved.fallback;
    if (errorsChanged && resolved.errors.length > 0) this.policyErrorsFound(entry, resolved);
    return policyChanged || errorsChanged || stopByChanged;
  }

  /** The schedule's stop-by travels with the VM's loop state (only a schedule with one: nothing changes for the rest). */
  private applyStopBy(entry: VmEntry): boolean {
    const schedule = this.scheduleOf?.(entry.key);
    const stopBy = schedule?.stopByMinute === undefined ? undefined : schedule;
    const changed = JSON.stringify(stopBy) !== JSON.stringify(entry.loop.stopBy);
    if (!changed) return false;
    if (stopBy) entry.loop.stopBy = stopBy;
    else delete entry.loop.stopBy;
    return true;
  }
}

/** The step input that tells the VM's loop its policy (and the errors it fell back from). */
export function policyInput(entry: VmEntry): Extract<StepInput, { kind: "policy" }> {
  return {
    kind: "policy",
    policy: entry.loop.policy,
    status: entry.policyErrors.length ? { errors: entry.policyErrors, fallback: entry.fallback } : undefined,
  };
}
