// The warm starts a VM has had (docs/policy.md "Warm starts learned from returns"): when each was
// made and what became of it, kept on the VM itself (the `warm-starts` annotation) so that a
// collector restart never fires a second one the same day, never loses a week's count, and picks
// up a warm start that is still waiting for its person. Bounded: the last MAX_KEPT within
// KEEP_DAYS. Pure: records in, records or text out.
import type { Policy } from "../../engine/types.js";

export const WARM_STARTS_ANNOTATION = "warm-starts";
/** The owner's opt-out (`off`), also the policy knob of the same name. */
export const WARM_START_ANNOTATION = "warm-start";
/** A warm-started VM nobody uses runs this long idle before its notice, unless the policy says otherwise. */
export const DEFAULT_WARM_WINDOW_SECONDS = 30 * 60;

/** `waiting`: no person yet; `used`: a person came while it ran; `wasted`: it stopped again unused. */
export type WarmStartOutcome = "waiting" | "used" | "wasted";

export interface WarmStartRecord {
  atMs: number;
  outcome: WarmStartOutcome;
}

/** A week for the per-week bound, a day more for "today" in any zone. */
const KEEP_DAYS = 8;
const MAX_KEPT = 16;
const DAY_MS = 24 * 3600_000;
const CODES: Record<WarmStartOutcome, string> = { waiting: "w", used: "u", wasted: "x" };
const OUTCOME_OF = new Map(Object.entries(CODES).map(([outcome, code]) => [code, outcome as WarmStartOutcome]));

/** `<epoch seconds base 36><w|u|x>` per warm start, space-separated, oldest first. */
export function encodeWarmStarts(records: readonly WarmStartRecord[]): string {
  return records.map((r) => `${Math.floor(r.atMs / 1000).toString(36)}${CODES[r.outcome]}`).join(" ");
}

/** The records in `text`; an entry that does not parse is skipped (a hand edit never breaks the rest). */
export function parseWarmStarts(text: string | undefined): WarmStartRecord[] {
  if (!text) return [];
  const out: WarmStartRecord[] = [];
  for (const entry of text.split(/\s+/).slice(-MAX_KEPT * 2)) {
    const match = /^([0-9a-z]{1,9})([wux])$/.exec(entry);
    const outcome = match ? OUTCOME_OF.get(match[2]!) : undefined;
    if (!match || !outcome) continue;
    out.push({ atMs: Number.parseInt(match[1]!, 36) * 1000, outcome });
  }
  return out.sort((a, b) => a.atMs - b.atMs);
}

/** `records` bounded: the newest MAX_KEPT within KEEP_DAYS of `nowMs`. */
export function boundedWarmStarts(records: readonly WarmStartRecord[], nowMs: number): WarmStartRecord[] {
  return [...records]
    .filter((r) => nowMs - r.atMs <= KEEP_DAYS * DAY_MS)
    .sort((a, b) => a.atMs - b.atMs)
    .slice(-MAX_KEPT);
}

/** The warm start still waiting for its person (the newest record, when it waits). */
export function waitingWarmStart(records: readonly WarmStartRecord[]): WarmStartRecord | undefined {
  const latest = records[records.length - 1];
  return latest?.outcome === "waiting" ? latest : undefined;
}

/** The window of a warm start under `policy`, in seconds. */
export function warmWindowSeconds(policy: Policy): number {
  return policy.warmStartWindowSeconds ?? DEFAULT_WARM_WINDOW_SECONDS;
}

/**
 * The policy the engine runs a VM under while its warm start waits for a person: its idle-timeout
 * is the warm window (when shorter), so nobody coming means the usual notice, grace and stop. The
 * same policy otherwise; once a person came (or it stopped) the VM's own idle-timeout is back.
 */
export function warmWaitingPolicy(policy: Policy, records: readonly WarmStartRecord[]): Policy {
  if (!waitingWarmStart(records)) return policy;
  const window = warmWindowSeconds(policy);
  return window < policy.idleTimeoutSeconds ? { ...policy, idleTimeoutSeconds: window } : policy;
}
