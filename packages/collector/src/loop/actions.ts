// Acting on one VM's decision: the engine's actions carried out through the Actuator (stops,
// Events, persisted state) and the log, and the collector's counters derived from those same
// actions. One stop at a time per VM: a stop asked for again while one is in flight is left to
// the one in flight. Fleet routes the decision here; this module never decides.
import type { Logger } from "@ws/protocol";
import type { EventReason } from "../engine/events.js";
import type { Action, EventType, Explanation, Policy, StopResult, StopTrigger } from "../engine/types.js";
import type { VmKey } from "../model/vm-key.js";
import { countOnsets } from "./hostside/disagree.js";
import type { FleetObserver } from "./fleet-observer.js";
import type { CollectorStats } from "../lib/stats.js";
import type { FleetCounters } from "../model/vm-view.js";

export interface Actuator {
  /** Carries out a stop; resolves with what happened (never rejects). */
  stop(vm: VmKey, reason: string, evidence?: StopEvidence): Promise<StopResult>;
  /** Records an Event on the VM; its reason is one of engine/events.ts's list, so no edge invents one. */
  event(vm: VmKey, type: EventType, reason: EventReason, message: string): void;
  persist(vm: VmKey, values: Extract<Action, { kind: "persist" }>["values"]): void;
}

/** What a stop was decided on (the engine's explanation of that decision), for its audit record. */
export interface StopEvidence {
  trigger: StopTrigger;
  explanation: Explanation | undefined;
  /** The boot id of the agent connected when the stop was decided: a later boot is a start (the welcome back). */
  bootId?: string;
}

/** What acting remembers of one VM between decisions. */
export interface VmActing {
  stopInFlight: boolean;
  /** Leases already counted as granted: only the ones the agent still reports. */
  knownLeases: Set<string>;
  /** Agent/host disagreements at the last host-side reading (their onsets are counted). */
  disagreeing: readonly string[];
}

export const newVmActing = (): VmActing => ({ stopInFlight: false, knownLeases: new Set(), disagreeing: [] });

/** The VM a decision's actions are for. */
export interface ActionTarget {
  key: VmKey;
  id: string;
  acting: VmActing;
  /** The VM's policy when the stop finishes. */
  policy(): Policy;
  /** The explanation of the decision that asked for the stop. */
  explanation: Explanation | undefined;
  /** The connected agent's boot id, if one is connected. */
  bootId?: string;
  /** The stop finished (the VM still known): the result goes back into the VM's loop. */
  stopFinished(result: StopResult): void;
}

export interface ActionRunnerOptions {
  log: Logger;
  nowMs: () => number;
  actuator: Actuator;
  stats?: CollectorStats;
  observer?: FleetObserver;
}

export class ActionRunner {
  readonly counters: FleetCounters = {
    stops: new Map(),
    notices: 0,
    stopsCancelled: 0,
    leasesGranted: 0,
    policyErrors: 0,
  };

  constructor(private readonly options: ActionRunnerOptions) {}

  /** Counts invalid policy entries found when a VM's policy was resolved (not an engine action: a standby counts too). */
  countPolicyErrors(count: number): void {
    this.counters.policyErrors += count;
  }

  /** Counts the agent/host disagreements that start with this host-side reading (loop/hostside/disagree.ts). */
  countDisagreements(acting: VmActing, kinds: readonly string[]): void {
    countOnsets(this.counters, acting.disagreeing, kinds);
    acting.disagreeing = kinds;
  }

  run(target: ActionTarget, action: Action): void {
    this.count(target.acting, action);
    this.act(target, action);
  }

  /** The counters, from the actions alone. */
  private count(acting: VmActing, action: Action): void {
    const counters = this.counters;
    switch (action.kind) {
      case "notice":
        if (!action.repeat) counters.notices++;
        return;
      case "notice-cleared":
        counters.stopsCancelled++;
        return;
      case "lease-decisions":
        for (const d of action.decisions) {
          if (d.accepted && !acting.knownLeases.has(d.id)) {
            acting.knownLeases.add(d.id);
            counters.leasesGranted++;
          }
        }
        // Bounded: only the leases the agent still reports are remembered.
        if (acting.knownLeases.size > action.decisions.length)
          acting.knownLeases = new Set(action.decisions.filter((d) => acting.knownLeases.has(d.id)).map((d) => d.id));
        return;
      case "would-stop":
        this.countStop(action.trigger, "observe");
        return;
      case "stop":
        if (!acting.stopInFlight) this.countStop(action.trigger, "enforce");
        return;
      default:
        return;
    }
  }

  private act(target: ActionTarget, action: Action): void {
    const { log, actuator } = this.options;
    const id = target.id;
    switch (action.kind) {
      case "notice":
      case "notice-cleared":
      case "lease-decisions":
        // Sent to the agent in the decision's Directive (loop/directive.ts).
        return;
      case "would-stop":
        log("info", `${id}: would stop now (observe mode): ${action.reason}`, { vm: id });
        return;
      case "stop":
        if (target.acting.stopInFlight) return;
        target.acting.stopInFlight = true;
        log("info", `${id}: stopping: ${action.reason}`, { vm: id, attempt: action.attempt });
        void actuator
          .stop(target.key, action.reason, {
            trigger: action.trigger,
            explanation: target.explanation,
            ...(target.bootId ? { bootId: target.bootId } : {}),
          })
          .then((result) => {
            target.acting.stopInFlight = false;
            this.options.stats?.countStopOutcome(target.key, result.outcome);
            this.options.observer?.stopped(
              target.key,
              result,
              { reason: action.reason, trigger: action.trigger },
              target.policy(),
              this.options.nowMs(),
            );
            log(result.outcome === "accepted" ? "info" : "warn", `${id}: stop ${result.outcome}: ${result.message}`, {
              vm: id,
            });
            target.stopFinished(result);
          });
        return;
      case "cancel-stop":
        log("info", `${id}: stop cancelled: ${action.reason}`, { vm: id });
        return;
      case "event":
        actuator.event(target.key, action.type, action.reason, action.message);
        return;
      case "persist":
        actuator.persist(target.key, action.values);
        return;
      case "policy-error":
        // The engine's own PolicyInvalid event carries the audit; this is the log line (the metric counts at resolution).
        log(
          "warn",
          `${id}: invalid policy (${action.fallback}): ${action.errors.map((e) => `${e.key}: ${e.message}`).join("; ")}`,
          { vm: id },
        );
        return;
      default: {
        const never: never = action;
        log("warn", `unknown engine action ${JSON.stringify(never)}`);
      }
    }
  }

  private countStop(trigger: string, mode: string): void {
    const key = `${trigger}|${mode}`;
    this.counters.stops.set(key, (this.counters.stops.get(key) ?? 0) + 1);
  }
}
