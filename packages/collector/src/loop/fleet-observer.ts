// The port through which the per-VM loop tells the outside world about its decisions. It lives
// beside the loop that calls it (fleet.ts, loop/actions.ts, loop/outreach-view.ts); outreach/notify/outreach.ts
// implements it and outreach/adoption/observer.ts wraps it, so the loop never imports the layers above it.
import type { Decision, EngineState, Policy, StopResult, StopTrigger, VmRecord } from "../engine/types.js";
import type { QuietMinutePoint } from "../model/quiet-minutes.js";
import type { VmKey } from "../model/vm-key.js";

/** What the per-VM loop tells the outside world about; every method returns at once. */
export interface FleetObserver {
  /** After every decision (previous: the record it started from). */
  decided(vm: VmKey, decision: Decision, previous: VmRecord | undefined, policy: Policy, nowMs: number): void;
  /**
   * The minutes a Report was held back in (model/quiet-minutes.ts), oldest first, before the
   * decision on that Report: the VM was in `state` throughout (only the collector changes it).
   */
  quietMinutes?(vm: VmKey, minutes: readonly QuietMinutePoint[], state: EngineState): void;
  /** When a stop attempt finished. */
  stopped(
    vm: VmKey,
    result: StopResult,
    stop: { reason: string; trigger: StopTrigger },
    policy: Policy,
    nowMs: number,
  ): void;
  /** Whether a notice in this mode reaches the VM's users (terminals, desktop): observe mode warns nobody by default. */
  deliversNotice(mode: Policy["mode"], policy: Policy): boolean;
  /** A line for the in-VM notice: the keep-running link, when links are configured. */
  noticeLink(vm: VmKey, noticeId: string, deadlineMs: number): string | undefined;
  owner(vm: VmKey): string;
  forget(vm: VmKey): void;
}

/** What a wrapper does after the observer it wraps has seen a decision, a stop or a forgotten VM. */
export interface ObserverTaps {
  decided?(vm: VmKey, decision: Decision, previous: VmRecord | undefined, policy: Policy, nowMs: number): void;
  stopped?(
    vm: VmKey,
    result: StopResult,
    stop: { reason: string; trigger: StopTrigger },
    policy: Policy,
    nowMs: number,
  ): void;
  forget?(vm: VmKey): void;
}

/**
 * `inner`, with `taps` called after it. Every other call passes through here, in one place, so a
 * call added to FleetObserver reaches the innermost observer through every wrapper (given back,
 * spend, wrong stops) instead of being dropped by the one that did not know it.
 */
export function tapped(inner: FleetObserver, taps: ObserverTaps): FleetObserver {
  return {
    decided(vm, decision, previous, policy, now) {
      inner.decided(vm, decision, previous, policy, now);
      taps.decided?.(vm, decision, previous, policy, now);
    },
    quietMinutes: (vm, minutes, state) => inner.quietMinutes?.(vm, minutes, state),
    stopped(vm, result, stop, policy, now) {
      inner.stopped(vm, result, stop, policy, now);
      taps.stopped?.(vm, result, stop, policy, now);
    },
    deliversNotice: (mode, policy) => inner.deliversNotice(mode, policy),
    noticeLink: (vm, noticeId, deadlineMs) => inner.noticeLink(vm, noticeId, deadlineMs),
    owner: (vm) => inner.owner(vm),
    forget(vm) {
      inner.forget(vm);
      taps.forget?.(vm);
    },
  };
}
