// Durations as people type them: "8h", "90m", "1h30m", "2d", "45s", "1w".
// Used by ws-lease, the agent config and the collector's policy annotations,
// so a value means the same thing everywhere.

const UNIT_SECONDS: Record<string, number> = { w: 604_800, d: 86_400, h: 3_600, m: 60, s: 1 };
const UNIT_ORDER = ["w", "d", "h", "m", "s"];
/** Nothing in ws is meant to last longer than a year; a larger value is a typo. */
export const MAX_DURATION_SECONDS = 366 * 86_400;

export class DurationError extends Error {
  override name = "DurationError";
}

/**
 * Parses a duration into seconds. Accepts units w, d, h, m, s in decreasing
 * order ("1h30m"), decimals on a single unit ("1.5h"), and a bare number of
 * seconds only when `allowBareSeconds` is set (config files).
 */
export function parseDuration(text: string, options: { allowBareSeconds?: boolean; allowZero?: boolean } = {}): number {
  const input = text.trim().toLowerCase();
  if (input === "") throw new DurationError("empty duration: use a number with a unit, such as 8h, 90m or 1h30m");
  if (/^\d+(\.\d+)?$/.test(input)) {
    if (!options.allowBareSeconds) {
      throw new DurationError(`"${text}" has no unit: write ${input}h, ${input}m or ${input}s`);
    }
    return checkRange(Number(input), text, options);
  }
  const part = /(\d+(?:\.\d+)?)([wdhms])/gy;
  let total = 0;
  let lastUnitIndex = -1;
  let consumed = 0;
  let parts = 0;
  let sawDecimal = false;
  for (let match = part.exec(input); match; match = part.exec(input)) {
    const [, amount, unit] = match as unknown as [string, string, string];
    const unitIndex = UNIT_ORDER.indexOf(unit);
    if (unitIndex <= lastUnitIndex) {
      throw new DurationError(`"${text}": units must go from largest to smallest, each once (like 1h30m)`);
    }
    if (parts > 0 && (amount.includes(".") || sawDecimal)) {
      throw new DurationError(`"${text}": only a single-unit duration may have decimals`);
    }
    sawDecimal = amount.includes(".");
    lastUnitIndex = unitIndex;
    total += Number(amount) * (UNIT_SECONDS[unit] ?? 0);
    consumed = part.lastIndex;
    parts++;
  }
  if (parts === 0 || consumed !== input.length) {
    throw new DurationError(
      `"${text}" is not a duration: use a number with a unit (w, d, h, m, s), such as 8h, 90m or 1h30m`,
    );
  }
  return checkRange(total, text, options);
}

function checkRange(seconds: number, text: string, options: { allowZero?: boolean }): number {
  if (!Number.isFinite(seconds)) throw new DurationError(`"${text}" is not a finite duration`);
  if (seconds === 0 && !options.allowZero) throw new DurationError(`"${text}" is zero: a duration must be positive`);
  if (seconds > MAX_DURATION_SECONDS) {
    throw new DurationError(
      `"${text}" is longer than a year (${formatDuration(MAX_DURATION_SECONDS)}); that is almost certainly a typo`,
    );
  }
  return seconds;
}

/** Formats seconds the way parseDuration reads them, to the second: 5400 → "1h30m". */
export function formatDuration(totalSeconds: number): string {
  if (!Number.isFinite(totalSeconds)) return String(totalSeconds);
  let rest = Math.max(0, Math.round(totalSeconds));
  if (rest === 0) return "0s";
  let out = "";
  for (const unit of ["d", "h", "m", "s"]) {
    const size = UNIT_SECONDS[unit] ?? 1;
    const amount = Math.floor(rest / size);
    if (amount > 0) {
      out += `${amount}${unit}`;
      rest -= amount * size;
    }
  }
  return out;
}
