// The starts this collector was asked for: one start per VM at a time (two POSTs from two tabs, or
// a page and an ssh helper, share the first one's request), when each was asked for and by whom,
// and when it became ready. Counts what the metrics export. A start answers one stop: once the VM
// stops again (ws stopped it, or anyone did: `virtctl stop`, a shutdown in the guest), the start is
// history and the next one is a new way back (docs/coming-back.md, "A start answers one stop").
// Bounded: finished starts are forgotten after a while, and at most `limit` are kept.
import { type VmKey, vmId } from "../../model/vm-key.js";
import type { StartFacts, StartResult } from "./platform.js";
import type { PlacementMemory } from "../wait/placement.js";
import { type RecordedWait, SUMMARY_WINDOW_MS } from "../wait/summary.js";
import { splitWait, type WaitSplit, type WaitTrigger, waitTriggerOf, ZERO_WAIT } from "../wait/stages.js";
import { type AttemptFacts, instanceLive, type Stage } from "./progress.js";

/** Which path asked: the start link's page, the workstation's own address, the ssh helper, the VM's schedule. */
export type StartTrigger = "link" | "address" | "ssh" | "schedule" | "warm";
export const START_TRIGGERS: readonly StartTrigger[] = ["link", "address", "ssh", "schedule", "warm"];

export interface StartAttempt extends AttemptFacts, PlacementMemory {
  trigger: StartTrigger;
  inFlight?: Promise<StartResult>;
  /** The platform showed the VM running (or meant to run) since this start was asked for. */
  ranSinceMs?: number;
}

/** What the platform says of the VM now: enough to tell whether a start still answers its stop. */
export interface RunView {
  /** When ws last stopped it (the last-stop record), if it did. */
  lastStopAtMs?: number;
  /** Running, or meant to run (started, starting). */
  running: boolean;
}

/** The platform's facts as a `RunView`. */
export function runViewOf(facts: StartFacts): RunView {
  return {
    running: facts.wantsToRun || instanceLive(facts.instance),
    ...(facts.lastStop ? { lastStopAtMs: facts.lastStop.atMs } : {}),
  };
}

/**
 * Whether `attempt` still answers the stop the VM is in: false once the VM stopped again after
 * it: ws recorded a stop after the request, or the VM ran since and is stopped now (a stop ws
 * did not make leaves no record). Before the platform shows the VM running the start is still
 * on its way: an inventory that lags the request is not a stop. Pure.
 */
export function answersCurrentStop(attempt: AttemptFacts & { ranSinceMs?: number }, view: RunView): boolean {
  if (view.lastStopAtMs !== undefined && view.lastStopAtMs > attempt.requestedAtMs) return false;
  const ran = attempt.ranSinceMs !== undefined || attempt.readyAtMs !== undefined;
  return view.running || !ran;
}

export interface RequestOutcome {
  attempt: StartAttempt;
  /** False when this request joined a start already under way. */
  started: boolean;
  result: StartResult;
}

/** Returns kept for the fleet page's 7 days: a few per VM per day for a large fleet. */
const RECENT_WAITS_KEPT = 20_000;
/** A start not ready after this long is over (the page offers Start again). */
const ATTEMPT_LIFETIME_MS = 60 * 60_000;
/** A finished start is remembered this long, so its page still shows its times. */
const FINISHED_KEPT_MS = 30 * 60_000;

export class StartTracker {
  private readonly attempts = new Map<string, StartAttempt>();
  /** Starts asked of the platform, by trigger. */
  readonly startsTotal = new Map<StartTrigger, number>();
  /** Seconds from the request to ready, of every start that became ready since the last drain. */
  private readySeconds: number[] = [];
  /** Each return's wait by stage since the last drain (a return that found the VM ready waited 0). */
  private waits: Array<{ trigger: WaitTrigger; split: WaitSplit }> = [];
  /** The returns of the last 7 days, for the fleet page's p50/p95 (bounded: RECENT_WAITS_KEPT). */
  private recentWaits: RecordedWait[] = [];

  constructor(private readonly limit = 10_000) {}

  /** The start that answers the VM's current stop, if one was asked for; `view` is the platform's now. */
  get(vm: VmKey, nowMs: number, view: RunView): StartAttempt | undefined {
    const attempt = this.attempts.get(vmId(vm));
    if (!attempt) return undefined;
    if (this.over(attempt, nowMs) || !answersCurrentStop(attempt, view)) {
      this.attempts.delete(vmId(vm));
      return undefined;
    }
    if (view.running && attempt.ranSinceMs === undefined && attempt.result?.ok) attempt.ranSinceMs = nowMs;
    return attempt;
  }

