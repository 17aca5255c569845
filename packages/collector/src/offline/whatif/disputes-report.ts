// The stop disputes as whatif prints them: each "this stop was a mistake" with the stop it
// disputes, the knob that would have kept the VM (as whatif's --KNOB VALUE), and, beside a
// replay, whether the replayed policy still stops the VM at that time. Pure. Everything in a
// dispute came from someone else (a VM user's words, process and kernel names in the last
// activity, a document given to whatif): the text goes through terminalText, the JSON through
// escapedText.
import { escapedJson, formatDuration, terminalText } from "@ws/protocol";
import type { DisputeRecord } from "../../comeback/start/disputes.js";
import type { VmOutcome } from "./simulate.js";

export interface DisputeVerdict extends DisputeRecord {
  /** Beside a replay: "kept" (no replayed stop near the disputed one) or "still stopped" (at `replayStopAt`). */
  replay?: "kept" | "still stopped" | "not in the replay";
  replayStopAt?: string;
}

/** How near a replayed stop must be to the disputed one to be the same stop: the replay's step, and 15 minutes. */
const SAME_STOP_MS = 15 * 60_000;

export function disputeVerdicts(
  disputes: readonly DisputeRecord[],
  outcomes: readonly VmOutcome[],
  stepSeconds: number,
): DisputeVerdict[] {
  return disputes.map((dispute) => {
    const outcome = outcomes.find((o) => `${o.namespace}/${o.name}` === dispute.vm);
    if (!outcome) return { ...dispute, replay: "not in the replay" };
    const stoppedAtMs = Date.parse(dispute.stoppedAt);
    const near = outcome.stops.find(
      (stop) => Math.abs(stop.atMs - stoppedAtMs) <= Math.max(SAME_STOP_MS, stepSeconds * 1000),
    );
    return near
      ? { ...dispute, replay: "still stopped", replayStopAt: new Date(near.atMs).toISOString() }
      : { ...dispute, replay: "kept" };
  });
}

function knobFlag(dispute: DisputeRecord): string {
  return terminalText(
    dispute.knob.value !== undefined ? `--${dispute.knob.name} ${dispute.knob.value}` : dispute.knob.text,
    1000,
  );
}

export function formatDisputesText(disputes: readonly DisputeVerdict[]): string {
  if (disputes.length === 0) return "Stop disputes: none (nobody said a stop was a mistake).\n";
  const lines = [
    `Stop disputes: ${disputes.length} ("this stop was a mistake"), newest first, with the knob that would have kept each VM`,
    "",
  ];
  const rows: string[][] = [["VM", "stopped", "idle", "reported by", "what they were doing", "knob", "this replay"]];
  for (const d of disputes)
    rows.push([
      terminalText(d.vm, 200),
      terminalText(d.stoppedAt, 40),
      d.idleSeconds !== undefined ? formatDuration(d.idleSeconds) : "?",
      terminalText(d.by, 200),
      terminalText(d.what, 500) || "—",
      knobFlag(d),
      d.replay === undefined ? "" : d.replay === "still stopped" ? `still stopped ${d.replayStopAt}` : d.replay,
    ]);
  const widths = rows[0]!.map((_, column) => Math.max(...rows.map((row) => row[column]!.length)));
  for (const row of rows)
    lines.push(
      row
        .map((cell, column) => cell.padEnd(widths[column]!))
        .join("  ")
        .trimEnd(),
    );
  lines.push("");
  for (const d of disputes)
    if (d.lastActivity)
      lines.push(
        terminalText(
          `${d.vm}: the last activity ws saw before the stop: ${d.lastActivity.what} (${d.lastActivity.at})`,
          1000,
        ),
      );
  const flags = [...new Set(disputes.filter((d) => d.knob.value !== undefined).map(knobFlag))];
  if (flags.length > 0)
    lines.push(
      `What a knob costs across the fleet: ws-collector whatif --prometheus URL --from now-7d --disputes FILE ${flags[0]}`,
    );
  return `${lines.join("\n")}\n`;
}

export function formatDisputesJson(disputes: readonly DisputeVerdict[]): string {
  return `${escapedJson({ disputes }, 2)}\n`;
}
