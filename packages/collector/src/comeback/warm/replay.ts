// What learned warm starts would have cost and saved on a VM's recorded returns (issue 36 item
// 2: the rule is replayable). Walks the recorded weeks minute by minute with the rule seeing only
// the returns before each minute, as it would have live. Pure.
import type { ReturnRecord } from "./returns.js";
import { decideWarmStart, type LocalTime, type WarmLimits, warmStartOutcome } from "./rule.js";

export interface WarmReplay {
  warmStarts: number;
  /** Warm starts a return came within the window of. */
  used: number;
  /** Warm starts nobody came for: each cost the window's run time and was stopped again. */
  wasted: number;
  /** The waits the returns that found a warm VM did not have (their recorded wait, at most the head start). */
  savedSeconds: number;
  /** VM run time the warm starts added: until the return came, or the whole window when none did. */
  costSeconds: number;
}

const STEP_MS = 60_000;

export function replayWarmStarts(
  records: readonly ReturnRecord[],
  local: (ms: number) => LocalTime,
  limits: WarmLimits,
  windowMs: number,
): WarmReplay {
  const out: WarmReplay = { warmStarts: 0, used: 0, wasted: 0, savedSeconds: 0, costSeconds: 0 };
  if (records.length === 0) return out;
  const memo = new Map<number, LocalTime>();
  const cachedLocal = (ms: number) => {
    const known = memo.get(ms);
    if (known) return known;
    const value = local(ms);
    memo.set(ms, value);
    return value;
  };
  const sorted = [...records].sort((a, b) => a.atMs - b.atMs);
  const starts: number[] = [];
  let seen = 0;
  let warmUntilMs = Number.NEGATIVE_INFINITY;
  const first = Math.floor(sorted[0]!.atMs / STEP_MS) * STEP_MS;
  const last = sorted[sorted.length - 1]!.atMs;
  for (let t = first; t <= last; t += STEP_MS) {
    while (seen < sorted.length && sorted[seen]!.atMs < t) seen++;
    const decision = decideWarmStart({
      nowMs: t,
      records: sorted.slice(0, seen),
      local: cachedLocal,
      optedIn: true,
      ownerOff: false,
      running: t < warmUntilMs,
      warmStartsMs: starts,
      resourceShort: false,
      limits,
    });
    if (!decision.start) continue;
    starts.push(t);
    out.warmStarts++;
    const next = sorted.find((r) => r.atMs >= t);
    const outcome = warmStartOutcome(t, next?.atMs, Number.POSITIVE_INFINITY, windowMs);
    if (outcome === "used" && next) {
      out.used++;
      out.savedSeconds += Math.min(next.waitSeconds, (next.atMs - t) / 1000);
      out.costSeconds += (next.atMs - t) / 1000;
      warmUntilMs = next.atMs;
    } else {
      out.wasted++;
      out.costSeconds += windowMs / 1000;
      warmUntilMs = t + windowMs;
    }
  }
  return out;
}
