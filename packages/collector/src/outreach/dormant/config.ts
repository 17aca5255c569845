// The `dormant:` section of the collector config (docs/policy.md, "Dormant workstations"): how
// long a VM must have been stopped before it is listed as dormant, how often its owner is
// reminded, and how often the collector looks. Its own module so the config resolver calls it in
// one line. Pure.
import { DurationError, isJsonObject, parseDuration } from "@ws/protocol";

export interface DormantConfig {
  /** Stopped at least this long: dormant (default 30 days). */
  afterSeconds: number;
  /** At most one reminder per VM per this period (default 30 days: "monthly"). */
  notifyEverySeconds: number;
  /** How often the collector lists stopped VMs and reads their PVCs (default 1 hour). */
  scanEverySeconds: number;
}

export const DEFAULT_DORMANT: Readonly<DormantConfig> = Object.freeze({
  afterSeconds: 30 * 86_400,
  notifyEverySeconds: 30 * 86_400,
  scanEverySeconds: 3_600,
});

const KEYS = ["after", "notifyEvery", "scanEvery"] as const;
/** The bounds each key accepts, in seconds; outside them is a config error, never a silent clamp. */
const BOUNDS: Record<(typeof KEYS)[number], { min: number; max: number; words: string }> = {
  after: { min: 1, max: 10 * 365 * 86_400, words: "from 1s to 10 years" },
  notifyEvery: { min: 1, max: 365 * 86_400, words: "from 1s to 365 days" },
  scanEvery: { min: 1, max: 86_400, words: "from 1s to 1 day" },
};

/** Parses `dormant:` (absent: the defaults). Every problem is pushed to `problems`; the default stands in. */
export function parseDormantConfig(raw: unknown, problems: string[], label: string): DormantConfig {
  const config: DormantConfig = { ...DEFAULT_DORMANT };
  if (raw == null) return config;
  if (!isJsonObject(raw)) {
    problems.push(`${label}: expected a mapping with ${KEYS.join(", ")}`);
    return config;
  }
  for (const key of Object.keys(raw))
    if (!(KEYS as readonly string[]).includes(key))
      problems.push(`${label}: unknown setting "${key.slice(0, 40)}" (known: ${KEYS.join(", ")})`);
  const target: Record<(typeof KEYS)[number], keyof DormantConfig> = {
    after: "afterSeconds",
    notifyEvery: "notifyEverySeconds",
    scanEvery: "scanEverySeconds",
  };
  for (const key of KEYS) {
    const value = raw[key];
    if (value == null) continue;
    const bounds = BOUNDS[key];
    let seconds = Number.NaN;
    try {
      if (typeof value === "string" || typeof value === "number")
        seconds = parseDuration(String(value), { allowBareSeconds: true });
    } catch (error) {
      if (!(error instanceof DurationError)) throw error;
    }
    if (seconds >= bounds.min && seconds <= bounds.max) config[target[key]] = seconds;
    else
      problems.push(
        `${label}.${key}: expected a duration ${bounds.words} (e.g. "30d"), not ${JSON.stringify(value)?.slice(0, 40)}`,
      );
  }
  return config;
}
