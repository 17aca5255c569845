// Feeds the wrong-stop ledger (rates/ledger.ts) from the fleet's observer hook, like the
// given-back ledger (outreach/adoption/observer.ts): ws's accepted stops, and each VM's next
// Active decision.
import type { FleetObserver } from "../../loop/fleet-observer.js";
import type { WrongStopLedger } from "./ledger.js";

export function withWrongStops(inner: FleetObserver, ledger: WrongStopLedger): FleetObserver {
  return {
    decided(vm, decision, previous, policy, now) {
      inner.decided(vm, decision, previous, policy, now);
      if (decision.next.state === "Active") ledger.active(vm, now);
    },
    stopped(vm, result, stop, policy, now) {
      inner.stopped(vm, result, stop, policy, now);
      if (result.outcome === "accepted") ledger.stopped(vm, policy.profile, now);
    },
    deliversNotice: (mode, policy) => inner.deliversNotice(mode, policy),
    noticeLink: (vm, noticeId, deadlineMs) => inner.noticeLink(vm, noticeId, deadlineMs),
    owner: (vm) => inner.owner(vm),
    forget(vm) {
      inner.forget(vm);
      ledger.forget(vm);
    },
  };
}
