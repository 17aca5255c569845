// Runs the engine over a trace with a virtual clock. Pure: the same trace and
// options always give the same timeline. Between events the clock ticks (and
// also stops at every time a decision said it could change), so idle
// timeouts, grace periods and lost agents fire as they would live. A stop is
// taken as accepted at once.
//
// A recorded VM may keep reporting after the replay stopped it (it was not
// stopped for real). Its reports are then ignored until one shows strong
// activity after the stop: the user came back, and would have started the VM.

import { extractEvidence } from "../../engine/evidence.js";
import {
  BUILTIN_DEFAULT_POLICY,
  DEFAULT_ANNOTATION_PREFIX,
  policyFromAnnotations,
  resolvePolicy,
} from "../../engine/policy.js";
import type { Action, EngineState, Explanation, Policy, PolicyOverrides } from "../../engine/types.js";
import { showsPersonAfter } from "../../engine/signals.js";
import { newVmLoopState, step as stepVm, type StepInput, type VmLoopState } from "../../loop/step.js";
import { parseTrace, type TraceEvent } from "../../loop/trace.js";

export interface ReplayOptions {
  defaults?: Policy;
  profiles?: Record<string, PolicyOverrides>;
  prefix?: string;
  /** Seconds between timer decisions (0: only at events and wake-up times). Default 15. */
  tickSeconds?: number;
}

export type TimelineEntry =
  | {
      kind: "decision";
      t: number;
      atMs: number;
      vm: string;
      from: EngineState;
      to: EngineState;
      summary: string;
      reason: string;
      actions: Action[];
      explanation: Explanation;
    }
  | { kind: "input"; t: number; atMs: number; vm: string; input: string };

interface VmReplay {
  vm: string;
  /** The VM's one loop, as the live collector keeps it (loop/step.ts). */
  loop: VmLoopState;
  lastValid: Policy | undefined;
  stoppedAtMs: number | undefined;
}

/** The virtual clock's origin: the wall time of the trace start when the trace has one, else 0 (times are then ms from the start). */
export function traceOriginMs(events: readonly TraceEvent[]): number {
  const stamped = events.find((event) => event.at !== undefined);
  return stamped?.at ? Date.parse(stamped.at) - stamped.t * 1000 : 0;
}

/** Replays a trace given as text, as its lines, or as parsed events (parse errors throw a TraceError). */
export function replayTrace(
  trace: string | readonly string[] | readonly TraceEvent[],
  options: ReplayOptions = {},
): TimelineEntry[] {
  const events: readonly TraceEvent[] =
    typeof trace === "string"
      ? parseTrace(trace)
      : trace.length > 0 && typeof trace[0] === "string"
        ? parseTrace((trace as readonly string[]).join("\n"))
        : (trace as readonly TraceEvent[]);
  const tickMs = Math.max(0, (options.tickSeconds ?? 15) * 1000);
  const originMs = traceOriginMs(events);
  const replay = new Replay(options, originMs);
  let nowMs = originMs;
  for (let index = 0; index < events.length; ) {
    const eventMs = originMs + events[index]!.t * 1000;
    // Timers between now and the event.
    for (;;) {
      const nextTick = tickMs > 0 ? originMs + (Math.floor((nowMs - originMs) / tickMs) + 1) * tickMs : Infinity;
      const next = Math.min(nextTick, replay.nextWakeAfter(nowMs));
      if (next >= eventMs) break;
      nowMs = next;
      replay.wakeAll(nowMs);
    }
    nowMs = eventMs;
    // Every event at this instant, in file order.
    while (index < events.length && originMs + events[index]!.t * 1000 === eventMs)
      replay.apply(events[index++]!, nowMs);
  }
  return replay.timeline;
}

/** One replay's VMs, their wake-up times and the timeline it writes. */
class Replay {
  readonly timeline: TimelineEntry[] = [];
  private readonly vms = new Map<string, VmReplay>();
  private readonly wakeAt = new Map<string, number | undefined>();
  private readonly defaults: Policy;
  private readonly profiles: Record<string, PolicyOverrides>;
  private readonly prefix: string;

  constructor(
    options: ReplayOptions,
    private readonly originMs: number,
  ) {
    this.defaults = options.defaults ?? BUILTIN_DEFAULT_POLICY;
    this.profiles = options.profiles ?? {};
    this.prefix = options.prefix ?? DEFAULT_ANNOTATION_PREFIX;
  }

  /** The earliest time after `nowMs` at which a decision said something could change. */
  nextWakeAfter(nowMs: number): number {
    return Math.min(
      ...[...this.wakeAt.values()].filter((at): at is number => at !== undefined && at > nowMs),
      Infinity,
    );
  }

  /** A timer decision for every VM the engine has a record of. */
  wakeAll(nowMs: number): void {
    for (const state of this.vms.values()) if (state.loop.record) this.step(state, nowMs, { kind: "wake" });
  }

