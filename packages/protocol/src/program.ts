// The frame both programs' command lines share: dispatch to a command, the standard version and
// help answers, and how an error becomes an exit status (2 for the user's mistakes, with the
// message alone; 1 for a bug, with its stack).
import type { Io } from "./io.js";
import { escapedText } from "./safe-text.js";

/** A mistake in how the program was called: the message and a pointer to --help, exit 2. */
export class UsageError extends Error {
  override name = "UsageError";
}

/** A configuration that cannot be used, with every problem found (not only the first), exit 2. */
export class ConfigError extends Error {
  override name = "ConfigError";
  constructor(readonly problems: string[]) {
    super(
      problems.length === 1
        ? problems[0]!
        : `configuration has ${problems.length} problems:\n  - ${problems.join("\n  - ")}`,
    );
  }
}

export type Command = (rest: string[], io: Io) => Promise<number> | number;

export interface Program {
  name: string;
  version: string;
  help: string;
  commands: Record<string, Command>;
  /** Errors whose message is the whole answer for the user (bad configuration), exit 2. */
  userErrors?: ReadonlyArray<abstract new (...args: never[]) => Error>;
}

export async function runProgram(program: Program, argv: string[], io: Io): Promise<number> {
  const [command, ...rest] = argv;
  try {
    switch (command) {
      case "version":
      case "--version":
      case "-V":
        io.stdout.write(`${program.name} ${program.version}\n`);
        return 0;
      case undefined:
      case "help":
      case "--help":
      case "-h":
        io.stdout.write(program.help);
        return command === undefined ? 2 : 0;
    }
    const run = Object.hasOwn(program.commands, command) ? program.commands[command] : undefined;
    if (!run) throw new UsageError(`unknown command "${command}"`);
    return await run(rest, io);
  } catch (error) {
    return reportProgramError(program, error, io);
  }
}

/** An error's words may quote a document or an answer someone else wrote: escaped visibly, lines kept. */
const shown = (text: string) => escapedText(text, { keepLineEnds: true, maxLength: 20_000 });

export function reportProgramError(program: Pick<Program, "name" | "userErrors">, error: unknown, io: Io): number {
  if (error instanceof UsageError) {
    io.stderr.write(`${program.name}: ${shown(error.message)}\nRun '${program.name} --help' for usage.\n`);
    return 2;
  }
  if (program.userErrors?.some((kind) => error instanceof kind)) {
    io.stderr.write(`${program.name}: ${shown((error as Error).message)}\n`);
    return 2;
  }
  io.stderr.write(
    `${program.name}: ${shown(error instanceof Error ? (error.stack ?? error.message) : String(error))}\n`,
  );
  return 1;
}
