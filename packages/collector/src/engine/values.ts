// Parsers for the value kinds policy knobs take. Each returns a number/boolean
// or throws a ValueError whose message says what a valid value looks like.
// Annotations are always strings; config files (YAML) may give numbers and
// booleans, so every parser accepts both.

import { DurationError, parseDuration } from "@ws/protocol";

export class ValueError extends Error {
  override name = "ValueError";
}

const OFF_WORDS = new Set(["off", "none", "disabled"]);

export function isOff(value: unknown): boolean {
  return typeof value === "string" && OFF_WORDS.has(value.trim().toLowerCase());
}

function asText(value: unknown): string {
  if (typeof value === "string") return value;
  if (typeof value === "number" || typeof value === "boolean") return String(value);
  throw new ValueError(`expected a string, got ${value === null ? "null" : typeof value}`);
}

/**
 * A duration such as "2h" or "1h30m". Config files may also give a bare number
 * of seconds (YAML `idle-timeout: 7200`); annotations may not, because "120"
 * next to "2h" is too easy to misread.
 */
export function parseDurationValue(
  value: unknown,
  options: { allowBareSeconds: boolean; allowZero?: boolean; minSeconds?: number; maxSeconds?: number },
): number {
  let seconds: number;
  if (typeof value === "number") {
    if (!options.allowBareSeconds)
      throw new ValueError(`${value} has no unit: write ${value}s, ${value}m or ${value}h`);
    try {
      seconds = parseDuration(String(value), { allowBareSeconds: true, allowZero: options.allowZero ?? false });
    } catch (error) {
      // A YAML number (idle-timeout: 0) is a bad value like any other, not a crash of the config load.
      if (error instanceof DurationError) throw new ValueError(error.message);
      throw error;
    }
  } else {
    try {
      seconds = parseDuration(asText(value), {
        allowBareSeconds: options.allowBareSeconds,
        allowZero: options.allowZero ?? false,
      });
    } catch (error) {
      if (error instanceof DurationError) throw new ValueError(error.message);
      throw error;
    }
  }
  if (options.minSeconds !== undefined && seconds < options.minSeconds) {
    throw new ValueError(
      `${JSON.stringify(value)} is shorter than the minimum of ${describeSeconds(options.minSeconds)}`,
    );
  }
  if (options.maxSeconds !== undefined && seconds > options.maxSeconds) {
    throw new ValueError(
      `${JSON.stringify(value)} is longer than the maximum of ${describeSeconds(options.maxSeconds)}`,
    );
  }
  return seconds;
}

function describeSeconds(seconds: number): string {
  if (seconds % 3600 === 0) return `${seconds / 3600}h`;
  if (seconds % 60 === 0) return `${seconds / 60}m`;
  return `${seconds}s`;
}

/** "10%" or "0.1": a share in (0, 1]. "off" disables (Infinity: never reached). */
export function parseRatio(value: unknown): number {
  if (isOff(value)) return Number.POSITIVE_INFINITY;
  const text = asText(value).trim();
  const percent = /^(\d+(?:\.\d+)?)\s*%$/.exec(text);
  const ratio = percent ? Number(percent[1]) / 100 : /^\d+(?:\.\d+)?$/.test(text) ? Number(text) : Number.NaN;
  if (Number.isNaN(ratio)) {
    throw new ValueError(
      `${JSON.stringify(value)} is not a ratio: write a percentage such as 10% or a fraction such as 0.1 (or "off")`,
    );
  }
  if (ratio <= 0 || ratio > 1) {
    throw new ValueError(
      `${JSON.stringify(value)} is out of range: a ratio is above 0 and at most 1 (100%)` +
        (ratio > 1 && !percent ? `; did you mean ${text}%?` : ""),
    );
  }
  return ratio;
}

