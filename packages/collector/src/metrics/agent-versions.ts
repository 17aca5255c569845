// Which agent versions the fleet runs, so version skew (docs/install.md, "Version skew") is seen
// on the fleet page and in workstation_agent_versions. The version is the agent's own word
// (Hello.agent_version): only a version-shaped string is used as a label, and the number of
// distinct labels is capped, so one agent cannot grow the collector's series.
import type { VmView } from "../model/vm-view.js";

/** Distinct version labels kept; the rest count as "other". */
export const MAX_VERSION_LABELS = 16;
const VERSION_SHAPE = /^\d{1,4}\.\d{1,4}\.\d{1,4}(?:[-+][0-9A-Za-z.-]{1,32})?$/;

export interface VersionCount {
  version: string;
  agents: number;
}

/** Connected agents per version, most common first ("invalid": not version-shaped; "other": beyond the cap). */
export function countAgentVersions(views: readonly Pick<VmView, "connected" | "agentVersion">[]): VersionCount[] {
  const counts = new Map<string, number>();
  for (const view of views) {
    if (!view.connected) continue;
    const version = VERSION_SHAPE.test(view.agentVersion) ? view.agentVersion : "invalid";
    counts.set(version, (counts.get(version) ?? 0) + 1);
  }
  const sorted = [...counts].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]));
  const kept = sorted.slice(0, MAX_VERSION_LABELS - 1);
  const rest = sorted.slice(MAX_VERSION_LABELS - 1);
  const result = kept.map(([version, agents]) => ({ version, agents }));
  if (rest.length === 1) result.push({ version: rest[0]![0], agents: rest[0]![1] });
  else if (rest.length > 1) result.push({ version: "other", agents: rest.reduce((sum, [, n]) => sum + n, 0) });
  return result;
}