  apply(event: TraceEvent, nowMs: number): void {
    const state = this.vmFor(event.vm);
    switch (event.kind) {
      case "policy":
        this.applyPolicy(state, event, nowMs);
        return;
      case "host":
        this.step(state, nowMs, { kind: "host", reading: { ...event.host, atMs: nowMs } });
        return;
      case "agent-connected":
      case "agent-disconnected":
        this.note(
          event.vm,
          nowMs,
          event.kind === "agent-connected"
            ? "agent connected"
            : event.goodbye === undefined
              ? "agent disconnected"
              : `agent stopped on purpose (${event.goodbye})`,
        );
        this.step(
          state,
          nowMs,
          event.kind === "agent-connected"
            ? { kind: "connected" }
            : { kind: "disconnected", ...(event.goodbye === undefined ? {} : { goodbye: event.goodbye }) },
        );
        return;
      case "report":
        this.applyReport(state, event, nowMs);
        return;
    }
  }

  private vmFor(vm: string): VmReplay {
    let state = this.vms.get(vm);
    if (!state) {
      state = { vm, loop: newVmLoopState(this.defaults), lastValid: undefined, stoppedAtMs: undefined };
      this.vms.set(vm, state);
    }
    return state;
  }

  private note(vm: string, atMs: number, input: string): void {
    this.timeline.push({ kind: "input", t: (atMs - this.originMs) / 1000, atMs, vm, input });
  }

  private step(state: VmReplay, nowMs: number, input: StepInput): void {
    const decision = stepVm(state.loop, nowMs, input);
    this.wakeAt.set(state.vm, decision.wakeAtMs);
    const { from, to } = decision.explanation;
    if (from !== to || decision.actions.length > 0) {
      this.timeline.push({
        kind: "decision",
        t: (nowMs - this.originMs) / 1000,
        atMs: nowMs,
        vm: state.vm,
        from,
        to,
        summary: decision.summary,
        reason: decision.explanation.reason,
        actions: decision.actions,
        explanation: decision.explanation,
      });
    }
    if (decision.actions.some((action) => action.kind === "stop")) {
      // The replay carries out every stop at once.
      state.loop.running = false;
      state.stoppedAtMs = nowMs;
      this.step(state, nowMs, { kind: "stop-result", result: { outcome: "accepted", message: "replay" } });
    }
  }

  private applyPolicy(state: VmReplay, event: Extract<TraceEvent, { kind: "policy" }>, nowMs: number): void {
    const prefix = this.prefix;
    const annotations = Object.fromEntries(
      Object.entries(event.annotations).map(([key, value]) => [key.includes("/") ? key : `${prefix}${key}`, value]),
    );
    const resolved = resolvePolicy(
      state.lastValid,
      policyFromAnnotations({}, annotations, this.defaults, this.profiles, prefix),
    );
    state.lastValid = resolved.lastValid;
    this.note(
      event.vm,
      nowMs,
      `policy ${
        Object.entries(event.annotations)
          .map(([key, value]) => `${key}=${value}`)
          .join(" ") || "(no annotations)"
      }`,
    );
    // Recorded with its errors even when there are none, as before: the engine reports a recovery.
    this.step(state, nowMs, {
      kind: "policy",
      policy: resolved.policy,
      status: { errors: resolved.errors, fallback: resolved.fallback },
    });
  }

  private applyReport(state: VmReplay, event: Extract<TraceEvent, { kind: "report" }>, nowMs: number): void {
    const received = { report: event.report, receivedAtMs: nowMs };
    if (state.loop.running === false && state.stoppedAtMs !== undefined) {
      state.loop.connected = true;
      const evidence = extractEvidence(received, state.loop.policy);
      const comeback = evidence.readings.filter((reading) => showsPersonAfter(reading, state.stoppedAtMs ?? Infinity));
      if (comeback.length === 0) return; // the real VM kept running; the replayed one is stopped
      this.note(
        event.vm,
        nowMs,
        `activity after the replayed stop (${comeback[0]!.detail}): the user would have started the VM again`,
      );
      state.loop.running = true;
      state.stoppedAtMs = undefined;
      this.step(state, nowMs, { kind: "report", received });
      state.loop.running = undefined;
      return;
    }
    this.step(state, nowMs, { kind: "report", received });
  }
}

/** Per-VM counts for the end of a replay. */
export function summarizeTimeline(
  timeline: readonly TimelineEntry[],
): Map<
  string,
  { notices: number; cancelled: number; stops: number; wouldStops: number; finalState: EngineState | undefined }
> {
  const totals = new Map<
    string,
    { notices: number; cancelled: number; stops: number; wouldStops: number; finalState: EngineState | undefined }
  >();
  for (const entry of timeline) {
    const total = totals.get(entry.vm) ?? { notices: 0, cancelled: 0, stops: 0, wouldStops: 0, finalState: undefined };
    totals.set(entry.vm, total);
    if (entry.kind !== "decision") continue;
    total.finalState = entry.to;
    for (const action of entry.actions) {
      if (action.kind === "notice" && !action.repeat) total.notices++;
      if (action.kind === "notice-cleared" && entry.to === "Active") total.cancelled++;
      if (action.kind === "stop") total.stops++;
      if (action.kind === "would-stop") total.wouldStops++;
    }
  }
  return totals;
}
