// The command-line parser both programs share (issue 40, item 9): a wrong flag is named with the
// closest known one and the command's usage line; the exit statuses are one table.
import { PassThrough } from "node:stream";
import { describe, expect, it } from "vitest";
import { firstProblem, parseCommandLine, suggestionFor } from "../src/cli-args.js";
import { writeConfigCheck } from "../src/config-check.js";
import { ConfigError, EXIT, runProgram, UsageError, withSubcommands } from "../src/program.js";
import { closestName } from "../src/suggest.js";

const SERVE = {
  config: { type: "string", short: "c" },
  standalone: { type: "boolean" },
  "stop-command": { type: "string", multiple: true },
  "start-command": { type: "string", multiple: true },
  help: { type: "boolean", short: "h" },
} as const;
const SERVE_HELP = "Usage: prog serve [options]\n\nServes.\n";

function io() {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  let out = "";
  let err = "";
  stdout.on("data", (chunk) => (out += chunk));
  stderr.on("data", (chunk) => (err += chunk));
  return { io: { stdout, stderr, env: {} }, out: () => out, err: () => err };
}

describe("firstProblem", () => {
  it.each([
    [["--stnadalone"], "unknown option --stnadalone; did you mean --standalone?"],
    [["--start-comand", "x"], "unknown option --start-comand; did you mean --start-command?"],
    [["--colour"], "unknown option --colour"],
    [["-x"], "unknown option -x"],
    [["--config"], "--config needs a value"],
    [["-c"], "-c needs a value"],
    [
      ["--config", "--standalone"],
      expect.stringMatching(/^--config needs a value, and "--standalone" looks like an option/),
    ],
    [["--standalone=yes"], "--standalone takes no value"],
    [["extra"], 'unexpected argument "extra"'],
  ])("%j: %s", (argv, problem) => {
    expect(firstProblem(argv, SERVE, false)).toEqual(problem);
  });

  it("finds nothing wrong in a good command line, values after = or in the next word", () => {
    expect(
      firstProblem(["-c", "f.yaml", "--standalone", "--stop-command=virsh", "--stop-command", "{name}"], SERVE, false),
    ).toBeUndefined();
    expect(firstProblem(["FILE"], SERVE, true)).toBeUndefined();
    expect(firstProblem(["--", "--not-a-flag"], SERVE, true)).toBeUndefined();
  });
});

describe("parseCommandLine", () => {
  it("returns the values of a good command line", () => {
    const { values } = parseCommandLine(["--start-command", "virsh", "--start-command", "start"], {
      help: SERVE_HELP,
      options: SERVE,
    });
    expect(values["start-command"]).toEqual(["virsh", "start"]);
  });

  it("throws a UsageError that carries the command's usage line", () => {
    let error: unknown;
    try {
      parseCommandLine(["--stnadalone"], { help: SERVE_HELP, options: SERVE });
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(UsageError);
    expect((error as UsageError).message).toBe("unknown option --stnadalone; did you mean --standalone?");
    expect((error as UsageError).usage).toBe("Usage: prog serve [options]");
  });
});

describe("suggestions", () => {
  it("offers the closest name when the word is a likely typo, and nothing for an unrelated word", () => {
    expect(closestName("sevre", ["serve", "token", "keygen"])).toBe("serve");
    expect(closestName("chek", ["check"])).toBe("check");
    expect(closestName("frobnicate", ["serve", "token", "keygen"])).toBeUndefined();
    expect(suggestionFor("--insecre", ["insecure", "collector"], "--")).toBe("; did you mean --insecure?");
    expect(suggestionFor("zzz", ["insecure"], "--")).toBe("");
  });
});

describe("runProgram", () => {
  const program = {
    name: "prog",
    version: "1",
    help: "prog 1\n\nUsage: prog <command> [options]\n",
    commands: {
      serve: (argv: string[]) => {
        parseCommandLine(argv, { help: SERVE_HELP, options: SERVE });
        return 0;
      },
      config: withSubcommands("Usage: prog config check FILE\n", {
        check: (argv: string[]) => {
          parseCommandLine(argv, { help: "Usage: prog config check FILE\n", options: {} });
          throw new ConfigError(["a: bad", "b: worse"]);
        },
      }),
    },
  };

  it("answers a mistyped command with the closest one, the usage line and exit 2", async () => {
    const out = io();
    expect(await runProgram(program, ["sevre"], out.io)).toBe(EXIT.usage);
    expect(out.err()).toBe(
      `prog: unknown command "sevre"; did you mean "serve"?\nUsage: prog <command> [options]\nRun 'prog --help' for usage.\n`,
    );
  });

  it("names the command whose flag was wrong and points at its own --help", async () => {
    const out = io();
    expect(await runProgram(program, ["serve", "--stnadalone"], out.io)).toBe(EXIT.usage);
    expect(out.err()).toBe(
      "prog serve: unknown option --stnadalone; did you mean --standalone?\nUsage: prog serve [options]\nRun 'prog serve --help' for usage.\n",
    );
  });

  it("names a subcommand the same way", async () => {
    const typo = io();
    expect(await runProgram(program, ["config", "chek"], typo.io)).toBe(EXIT.usage);
    expect(typo.err()).toMatch(/^prog config: unknown command "chek"; did you mean "check"\?\n/);
    const flag = io();
    expect(await runProgram(program, ["config", "check", "--jsn"], flag.io)).toBe(EXIT.usage);
    expect(flag.err()).toMatch(
      /^prog config check: unknown option --jsn\nUsage: prog config check FILE\nRun 'prog config check --help'/,
    );
  });

  it("exits 3 on a configuration error, with every problem", async () => {
    const out = io();
    expect(await runProgram(program, ["config", "check"], out.io)).toBe(EXIT.config);
    expect(out.err()).toBe("prog: configuration has 2 problems:\n  - a: bad\n  - b: worse\n");
  });

  it("keeps usage, configuration and failure apart", () => {
    expect(new Set([EXIT.ok, EXIT.failure, EXIT.usage, EXIT.config, EXIT.software]).size).toBe(5);
  });
});

describe("writeConfigCheck", () => {
  it("prints what a valid configuration resolves to, aligned, and exits 0", () => {
    const out = io();
    const found = [
      ["mode", "standalone"],
      ["reportInterval", "2s"],
    ] as const;
    expect(writeConfigCheck("prog", { ok: true, file: "c.yaml", found }, false, out.io)).toBe(0);
    expect(out.out()).toBe(
      "prog: c.yaml is valid; it resolves to:\n  mode            standalone\n  reportInterval  2s\n",
    );
  });

  it("prints every problem (JSON on stdout for scripts) and exits 3", () => {
    const text = io();
    expect(writeConfigCheck("prog", { ok: false, file: "c.yaml", problems: ["x"] }, false, text.io)).toBe(3);
    expect(text.err()).toBe("prog: c.yaml has 1 problem:\n  - x\n");
    const json = io();
    expect(writeConfigCheck("prog", { ok: false, file: "c.yaml", problems: ["x", "y"] }, true, json.io)).toBe(3);
    expect(JSON.parse(json.out())).toEqual({ ok: false, file: "c.yaml", problems: ["x", "y"] });
  });
});
