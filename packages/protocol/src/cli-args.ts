// The one command-line parser of both programs (ws-collector, ws-agent, ws-lease): node's
// util.parseArgs underneath (no dependency, so the agent's bundle stays small), with the answers
// a person needs when a flag is wrong: which flag, "did you mean" the closest known one, and the
// command's usage line (reportProgramError prints it with the UsageError).
import { parseArgs, type ParseArgsConfig } from "node:util";
import { closestName } from "./suggest.js";
import { UsageError, usageLine } from "./program.js";

export type CommandOptions = NonNullable<ParseArgsConfig["options"]>;

export interface CommandSpec<O extends CommandOptions> {
  /** The command's help text; its "Usage: …" line is printed with every usage error. */
  help: string;
  options: O;
  /** Words the command takes after its flags (FILE, DURATION, …); false: none. */
  allowPositionals?: boolean;
}

/** The command line's flags and words, or a UsageError that names the wrong one and what was meant. */
export function parseCommandLine<O extends CommandOptions>(argv: string[], spec: CommandSpec<O>) {
  const usage = usageLine(spec.help);
  const problem = firstProblem(argv, spec.options, spec.allowPositionals ?? false);
  if (problem) throw new UsageError(problem, { usage });
  try {
    return parseArgs({
      args: argv,
      options: spec.options,
      strict: true,
      allowPositionals: spec.allowPositionals ?? false,
    });
  } catch (error) {
    // firstProblem found nothing that parseArgs refuses; should they ever disagree, its message
    // still goes to the person, without the advice about '--' that only confuses.
    const message = error instanceof Error ? error.message : String(error);
    throw new UsageError(message.replace(/\. To specify a positional argument.*$/s, ""), { usage });
  }
}

/** The first flag or word the options do not take, described for a person; undefined: none. */
export function firstProblem(argv: string[], options: CommandOptions, allowPositionals: boolean): string | undefined {
  // Non-strict parsing never throws: it lists every token, known or not, for the checks below.
  const { tokens } = parseArgs({ args: argv, options, strict: false, allowPositionals: true, tokens: true });
  const longNames = Object.keys(options);
  for (const token of tokens) {
    if (token.kind === "positional") {
      if (!allowPositionals) return `unexpected argument "${token.value}"`;
      continue;
    }
    if (token.kind !== "option") continue;
    const known = Object.hasOwn(options, token.name) ? options[token.name] : undefined;
    if (!known)
      return `unknown option ${token.rawName}${token.rawName.startsWith("--") ? suggestionFor(token.name, longNames, "--") : ""}`;
    if (known.type === "string" && token.value === undefined) return `${token.rawName} needs a value`;
    if (known.type === "string" && !token.inlineValue && token.value?.startsWith("-"))
      return `${token.rawName} needs a value, and "${token.value}" looks like an option (write ${token.rawName}=${token.value} if it is the value)`;
    if (known.type === "boolean" && token.inlineValue) return `${token.rawName} takes no value`;
  }
  return undefined;
}

/** "; did you mean --config?" when a known name is a likely typo of `word`; "" otherwise. */
export function suggestionFor(word: string, known: readonly string[], prefix = ""): string {
  const match = closestName(word.replace(/^-+/, ""), known);
  return match ? `; did you mean ${prefix}${match}?` : "";
}
