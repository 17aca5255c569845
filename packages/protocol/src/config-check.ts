// The answer of `ws-collector config check` and `ws-agent config check`: what the configuration
// resolves to (a person reads the text, a script or CI reads --json), or every problem found.
import type { Io } from "./io.js";
import { EXIT } from "./program.js";

export type ConfigCheck =
  | { ok: true; file: string; found: ReadonlyArray<readonly [label: string, value: string]> }
  | { ok: false; file: string; problems: readonly string[] };

/** Writes the check's answer and returns the exit status: 0 valid, EXIT.config with problems. */
export function writeConfigCheck(
  program: string,
  check: ConfigCheck,
  json: boolean,
  io: Pick<Io, "stdout" | "stderr">,
): number {
  if (json) {
    const body = check.ok
      ? { ok: true, file: check.file, found: Object.fromEntries(check.found) }
      : { ok: false, file: check.file, problems: check.problems };
    io.stdout.write(`${JSON.stringify(body, null, 2)}\n`);
  } else if (check.ok) {
    const width = Math.max(...check.found.map(([label]) => label.length));
    const lines = check.found.map(([label, value]) => `  ${label.padEnd(width)}  ${value}\n`);
    io.stdout.write(`${program}: ${check.file} is valid; it resolves to:\n${lines.join("")}`);
  } else {
    const count = check.problems.length === 1 ? "1 problem" : `${check.problems.length} problems`;
    io.stderr.write(`${program}: ${check.file} has ${count}:\n${check.problems.map((p) => `  - ${p}\n`).join("")}`);
  }
  return check.ok ? EXIT.ok : EXIT.config;
}
