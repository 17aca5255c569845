// The fleet's observer, with the given-back ledger fed on the way: a stop ws made and KubeVirt
// accepted opens a period; a decision that finds the VM neither Stopping nor Stopped closes it.
import type { VmKey } from "../../model/vm-key.js";
import { type FleetObserver, tapped } from "../../loop/fleet-observer.js";
import type { GivenBackLedger, VmCapacity } from "./given-back.js";

const NO_CAPACITY: VmCapacity = { cpuCores: null, memoryBytes: null, gpus: 0 };

export function withGivenBack(
  inner: FleetObserver,
  ledger: GivenBackLedger,
  details: (vm: VmKey) => { owner?: string; capacity?: VmCapacity } | undefined,
  nowMs: () => number,
): FleetObserver {
  return tapped(inner, {
    decided(vm, decision, _previous, _policy, now) {
      const state = decision.next.state;
      if (state !== "Stopping" && state !== "Stopped") ledger.ended(vm, now);
    },
    stopped(vm, result, _stop, _policy, now) {
      if (result.outcome !== "accepted") return;
      const known = details(vm);
      ledger.stoppedByWs(vm, now, known?.owner ?? inner.owner(vm), known?.capacity ?? NO_CAPACITY);
    },
    forget: (vm) => ledger.ended(vm, nowMs()),
  });
}
