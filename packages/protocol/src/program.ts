// The frame both programs' command lines share: dispatch to a command (with "did you mean" for a
// mistyped one), the standard version and help answers, and how an error becomes an exit status
// (EXIT below: the same numbers in both programs, documented in README.md, "Exit status").
import type { Io } from "./io.js";
import { closestName } from "./suggest.js";
import { UNCAUGHT_EXCEPTION_EXIT_CODE } from "./unhandled.js";
import { escapedText } from "./safe-text.js";

/**
 * The exit statuses of ws-collector, ws-agent and ws-lease. systemd's ws-agent.service does not
 * restart on usage or config (restarting cannot fix them); 70 is EX_SOFTWARE (unhandled.ts).
 */
export const EXIT = {
  ok: 0,
  /** It ran and failed: a source failed, a collector did not answer, the agent refused a lease. */
  failure: 1,
  /** The command line is wrong: unknown command or flag, a missing or bad value. */
  usage: 2,
  /** The configuration (file, environment, key file) cannot be used; the message names every problem. */
  config: 3,
  /** A bug: an uncaught exception (the stack is printed). */
  software: UNCAUGHT_EXCEPTION_EXIT_CODE,
} as const;

/** A mistake in how the program was called: the message, the command's usage line and a pointer to --help. */
export class UsageError extends Error {
  override name = "UsageError";
  /** The command's "Usage: …" line; the command's name in its program ("serve", "config check"). */
  usage: string | undefined;
  command: string | undefined;
  constructor(message: string, where: { usage?: string; command?: string } = {}) {
    super(message);
    this.usage = where.usage;
    this.command = where.command;
  }
}

/** A configuration that cannot be used, with every problem found (not only the first), exit 3. */
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
  /** Errors whose message is the whole answer for the user (bad configuration, an unreadable key), exit 3. */
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
        return command === undefined ? EXIT.usage : EXIT.ok;
    }
    return await runNamed(program.commands, command, rest, io, program.help);
  } catch (error) {
    return reportProgramError(program, error, io);
  }
}

/** Runs the command called `name`; its usage errors name it, so they point at its own --help. */
async function runNamed(commands: Record<string, Command>, name: string, rest: string[], io: Io, help: string) {
  const run = commandNamed(commands, name, usageLine(help));
  try {
    return await run(rest, io);
  } catch (error) {
    if (error instanceof UsageError) error.command = error.command ? `${name} ${error.command}` : name;
    throw error;
  }
}

/** A command with subcommands of its own (`config check`): its help without one, "did you mean" for a wrong one. */
export function withSubcommands(help: string, commands: Record<string, Command>): Command {
  return (argv, io) => {
    const [sub = "", ...rest] = argv;
    if (sub === "" || sub === "--help" || sub === "-h") {
      io.stdout.write(help);
      return sub === "" ? EXIT.usage : EXIT.ok;
    }
    return runNamed(commands, sub, rest, io, help);
  };
}

/** The command called `name`, or a UsageError with the closest known name and the usage line. */
export function commandNamed<C>(commands: Record<string, C>, name: string, usage: string): C {
  if (Object.hasOwn(commands, name)) return commands[name] as C;
  const names = Object.keys(commands);
  const match = name.startsWith("-") ? undefined : closestName(name, names);
  const known = match ? `; did you mean "${match}"?` : `; the commands are ${names.join(", ")}`;
  throw new UsageError(`unknown ${name.startsWith("-") ? "option" : "command"} "${name}"${known}`, { usage });
}

/** The "Usage: …" line of a help text (the first line that starts so, else the first line). */
export function usageLine(help: string): string {
  const lines = help.split("\n");
  return lines.find((line) => line.startsWith("Usage:")) ?? lines[0] ?? "";
}

/** An error's words may quote a document or an answer someone else wrote: escaped visibly, lines kept. */
const shown = (text: string) => escapedText(text, { keepLineEnds: true, maxLength: 20_000 });

export function reportProgramError(program: Pick<Program, "name" | "userErrors">, error: unknown, io: Io): number {
  if (error instanceof UsageError) {
    const command = error.command ? `${program.name} ${error.command}` : program.name;
    const usage = error.usage ? `${error.usage}\n` : "";
    io.stderr.write(`${command}: ${shown(error.message)}\n${usage}Run '${command} --help' for usage.\n`);
    return EXIT.usage;
  }
  if (error instanceof ConfigError || program.userErrors?.some((kind) => error instanceof kind)) {
    io.stderr.write(`${program.name}: ${shown((error as Error).message)}\n`);
    return EXIT.config;
  }
  io.stderr.write(
    `${program.name}: ${shown(error instanceof Error ? (error.stack ?? error.message) : String(error))}\n`,
  );
  return EXIT.failure;
}
