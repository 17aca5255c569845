// ws-collector replay --trace FILE [--config FILE] [--json] [--tick DURATION] [--vm NS/NAME]

import { parse as parseYaml } from "yaml";
import {
  DurationError,
  errorMessage,
  parseDuration,
  UsageError,
  parseCommandLine,
  usageLine,
  EXIT,
  terminalText,
} from "@ws/protocol";
import {
  defaultCollectorPolicyConfig,
  parseCollectorPolicyDocument,
  type CollectorPolicyConfig,
} from "../../engine/config.js";
import { formatTimelineJson, formatTimelineText } from "./format.js";
import { replayTrace, traceOriginMs } from "./replay.js";
import { parseTrace, TraceError } from "../../loop/trace.js";

export interface ReplayIo {
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream;
  readFile(path: string): Promise<string>;
}

export const REPLAY_HELP = `Usage: ws-collector replay --trace FILE [--config FILE] [--json] [--tick DURATION] [--vm NS/NAME]

Runs the decision engine over a recorded trace (JSON lines: reports, agent connects and
disconnects, policy annotations; see docs/replay.md) with a virtual clock, and prints every
transition and action with its explanation. Stops are taken as accepted at once. Nothing is
contacted and nothing is stopped: this is how policies are tuned and decisions checked.

Options:
  --trace FILE      The trace (ws-collector serve --record-trace FILE writes one)
  --config FILE     Collector config whose policy section (defaults, profiles, annotationPrefix)
                    applies; a file holding only that section works too
  --json            One JSON object per line (entry, explanation, actions) instead of text
  --tick DURATION   Timer resolution between events (default 15s; 0s: only at the times a
                    decision said it could change)
  --vm NS/NAME      Print only this VM (the others are still replayed)
  -h, --help        This help

Exit status: 0 done, 1 unreadable or invalid trace, 2 bad usage, 3 unreadable or invalid config.
`;

/** What every usage error ends with: the usage line and where the options are. */
const REPLAY_USAGE = `${usageLine(REPLAY_HELP)}\nRun 'ws-collector replay --help' for usage.`;

export async function replayCommand(argv: string[], io: ReplayIo): Promise<number> {
  const args = argv[0] === "replay" ? argv.slice(1) : argv;
  let values: { trace?: string; config?: string; json?: boolean; tick?: string; vm?: string; help?: boolean };
  try {
    ({ values } = parseCommandLine(args, {
      help: REPLAY_HELP,
      options: {
        trace: { type: "string" },
        config: { type: "string" },
        json: { type: "boolean" },
        tick: { type: "string" },
        vm: { type: "string" },
        help: { type: "boolean", short: "h" },
      },
    }));
    if (values.help) {
      io.stdout.write(REPLAY_HELP);
      return 0;
    }
    if (!values.trace) throw new UsageError("replay needs --trace FILE");
  } catch (error) {
    io.stderr.write(`ws-collector replay: ${errorMessage(error)}\n${REPLAY_USAGE}\n`);
    return 2;
  }

  let tickSeconds = 15;
  if (values.tick !== undefined) {
    try {
      tickSeconds = parseDuration(values.tick, { allowZero: true });
    } catch (error) {
      if (!(error instanceof DurationError)) throw error;
      io.stderr.write(`ws-collector replay: --tick ${error.message}\n${REPLAY_USAGE}\n`);
      return 2;
    }
  }

  let policyConfig: CollectorPolicyConfig = defaultCollectorPolicyConfig();
  if (values.config) {
    // The config is configuration (exit 3, as for serve); the trace is the data replayed (exit 1).
    const text = await readOrReport(io, values.config, "config");
    if (text === undefined) return EXIT.config;
    const loaded = policyConfigFromFile(text);
    if (!loaded.ok) {
      io.stderr.write(`ws-collector replay: ${values.config}:\n  ${loaded.errors.join("\n  ")}\n`);
      return EXIT.config;
    }
    policyConfig = loaded.config;
  }

  const traceText = await readOrReport(io, values.trace, "trace");
  if (traceText === undefined) return 1;
  let events;
  try {
    events = parseTrace(traceText);
  } catch (error) {
    if (!(error instanceof TraceError)) throw error;
    // The error may quote the trace: a line of it is what a VM's user had a hand in.
    io.stderr.write(`ws-collector replay: ${values.trace}: ${terminalText(error.message, 1000)}\n`);
    return 1;
  }

  const timeline = replayTrace(events, {
    defaults: policyConfig.defaults,
    profiles: policyConfig.profiles,
    prefix: policyConfig.annotationPrefix,
    tickSeconds,
  });
  const shown = values.vm ? timeline.filter((entry) => entry.vm === values.vm) : timeline;
  if (values.vm && shown.length === 0)
    io.stderr.write(`ws-collector replay: no events for VM ${values.vm} in the trace\n`);
  io.stdout.write(
    values.json ? formatTimelineJson(shown) : formatTimelineText(shown, { wallTime: traceOriginMs(events) !== 0 }),
  );
  return 0;
}

async function readOrReport(io: ReplayIo, path: string, what: string): Promise<string | undefined> {
  try {
    return await io.readFile(path);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    io.stderr.write(`ws-collector replay: cannot read ${what} ${path}: ${code ?? errorMessage(error)}\n`);
    return undefined;
  }
}

/** A whole collector config (its `policy:` section is used) or a file holding only that section. */
export function policyConfigFromFile(text: string): ReturnType<typeof parseCollectorPolicyDocument> {
  let document: unknown;
  try {
    document = parseYaml(text, { uniqueKeys: true });
  } catch (error) {
    return { ok: false, errors: [`not valid YAML: ${errorMessage(error).split("\n")[0]}`] };
  }
  if (typeof document === "object" && document !== null && !Array.isArray(document)) {
    const object = document as Record<string, unknown>;
    if ("policy" in object) {
      const result = parseCollectorPolicyDocument(object.policy);
      return result.ok ? result : { ok: false, errors: result.errors.map((error) => `policy.${error}`) };
    }
    const isSection = ["defaults", "profiles", "annotationPrefix"].some((key) => key in object);
    if (!isSection) return { ok: true, config: defaultCollectorPolicyConfig() };
  }
  return parseCollectorPolicyDocument(document);
}
