// The fleet's observer, with the spend sampled on the way (docs/cost.md): a decision that changes
// what a VM counts under (its state, or an observe-mode notice reaching its would-stop moment)
// and an accepted stop sample that VM at once, so the change is counted when it happens rather
// than at the next 30 s tick.
import type { VmRecord } from "../../engine/types.js";
import { type FleetObserver, tapped } from "../../loop/fleet-observer.js";
import type { VmKey } from "../../model/vm-key.js";

/** Whether a decision from `previous` to `next` changes which spend kinds the VM counts under. */
export function changesSpend(previous: VmRecord | undefined, next: VmRecord): boolean {
  return (
    (previous?.state ?? "Unknown") !== next.state || previous?.notice?.wouldStopAtMs !== next.notice?.wouldStopAtMs
  );
}

export function withSpend(inner: FleetObserver, touch: (vm: VmKey, nowMs: number) => void): FleetObserver {
  return tapped(inner, {
    decided(vm, decision, previous, _policy, now) {
      if (changesSpend(previous, decision.next)) touch(vm, now);
    },
    stopped(vm, result, _stop, _policy, now) {
      if (result.outcome === "accepted") touch(vm, now);
    },
  });
}
