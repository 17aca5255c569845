// "This stop was a mistake, I was working": the user's report on the last stop, kept with the
// stop's own explanation (the last-stop record), counted, sent to the platform's webhook and
// named with the knob that would have kept the VM, so whoever tunes the policy sees it. Pure.
import { formatDuration, terminalText } from "@ws/protocol";
import type { LastStopFacts } from "./platform.js";

/**
 * How long a stop may be disputed: as long as the welcome back explains it (a stop older than
 * this is history, its VM has been used since).
 */
export const DISPUTE_WINDOW_MS = 30 * 86_400_000;

/** Whether the last stop can still be said to be a mistake at `nowMs`: recorded, not yet disputed, not too old. */
export function disputeOpen(stop: LastStopFacts | null | undefined, nowMs: number): stop is LastStopFacts {
  return (
    !!stop &&
    stop.disputedAtMs === undefined &&
    Number.isFinite(stop.atMs) &&
    stop.atMs <= nowMs &&
    nowMs - stop.atMs <= DISPUTE_WINDOW_MS
  );
}

/** What the user may add: a sentence, no markup, bounded. */
export const MAX_DISPUTE_CHARS = 500;

export interface Dispute {
  atMs: number;
  by: string;
  /** What they were doing, as they wrote it (cleaned, cut). */
  what: string;
  /** The policy setting that would have kept the VM (docs/policy.md), in a sentence. */
  knob: string;
}

/** One line without anything a terminal acts on (whatif prints it to whoever tunes the policy), bounded. */
export function cleanDisputeText(text: string | null | undefined): string {
  return terminalText(text, MAX_DISPUTE_CHARS);
}

/** The idle-timeout that would have kept a VM stopped after `idleSeconds` idle: the next whole minute, plus one. */
export function suggestedIdleTimeout(idleSeconds: number): string {
  return formatDuration(Math.ceil(idleSeconds / 60) * 60 + 60);
}

/**
 * The knob: with the idle time the stop recorded, an idle-timeout above it would have kept the
 * VM; `ws-collector whatif --idle-timeout …` replays the period to show what that costs fleet-wide.
 */
export function disputeKnob(stop: LastStopFacts): string {
  if (stop.idleSeconds === undefined)
    return "the stop recorded no idle time: check which signal missed the activity (the VM's page, ws-agent probe)";
  const above = suggestedIdleTimeout(stop.idleSeconds);
  return `idle-timeout ${above} (it had been idle ${formatDuration(stop.idleSeconds)}) would have kept it${stop.lastActivity ? `; the last activity ws saw: ${stop.lastActivity.what}` : ""}; try: ws-collector whatif --idle-timeout ${above}`;
}