  /**
   * Starts the VM unless a start of it is under way; either way, resolves with that start's answer.
   * `foundReady`: the VM was already running with its entry service up when asked: the return is
   * ready at once and counts as a zero wait.
   */
  async request(
    vm: VmKey,
    who: { by: string; trigger: StartTrigger },
    nowMs: number,
    view: RunView,
    start: () => Promise<StartResult>,
    foundReady = false,
  ): Promise<RequestOutcome> {
    const current = this.get(vm, nowMs, view);
    if (current && current.readyAtMs === undefined && (current.inFlight || current.result?.ok)) {
      const result = current.inFlight ? await current.inFlight : (current.result as StartResult);
      return { attempt: current, started: false, result };
    }
    const attempt: StartAttempt = { requestedAtMs: nowMs, by: who.by, trigger: who.trigger };
    this.prune(nowMs);
    this.attempts.set(vmId(vm), attempt);
    this.startsTotal.set(who.trigger, (this.startsTotal.get(who.trigger) ?? 0) + 1);
    attempt.inFlight = start();
    const result = await attempt.inFlight;
    attempt.result = { ok: result.ok, message: result.message };
    delete attempt.inFlight;
    if (foundReady && result.ok) {
      attempt.readyAtMs = nowMs;
      this.readySeconds.push(0);
      this.keepWait(nowMs, waitTriggerOf(who.trigger), ZERO_WAIT);
    }
    return { attempt, started: true, result };
  }

  /**
   * The start became ready (its first Report with the entry service up arrived at `atMs`);
   * `stages` (the starting page's) split its wait for the per-stage histograms.
   */
  markReady(vm: VmKey, atMs: number, stages: readonly Stage[] = []): StartAttempt | undefined {
    const attempt = this.attempts.get(vmId(vm));
    if (!attempt || attempt.readyAtMs !== undefined || !attempt.result?.ok) return undefined;
    attempt.readyAtMs = Math.max(atMs, attempt.requestedAtMs);
    this.readySeconds.push((attempt.readyAtMs - attempt.requestedAtMs) / 1000);
    // A learned warm start is made ahead of its person: nobody waited for its boot.
    if (attempt.trigger === "warm") return attempt;
    this.keepWait(
      attempt.requestedAtMs,
      waitTriggerOf(attempt.trigger),
      splitWait(stages, attempt.requestedAtMs, attempt.readyAtMs),
    );
    return attempt;
  }

  /** A person came to a warm-started VM without asking (their first activity): a return with no wait. */
  foundWarm(atMs: number): void {
    this.keepWait(atMs, "warm", ZERO_WAIT);
  }

  private keepWait(atMs: number, trigger: WaitTrigger, split: WaitSplit): void {
    this.waits.push({ trigger, split });
    this.recentWaits = [...this.recentWaits, { atMs, trigger, split }]
      .filter((w) => atMs - w.atMs <= SUMMARY_WINDOW_MS)
      .slice(-RECENT_WAITS_KEPT);
  }

  /** The returns of the last 7 days that this collector saw, oldest first. */
  recent(): readonly RecordedWait[] {
    return this.recentWaits;
  }

  /** The waits since the last call, for the per-stage histograms. */
  drainWaits(): Array<{ trigger: WaitTrigger; split: WaitSplit }> {
    const out = this.waits;
    this.waits = [];
    return out;
  }

  /** What the VM's latest start knows of its placement (the welcome back's), without ending it. */
  placementOf(vm: VmKey): PlacementMemory | undefined {
    return this.attempts.get(vmId(vm));
  }

  /** The VM was deleted: its start is history. */
  forget(vm: VmKey): void {
    this.attempts.delete(vmId(vm));
  }

  /** Whether the VM has a start under way that is not ready yet (its agent is heard sample by sample). */
  awaitsReady(vm: VmKey, nowMs: number): boolean {
    const attempt = this.attempts.get(vmId(vm));
    return attempt !== undefined && this.unready(attempt, nowMs);
  }

  /** VMs with a start that is not ready yet: the ones to watch. */
  pending(nowMs: number): VmKey[] {
    const out: VmKey[] = [];
    for (const [id, attempt] of this.attempts) {
      if (!this.unready(attempt, nowMs)) continue;
      const [namespace = "", name = ""] = id.split("/");
      out.push({ namespace, name });
    }
    return out;
  }

  /** Start-to-ready durations since the last call, for the histogram. */
  drainReadySeconds(): number[] {
    const out = this.readySeconds;
    this.readySeconds = [];
    return out;
  }

  private unready(attempt: StartAttempt, nowMs: number): boolean {
    return !this.over(attempt, nowMs) && attempt.readyAtMs === undefined && !(attempt.result && !attempt.result.ok);
  }

  private over(attempt: StartAttempt, nowMs: number): boolean {
    const finishedAt = attempt.readyAtMs ?? (attempt.result && !attempt.result.ok ? attempt.requestedAtMs : undefined);
    if (finishedAt !== undefined) return nowMs - finishedAt > FINISHED_KEPT_MS;
    return !attempt.inFlight && nowMs - attempt.requestedAtMs > ATTEMPT_LIFETIME_MS;
  }

  private prune(nowMs: number): void {
    for (const [id, attempt] of this.attempts) if (this.over(attempt, nowMs)) this.attempts.delete(id);
    while (this.attempts.size >= this.limit) this.attempts.delete(this.attempts.keys().next().value!);
  }
}
