// Feeds the wrong-stop ledger (rates/ledger.ts) from the fleet's observer hook, like the
// given-back ledger (outreach/adoption/observer.ts): ws's accepted stops, and each VM's next
// Active decision.
import { type FleetObserver, tapped } from "../../loop/fleet-observer.js";
import type { WrongStopLedger } from "./ledger.js";

export function withWrongStops(inner: FleetObserver, ledger: WrongStopLedger): FleetObserver {
  return tapped(inner, {
    decided(vm, decision, _previous, _policy, now) {
      if (decision.next.state === "Active") ledger.active(vm, now);
    },
    stopped(vm, result, _stop, policy, now) {
      if (result.outcome === "accepted") ledger.stopped(vm, policy.profile, now);
    },
    forget: (vm) => ledger.forget(vm),
  });
}
