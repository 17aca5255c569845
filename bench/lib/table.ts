// Markdown tables: the benchmarks print them and docs/benchmarks.md holds them as printed.

export type Cell = string | number;

export function markdownTable(headers: readonly string[], rows: ReadonlyArray<readonly Cell[]>): string {
  const text = rows.map((row) => headers.map((_, i) => String(row[i] ?? "")));
  const widths = headers.map((header, i) => Math.max(header.length, 3, ...text.map((row) => row[i]!.length)));
  const line = (cells: readonly string[]) => `| ${cells.map((cell, i) => cell.padEnd(widths[i]!)).join(" | ")} |`;
  return [line(headers), `|${widths.map((w) => "-".repeat(w + 2)).join("|")}|`, ...text.map(line)].join("\n");
}

/** A number with a fixed count of significant figures, without exponent notation for everyday magnitudes. */
export function fmt(value: number | undefined, digits = 3): string {
  if (value === undefined || Number.isNaN(value)) return "n/a";
  if (!Number.isFinite(value)) return value > 0 ? "∞" : "-∞";
  if (value === 0) return "0";
  const magnitude = Math.floor(Math.log10(Math.abs(value)));
  const decimals = Math.max(0, digits - 1 - magnitude);
  return value.toFixed(Math.min(decimals, 6));
}

export function bytes(value: number): string {
  if (value >= 1024 * 1024 * 1024) return `${fmt(value / 1024 / 1024 / 1024)} GiB`;
  if (value >= 1024 * 1024) return `${fmt(value / 1024 / 1024)} MiB`;
  if (value >= 1024) return `${fmt(value / 1024)} KiB`;
  return `${value} B`;
}

export function ms(seconds: number | undefined): string {
  return seconds === undefined ? "n/a" : `${fmt(seconds * 1000)} ms`;
}

export function ratio(numerator: number, denominator: number): string {
  if (!(denominator > 0) || !Number.isFinite(numerator)) return "n/a";
  return `${fmt(numerator / denominator)}×`;
}
