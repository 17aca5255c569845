// Benchmark options: `--name value` pairs checked strictly, durations as people type them.
import { parseArgs } from "node:util";
import { parseDuration } from "@ws/protocol";

export function benchArgs<K extends string>(
  argv: string[],
  names: readonly K[],
  usage: string,
): Partial<Record<K, string>> {
  try {
    const { values } = parseArgs({
      args: argv,
      options: Object.fromEntries(names.map((name) => [name, { type: "string" as const }])),
      strict: true,
      allowPositionals: false,
    });
    return values as Partial<Record<K, string>>;
  } catch (error) {
    process.stderr.write(`${(error as Error).message}\n${usage}\n`);
    process.exit(2);
  }
}

export function seconds(text: string | undefined, fallback: number, label: string): number {
  if (text === undefined) return fallback;
  try {
    return parseDuration(text, { allowBareSeconds: true });
  } catch (error) {
    process.stderr.write(`--${label}: ${(error as Error).message}\n`);
    process.exit(2);
  }
}

export function integers(text: string | undefined, fallback: number[], label: string): number[] {
  if (text === undefined) return fallback;
  const values = text.split(",").map((part) => Number(part.trim().replace(/k$/i, "000")));
  if (values.some((value) => !Number.isInteger(value) || value <= 0)) {
    process.stderr.write(
      `--${label}: expected a comma-separated list of positive integers (1k allowed), got "${text}"\n`,
    );
    process.exit(2);
  }
  return values;
}
