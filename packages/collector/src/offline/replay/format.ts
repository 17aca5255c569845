// The replay timeline as text (one block per decision) or JSON lines. A trace holds what VM
// users named things (processes, kernels, lease reasons): each line's text goes through
// terminalText, each JSON line through escapedText.
import { escapedJson, terminalText } from "@ws/protocol";

import type { Action } from "../../engine/types.js";
import { uncountedConnections } from "./connected.js";
import { summarizeTimeline, type TimelineEntry } from "./replay.js";

/** Seconds from the trace start as "+HH:MM:SS" (with days: "+2d03:04:05"). */
export function formatOffset(seconds: number): string {
  const total = Math.round(seconds);
  const sign = total < 0 ? "-" : "+";
  let rest = Math.abs(total);
  const days = Math.floor(rest / 86_400);
  rest -= days * 86_400;
  const pad = (n: number) => String(n).padStart(2, "0");
  const hms = `${pad(Math.floor(rest / 3600))}:${pad(Math.floor((rest % 3600) / 60))}:${pad(rest % 60)}`;
  return `${sign}${days > 0 ? `${days}d` : ""}${hms}`;
}

function describeAction(action: Action, at: (ms: number | undefined) => string): string {
  switch (action.kind) {
    case "notice":
      return `notice ${action.id}${action.repeat ? " (repeat)" : ""}${action.mode === "observe" ? " [observe]" : ""}: stop at ${at(action.deadlineMs)} — ${action.reason}`;
    case "notice-cleared":
      return `notice ${action.id} cleared: ${action.reason}`;
    case "stop":
      return `STOP (attempt ${action.attempt}, ${action.trigger}): accepted at once by the replay`;
    case "would-stop":
      return `WOULD STOP (observe mode, ${action.trigger}): nothing stopped`;
    case "cancel-stop":
      return `cancel the stop: ${action.reason}`;
    case "event":
      return `event ${action.type} ${action.reason}`;
    case "persist":
      return (
        `persist state=${action.values.state} last-active=${at(action.values.lastActiveMs)}` +
        (action.values.noticeId
          ? ` notice-id=${action.values.noticeId} stop-deadline=${at(action.values.stopDeadlineMs)}`
          : "")
      );
    case "lease-decisions":
      return action.decisions.length === 0
        ? "lease decisions: no leases"
        : action.decisions
            .map(
              (decision) =>
                `lease ${decision.id}: ${decision.accepted ? (decision.clamped ? "accepted, clamped" : "accepted") : "refused"}, holds until ${at(decision.effectiveExpiryMs)} (${decision.message})`,
            )
            .join("; ");
    case "policy-error":
      return `policy error: ${action.errors.map((error) => `${error.key}=${JSON.stringify(error.value ?? "")}: ${error.message}`).join("; ")} (running under: ${action.fallback})`;
  }
}

export interface TextOptions {
  /** Also print the wall time (when the trace recorded one). */
  wallTime?: boolean;
}

/** A line's cap: long enough for an explanation, bounded against a hostile one. */
const LINE_MAX_CHARS = 2000;
const clean = (text: string) => terminalText(text, LINE_MAX_CHARS);

export function formatTimelineText(timeline: readonly TimelineEntry[], options: TextOptions = {}): string {
  const vmWidth = Math.max(0, ...timeline.map((entry) => clean(entry.vm).length));
  const lines: string[] = [];
  for (const entry of timeline) {
    const originMs = entry.atMs - entry.t * 1000;
    const at = (ms: number | undefined) => (ms === undefined ? "-" : formatOffset((ms - originMs) / 1000));
    const time = formatOffset(entry.t) + (options.wallTime ? ` ${new Date(entry.atMs).toISOString()}` : "");
    const indent = " ".repeat(time.length + 2);
    const head = `${time}  ${clean(entry.vm).padEnd(vmWidth)}  `;
    if (entry.kind === "input") {
      lines.push(`${head}· ${clean(entry.input)}`);
      continue;
    }
    lines.push(`${head}${entry.from === entry.to ? entry.to : `${entry.from} → ${entry.to}`}`);
    lines.push(`${indent}${clean(entry.reason)}`);
    for (const veto of entry.explanation.vetoes)
      lines.push(
        `${indent}held: ${clean(veto.detail)}${veto.untilMs !== undefined ? ` (until ${at(veto.untilMs)})` : ""}`,
      );
    if (entry.from !== entry.to && (entry.to === "StoppingPending" || entry.to === "Stopping"))
      for (const detail of uncountedConnections(entry.explanation))
        lines.push(`${indent}not counted: ${clean(detail)}`);
    for (const action of entry.actions) lines.push(`${indent}↳ ${clean(describeAction(action, at))}`);
  }
  const totals = summarizeTimeline(timeline);
  if (totals.size > 0) {
    lines.push("");
    for (const [vm, total] of totals) {
      lines.push(
        `${clean(vm)}: ${total.notices} notice${total.notices === 1 ? "" : "s"}, ${total.cancelled} cancelled, ` +
          `${total.stops} stop${total.stops === 1 ? "" : "s"}, ${total.wouldStops} would-stop; final state ${total.finalState ?? "Unknown"}`,
      );
    }
  }
  return `${lines.join("\n")}\n`;
}

/** One JSON object per line: the entry with its explanation and actions. */
export function formatTimelineJson(timeline: readonly TimelineEntry[]): string {
  return timeline.map((entry) => escapedJson(entry)).join("\n") + (timeline.length > 0 ? "\n" : "");
}