/** A number of CPU cores such as "0.5" or "2". */
export function parseCores(value: unknown): number {
  if (isOff(value)) return Number.POSITIVE_INFINITY;
  const text = asText(value).trim();
  if (!/^\d+(?:\.\d+)?$/.test(text)) {
    throw new ValueError(
      `${JSON.stringify(value)} is not a number of CPU cores: write a number such as 0.5 or 2 (or "off")`,
    );
  }
  const cores = Number(text);
  if (cores <= 0 || cores > 4096)
    throw new ValueError(`${JSON.stringify(value)} is out of range: above 0 and at most 4096 cores`);
  return cores;
}

const BYTE_PREFIX: Record<string, number> = {
  "": 1,
  k: 1e3,
  m: 1e6,
  g: 1e9,
  ki: 1024,
  mi: 1024 ** 2,
  gi: 1024 ** 3,
};

/** A rate in bytes per second: "1MB/s", "500KiB/s", "2M", "1000000". */
export function parseByteRate(value: unknown): number {
  if (isOff(value)) return Number.POSITIVE_INFINITY;
  const text = asText(value).trim();
  const match = /^(\d+(?:\.\d+)?)\s*([kKmMgG]i?)?(B|b)?(\/s)?$/.exec(text);
  if (!match) {
    throw new ValueError(
      `${JSON.stringify(value)} is not a rate: write bytes per second such as 1MB/s, 500KiB/s or 200000 (or "off")`,
    );
  }
  if (match[3] === "b") {
    throw new ValueError(
      `${JSON.stringify(value)}: rates are in bytes (B), not bits (b); write ${text.replace(/b/, "B")}`,
    );
  }
  const factor = BYTE_PREFIX[(match[2] ?? "").toLowerCase()] ?? 1;
  const rate = Number(match[1]) * factor;
  // 400 digits make Infinity, which is what "off" means: a typo must not switch the threshold off.
  if (!Number.isFinite(rate)) throw new ValueError(`${JSON.stringify(value)} is too large to be a rate`);
  if (rate <= 0) throw new ValueError(`${JSON.stringify(value)} must be above zero (or "off")`);
  return rate;
}

export function parseBoolean(value: unknown): boolean {
  if (typeof value === "boolean") return value;
  const text = asText(value).trim().toLowerCase();
  if (["true", "yes", "on", "enabled", "1"].includes(text)) return true;
  if (["false", "no", "off", "disabled", "0"].includes(text)) return false;
  throw new ValueError(`${JSON.stringify(value)} is not a boolean: write true or false`);
}

/** The autostop switch: "enabled" or "disabled" (config files may say true/false). */
export function parseSwitch(value: unknown): boolean {
  if (typeof value === "boolean") return value;
  const text = asText(value).trim().toLowerCase();
  if (text === "enabled" || text === "true") return true;
  if (text === "disabled" || text === "false") return false;
  throw new ValueError(`${JSON.stringify(value)} is not a switch: write enabled or disabled`);
}

/** `on` | `off` (also true/false): a feature switched per profile or VM, such as `warm-start`. */
export function parseOnOff(value: unknown): boolean {
  if (typeof value === "boolean") return value;
  const text = asText(value).trim().toLowerCase();
  if (text === "on" || text === "true") return true;
  if (text === "off" || text === "false") return false;
  throw new ValueError(`${JSON.stringify(value)} is not on or off: write on or off`);
}

export function parseMode(value: unknown): "enforce" | "observe" {
  const text = asText(value).trim().toLowerCase();
  if (text === "enforce" || text === "observe") return text;
  throw new ValueError(`${JSON.stringify(value)} is not a mode: write enforce or observe`);
}

/** A duration, or "never" (config: also null) for an unset optional timeout. */
export function parseOptionalDuration(
  value: unknown,
  options: { allowBareSeconds: boolean; minSeconds?: number },
): number | null {
  if (value === null) return null;
  if (typeof value === "string" && ["never", "off", "none"].includes(value.trim().toLowerCase())) return null;
  return parseDurationValue(value, options);
}
