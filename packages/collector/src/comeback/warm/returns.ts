// The returns a VM has seen (issue 36 item 2): each time a person asked for it after a stop, by
// which path and how long they waited. Kept compactly on the VM itself (the `returns` annotation,
// like ws's other durable state, so a collector restart loses nothing) and bounded: the newest
// MAX_RETURNS, none older than KEEP_WEEKS. Pure: records in, records or text out.
import { WAIT_TRIGGERS, type WaitTrigger } from "../wait/stages.js";

export const RETURNS_ANNOTATION = "returns";

export interface ReturnRecord {
  /** When the person first asked (ms). */
  atMs: number;
  trigger: WaitTrigger;
  /** Seconds from the request to ready; 0 when the VM was already up. */
  waitSeconds: number;
}

/** Enough for a few returns a day over the weeks the rule looks back on, under 1 KiB of annotation. */
export const MAX_RETURNS = 48;
export const KEEP_WEEKS = 6;
const WEEK_MS = 7 * 24 * 3600_000;

/** One letter per trigger: "l" link, "w" wake, "s" ssh, "c" schedule (cron-like), "a" warm (ahead), "t" standalone. */
const CODES: Record<WaitTrigger, string> = {
  link: "l",
  wake: "w",
  ssh: "s",
  schedule: "c",
  warm: "a",
  standalone: "t",
};
const TRIGGER_OF = new Map(WAIT_TRIGGERS.map((trigger) => [CODES[trigger], trigger]));

/** `<epoch seconds base 36><trigger letter><wait seconds>` per return, space-separated, oldest first. */
export function encodeReturns(records: readonly ReturnRecord[]): string {
  return records
    .map((r) => `${Math.floor(r.atMs / 1000).toString(36)}${CODES[r.trigger]}${Math.max(0, Math.round(r.waitSeconds))}`)
    .join(" ");
}

/** The records in `text`; an entry that does not parse is skipped (a hand edit never breaks the rest). */
export function parseReturns(text: string | undefined): ReturnRecord[] {
  if (!text) return [];
  const out: ReturnRecord[] = [];
  for (const entry of text.split(/\s+/).slice(-MAX_RETURNS * 2)) {
    const match = /^([0-9a-z]{1,9})([lwscat])(\d{1,6})$/.exec(entry);
    const trigger = match ? TRIGGER_OF.get(match[2]!) : undefined;
    if (!match || !trigger) continue;
    out.push({ atMs: Number.parseInt(match[1]!, 36) * 1000, trigger, waitSeconds: Number(match[3]) });
  }
  return out.sort((a, b) => a.atMs - b.atMs);
}

/** `records` with `record` added, bounded: the newest MAX_RETURNS within KEEP_WEEKS of `nowMs`. */
export function appendReturn(records: readonly ReturnRecord[], record: ReturnRecord, nowMs: number): ReturnRecord[] {
  return [...records, record]
    .filter((r) => nowMs - r.atMs <= KEEP_WEEKS * WEEK_MS)
    .sort((a, b) => a.atMs - b.atMs)
    .slice(-MAX_RETURNS);
}
