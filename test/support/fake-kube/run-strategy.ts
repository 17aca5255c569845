/**
 * KubeVirt's run strategies, as virt-api's start/stop handlers and virt-controller apply them
 * (pkg/virt-api/rest/lifecycle.go; the user guide's "Run Strategies"), in one place: what a
 * `start` or a `stop` request does to a VM of each strategy, and whether the controller wants an
 * instance. Pure: the fake's controller (kubevirt.ts) carries the outcome out.
 *
 * - Always: the VM should always run. `stop` sets Halted; `start` is refused (409: "Always does
 *   not support manual start requests"); a missing or finished VMI is recreated.
 * - RerunOnFailure: recreated after a Failed VMI, not after one that Succeeded (the guest shut
 *   down). `start` and `stop` queue a state change request; the strategy stays.
 * - Manual: never recreated by the controller; `start` and `stop` queue a state change request;
 *   the strategy stays Manual.
 * - Halted: never runs. `start` sets Always (or `running: true`); `stop` is refused unless it
 *   shortens the grace period of a VMI still running.
 */

export type RunStrategy = "Always" | "RerunOnFailure" | "Manual" | "Halted" | "Once" | string;

export const VM_ALREADY_RUNNING = "VM is already running";
export const VM_NOT_RUNNING = "VM is not running";

/** What a request does, for the controller to carry out. */
export type StrategyOutcome =
  | { kind: "conflict"; message: string }
  /** Change spec.runStrategy (or spec.running, for VMs that use the older field). */
  | { kind: "set-strategy"; runStrategy: RunStrategy }
  /** Append a state change request to status.stateChangeRequests (the strategy stays). */
  | { kind: "state-change"; action: "Start" | "Stop" };

export interface InstanceFacts {
  /** A VMI exists and is not in a final phase (Succeeded, Failed). */
  live: boolean;
  /** The VMI's phase, null when there is none. */
  phase: string | null;
}

/** virt-api's start handler. */
export function startOutcome(strategy: RunStrategy, vmi: InstanceFacts): StrategyOutcome {
  if (vmi.live && vmi.phase !== "Unknown" && vmi.phase !== "") return { kind: "conflict", message: VM_ALREADY_RUNNING };
  switch (strategy) {
    case "Halted":
      return { kind: "set-strategy", runStrategy: "Always" };
    case "Manual":
      return { kind: "state-change", action: "Start" };
    case "RerunOnFailure":
      if (vmi.phase === "Failed")
        return { kind: "conflict", message: "RerunOnFailure does not support manual restart requests" };
      return { kind: "state-change", action: "Start" };
    default:
      return { kind: "conflict", message: `${strategy} does not support manual start requests` };
  }
}

/** virt-api's stop handler (the grace-period rule of Halted needs the VMI's own grace). */
export function stopOutcome(
  strategy: RunStrategy,
  vmi: InstanceFacts,
  grace: { requested: number | undefined; current: number | undefined },
): StrategyOutcome {
  switch (strategy) {
    case "Halted":
      if (!vmi.live) return { kind: "conflict", message: VM_NOT_RUNNING };
      if (grace.requested === undefined || (grace.current !== undefined && grace.requested >= grace.current))
        return { kind: "conflict", message: "Halted only supports manual stop requests with a shorter graceperiod" };
      return { kind: "state-change", action: "Stop" };
    case "Manual":
    case "RerunOnFailure":
      if (!vmi.live) return { kind: "conflict", message: VM_NOT_RUNNING };
      return { kind: "state-change", action: "Stop" };
    default:
      return { kind: "set-strategy", runStrategy: "Halted" };
  }
}

/**
 * Whether virt-controller creates an instance now: the strategy wants one running and none is
 * live, or a Start request is queued. A queued Stop wins over the strategy until it is done.
 */
export function controllerCreatesInstance(strategy: RunStrategy, vmi: InstanceFacts, queued: string[]): boolean {
  if (vmi.live) return false;
  if (queued.includes("Stop")) return false;
  if (queued.includes("Start")) return true;
  switch (strategy) {
    case "Always":
      return true;
    case "RerunOnFailure":
      return vmi.phase === "Failed";
    default:
      return false;
  }
}
