// `whatif --returns FILE`: what learned warm starts (comeback/warm/rule.ts) would have cost and
// saved on each VM's recorded returns (the `returns` annotation of `kubectl get vm -A -o json`).
// Pure: the document's text in, the replays and their text or JSON out. The names come from
// someone else's document: the text goes through terminalText.
import { formatDuration, terminalText } from "@ws/protocol";
import { replayWarmStarts, type WarmReplay } from "../../comeback/warm/replay.js";
import { parseReturns, RETURNS_ANNOTATION } from "../../comeback/warm/returns.js";
import { DEFAULT_WARM_LIMITS, localTimeIn } from "../../comeback/warm/rule.js";

export interface VmWarmReplay extends WarmReplay {
  vm: string;
  returns: number;
}

export function warmReplaysFromDocument(
  text: string,
  prefix: string,
  timeZone: string,
  windowMs: number,
): VmWarmReplay[] {
  let document: unknown;
  try {
    document = JSON.parse(text);
  } catch {
    throw new Error("not JSON: give `kubectl get vm -A -o json`");
  }
  const items = (document as { items?: unknown } | null)?.items;
  if (!Array.isArray(items)) throw new Error('not a list with "items" (kubectl get vm -A -o json)');
  const local = localTimeIn(timeZone);
  const out: VmWarmReplay[] = [];
  for (const item of items as Array<{ metadata?: { namespace?: unknown; name?: unknown; annotations?: unknown } }>) {
    const metadata = item?.metadata ?? {};
    const raw = ((metadata.annotations ?? {}) as Record<string, unknown>)[`${prefix}${RETURNS_ANNOTATION}`];
    if (typeof metadata.namespace !== "string" || typeof metadata.name !== "string" || typeof raw !== "string")
      continue;
    const records = parseReturns(raw);
    out.push({
      vm: `${metadata.namespace}/${metadata.name}`,
      returns: records.length,
      ...replayWarmStarts(records, local, DEFAULT_WARM_LIMITS, windowMs),
    });
  }
  return out.sort((a, b) => a.vm.localeCompare(b.vm));
}

export function formatWarmReplaysText(replays: readonly VmWarmReplay[], timeZone: string): string {
  if (replays.length === 0) return "Learned warm starts: no VM has recorded returns.\n";
  const lines = [
    `Learned warm starts on the recorded returns (time zone ${terminalText(timeZone, 64)}): what they would have saved and cost`,
    "",
  ];
  for (const r of replays)
    lines.push(
      `  ${terminalText(r.vm, 253)}: ${r.returns} returns, ${r.warmStarts} warm starts (${r.used} used, ${r.wasted} wasted), wait saved ${formatDuration(Math.round(r.savedSeconds))}, run time added ${formatDuration(Math.round(r.costSeconds))}`,
    );
  return `${lines.join("\n")}\n`;
}
