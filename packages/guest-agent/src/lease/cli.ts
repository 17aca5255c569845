// ws-lease: keep this VM running for a while, see why it would stop, cancel.
// Same program as ws-agent, dispatched on its name (ws-agent lease … too).
import { spawn } from "node:child_process";
import { constants as osConstants } from "node:os";
import {
  DurationError,
  errorMessage,
  parseCommandLine,
  parseDuration,
  parseSchedule,
  parseSkipDate,
  UsageError,
  validTimeZone,
  escapedJson,
  terminalText,
} from "@ws/protocol";
import { systemClock, type Clock } from "../clock.js";
import {
  AgentProtocolError,
  AgentUnavailableError,
  callAgent,
  DEFAULT_SOCKET_PATH,
  type OutgoingRequest,
} from "./client.js";
import { formatCancelled, formatLeaseList, formatOverCap, formatStatus, formatTaken, type Moment } from "./format.js";
import { DEFAULT_MAX_KEEP_RUNNING_SECONDS, isLeaseId, MAX_REASON_LENGTH, MIN_LEASE_SECONDS } from "./leases.js";
import type { Answer, ErrorAnswer } from "./wire.js";
import { AGENT_VERSION } from "../version.js";

export interface LeaseIo {
  stdout: { write(text: string): unknown };
  stderr: { write(text: string): unknown };
  env: Record<string, string | undefined>;
}

/** How long `ws-lease 8h` waits for the collector to confirm (or clamp) the new lease. */
const CONFIRM_WAIT_SECONDS = 3;

export const LEASE_HELP = `NAME
    ws-lease - keep this VM running for a while, and see when it would stop

SYNOPSIS
    ws-lease DURATION [--reason TEXT] [--json]
    ws-lease run DURATION [--reason TEXT] -- COMMAND [ARG...]
    ws-lease status [--json]
    ws-lease list [--json]
    ws-lease cancel [ID | --all] [--json]
    ws-lease schedule DAYS HH:MM [--tz ZONE] [--stop-by HH:MM] [--json]
    ws-lease schedule status|clear|skip tomorrow|YYYY-MM-DD [--json]
    ws-lease COMMAND --help

DESCRIPTION
    This VM is stopped automatically when nobody has used it for a while, to
    free its CPU, memory and GPU. Your files are kept: the disk persists, and
    the VM can be started again. "Used" means terminal input, a busy notebook
    kernel, GPU work, busy user processes and the like.

    Some work does not look like use: a long training run that writes nothing
    to a terminal, a download, a job you left running overnight. A lease tells
    ws to keep the VM running anyway, for as long as you ask, up to the
    maximum this VM's policy allows (max-keep-running, 24h unless your
    administrator set another). When the lease runs out, the usual rule
    applies again: the VM stops after it has been idle long enough, and you
    are warned before it does.

    Any user of this VM may take a lease. Each lease records who took it
    (as the operating system reports it), for how long and why. Only its
    owner or root may cancel it.

COMMANDS
    DURATION [--reason TEXT]
        Take a lease: keep the VM running for DURATION from now. DURATION is a
        number with a unit: 45m, 8h, 1h30m, 2d (units w, d, h, m, s, largest
        first). A duration longer than the cap is refused, with the cap named.
        --reason says why, for the other users and the audit log (at most
        ${MAX_REASON_LENGTH} characters).

    run DURATION [--reason TEXT] -- COMMAND [ARG...]
        Hold the VM while COMMAND runs, like systemd-inhibit: a lease is
        taken, COMMAND runs with your terminal, and the lease is cancelled
        when COMMAND ends; ws-lease exits with COMMAND's status (128+N when
        it was killed by signal N). DURATION bounds the hold: if COMMAND runs
        longer, it keeps running but no longer holds the VM. SIGINT, SIGTERM
        and SIGHUP are passed to COMMAND, and the lease is released when it
        ends; if ws-lease itself is killed with SIGKILL the lease simply runs
        out after DURATION.

    status
        What a person wants to know: whether the VM is seen as idle and by
        which signals it is seen in use, when it would stop and why, the
        leases (who, until when, why), whether the collector is connected,
        and any pending stop with how to keep the VM running.
        (ws-lease with no arguments does the same.)

    list
        The leases on this VM, one per line.

    cancel [ID | --all]
        Cancel a lease. Without ID, cancels your lease if you hold exactly
        one. --all cancels all of yours (root: everyone's).

    schedule DAYS HH:MM [--tz ZONE] [--stop-by HH:MM]
        Start this VM by itself at a time, so it is ready when you come:
        ws-lease schedule weekdays 08:45 --tz Europe/Berlin. DAYS: weekdays,
        weekends, daily, mon..sun, lists (mon,wed) and ranges (mon-thu).
        Without --tz, the VM's time zone (its administrator's setting, else
        UTC). --stop-by is kept and shown, not yet enforced. The schedule is
        kept by the cluster, outside the VM; a typo is refused with a "did
        you mean" and changes nothing. schedule status shows it and the next
        start; schedule skip tomorrow (or a date) skips one start;
        schedule clear removes it.

OPTIONS
    --json      Print the agent's answer as JSON, for scripts. States are
                spelled as the collector's API spells them (Active,
                StoppingPending, Stopping, Stopped, AgentLost, Unknown).
    --reason TEXT
                Why you need the VM (with DURATION).
    -h, --help  A short summary, or a command's own help.
    --man       This manual (also: man ws-lease).
    --version   The version.

CONFIRMATION AND CLAMPING
    The lease is recorded on this VM at once, and survives an agent restart.
    The cluster's collector confirms it with its next report (seconds). If
    the collector's policy allows less than you asked, it clamps the lease
    to its max-keep-running and ws-lease says so: take a new lease when it
    runs out. If the collector is unreachable, the lease is kept here, shown
    as "not yet confirmed", and confirmed when it reconnects.

EXAMPLES
    ws-lease 8h --reason "training resnet"
        Keep the VM for 8 hours.
    ws-lease 1h30m
        Keep it for an hour and a half.
    ws-lease run 6h -- python train.py
        Keep it while the training runs (at most 6 hours), then let it stop.
    ws-lease status
        See whether and when the VM would stop, and why.
    ws-lease list --json
        All leases, as JSON.
    ws-lease cancel 3f9a0c21
        Cancel one lease; the ID is in ws-lease list.
    ws-lease cancel --all
        Cancel all of your leases.

EXIT STATUS
    0 success; 1 refused by the agent (over the cap, not yours, not found) or
    the agent is not running; 2 usage error.

ENVIRONMENT
    WS_AGENT_SOCKET
        The agent's socket (default ${DEFAULT_SOCKET_PATH}).

FILES
    ${DEFAULT_SOCKET_PATH}       the agent's lease socket
    /run/ws-agent/notice.json      the pending stop notice, while there is one
    /var/lib/ws-agent/leases.json  the leases (root only)
    /var/lib/ws-agent/lease-audit.log
                                   who took or cancelled which lease, when, why

SEE ALSO
    systemctl status ws-agent, journalctl -u ws-agent
`;

/** What --help prints: the commands on one screen; the manual is --man (and man ws-lease). */
export const LEASE_SHORT_HELP = `ws-lease - keep this VM running for a while, and see when it would stop

Usage: ws-lease DURATION [--reason TEXT]     keep the VM running for DURATION (8h, 90m, 1h30m)
       ws-lease run DURATION -- COMMAND...   hold it while COMMAND runs (at most DURATION)
       ws-lease status                       whether and when it would stop, and why
       ws-lease list                         the leases on this VM
       ws-lease cancel [ID | --all]          cancel your lease(s)
       ws-lease schedule weekdays 08:45      start the VM by itself (status, skip tomorrow, clear)

Options: --json (for scripts), --reason TEXT, -h/--help, --man, --version
Each command has its own --help; the manual is: man ws-lease (or ws-lease --man).
`;

const RUN_HELP = `Usage: ws-lease run DURATION [--reason TEXT] -- COMMAND [ARG...]

Holds this VM while COMMAND runs, then releases it, like systemd-inhibit.
ws-lease exits with COMMAND's exit status (128+N if a signal N killed it).

  DURATION       the longest the VM is held (8h, 90m; at most max-keep-running)
  --reason TEXT  why (default: the command line)

SIGINT, SIGTERM and SIGHUP go to COMMAND; the lease is released when it ends.
If COMMAND outlives DURATION it keeps running, but no longer holds the VM.

Example:
  ws-lease run 6h -- python train.py --epochs 40
`;

const STATUS_HELP = `Usage: ws-lease status [--json]

Shows what ws knows about this VM: whether it is seen as in use (and by which
signals) or idle for how long, when it would stop and why, the leases (who,
until when, why, confirmed or clamped by the collector), whether the
collector is connected, and any pending stop with how to keep the VM running.

  --json   the same as JSON

Example:
  ws-lease status
`;

const LIST_HELP = `Usage: ws-lease list [--json]

Lists the leases on this VM: ID, owner, until when, time left, whether the
collector confirmed or clamped it, and the reason.

  --json   the same as JSON: {"leases": [{"id", "uid", "user", "reason",
           "requestedSeconds", "holdSeconds", "remainingSeconds",
           "expiresAt", "confirmed", "clamped", ...}]}

Example:
  ws-lease list
`;

const CANCEL_HELP = `Usage: ws-lease cancel [ID | --all] [--json]

Cancels a lease, so the VM may stop again once it is idle.

  ID       the lease to cancel (see ws-lease list)
  (none)   your lease, if you hold exactly one
  --all    all of your leases; for root, every lease
  --json   print the cancelled leases as JSON

Only the user who took a lease, or root, may cancel it.

Examples:
  ws-lease cancel 3f9a0c21
  ws-lease cancel --all
`;

const SCHEDULE_HELP = `Usage: ws-lease schedule DAYS HH:MM [--tz ZONE] [--stop-by HH:MM] [--json]
       ws-lease schedule status [--json]
       ws-lease schedule skip tomorrow|YYYY-MM-DD [--json]
       ws-lease schedule clear [--json]

Starts this VM by itself at a time, in a time zone, so it is ready when you
come back. The schedule is kept by the cluster (outside the VM) and shown on
the VM's page.

  DAYS           weekdays, weekends, daily, mon..sun, mon,wed,fri, mon-thu
  HH:MM          24-hour, in the time zone
  --tz ZONE      an IANA time zone (Europe/Berlin, America/New_York); default:
                 the VM's time zone, else UTC
  --stop-by HH:MM
                 at that time a running VM gets a notice and the grace like
                 any stop; activity or a lease keeps it running
  status         the schedule and its next start
  skip DATE      no start on that day (tomorrow, today or YYYY-MM-DD)
  clear          no schedule
  --json         the answer as JSON

Examples:
  ws-lease schedule weekdays 08:45 --tz Europe/Berlin
  ws-lease schedule skip tomorrow
  ws-lease schedule status
`;

const TAKE_HELP = `Usage: ws-lease DURATION [--reason TEXT] [--json]

Keeps this VM running for DURATION from now, even if it looks idle.

  DURATION       8h, 90m, 1h30m, 2d ... (at most the VM's max-keep-running)
  --reason TEXT  why, for other users and the audit log
  --json         print the new lease as JSON

Examples:
  ws-lease 8h --reason "training run"
  ws-lease 45m
`;

export async function leaseCommand(argv: string[], io: LeaseIo, clock: Clock = systemClock): Promise<number> {
  const socketPath = io.env.WS_AGENT_SOCKET || DEFAULT_SOCKET_PATH;
  const moment: Moment = { nowMs: clock.nowMs() };
  try {
    const [first, ...rest] = argv;
    switch (first) {
      case "help":
        io.stdout.write(rest[0] ? (helpFor(rest[0]) ?? LEASE_SHORT_HELP) : LEASE_SHORT_HELP);
        return 0;
      case "--man":
        io.stdout.write(LEASE_HELP);
        return 0;
      case "--version":
      case "-V":
      case "version":
        io.stdout.write(`ws-lease ${AGENT_VERSION}\n`);
        return 0;
      case "run":
        return await runCommand(rest, io, socketPath);
      case "status":
        return await statusCommand(rest, io, socketPath, moment);
      case "list":
      case "ls":
        return await listCommand(rest, io, socketPath, moment);
      case "cancel":
        return await cancelCommand(rest, io, socketPath);
      case "take":
        return await takeCommand(rest, io, socketPath, moment, true);
      case "schedule":
        return await scheduleCommand(rest, io, socketPath, moment);
      default:
        return await takeCommand(argv, io, socketPath, moment, false);
    }
  } catch (error) {
    if (error instanceof UsageError || error instanceof DurationError) {
      const usage = error instanceof UsageError && error.usage ? `${error.usage}\n` : "";
      io.stderr.write(`ws-lease: ${error.message}\n${usage}Run 'ws-lease --help' for usage.\n`);
      return 2;
    }
    if (error instanceof AgentUnavailableError) {
      io.stderr.write(agentUnavailableText(error));
      return 1;
    }
    if (error instanceof AgentProtocolError) {
      io.stderr.write(`ws-lease: ${error.message}.\nCheck the agent with: systemctl status ws-agent\n`);
      return 1;
    }
    io.stderr.write(`ws-lease: ${errorMessage(error)}\n`);
    return 1;
  }
}

function helpFor(command: string): string | undefined {
  return {
    status: STATUS_HELP,
    list: LIST_HELP,
    cancel: CANCEL_HELP,
    take: TAKE_HELP,
    run: RUN_HELP,
    schedule: SCHEDULE_HELP,
  }[command];
}

export function agentUnavailableText(error: AgentUnavailableError): string {
  if (error.code === "EACCES") {
    return `ws-lease: permission denied on the agent's socket ${error.socketPath}.\nThe socket should be open to every user; check the agent with: systemctl status ws-agent\n`;
  }
  return (
    `ws-lease: the ws agent is not running on this VM (nothing answers on ${error.socketPath}).\n` +
    `Without it, leases cannot be taken and the VM's activity is not reported.\n` +
    `Check it with:  systemctl status ws-agent\n` +
    `Its log:        journalctl -u ws-agent\n`
  );
}

function parse(
  argv: string[],
  options: Record<string, { type: "boolean" | "string" }>,
  help: string,
): { values: Record<string, string | boolean | undefined>; positionals: string[] } {
  const { values, positionals } = parseCommandLine(argv, {
    help,
    options: { ...options, json: { type: "boolean" }, help: { type: "boolean", short: "h" } },
    allowPositionals: true,
  });
  return { values: values as Record<string, string | boolean | undefined>, positionals };
}

/** Prints a refusal; over-cap refusals name the cap. */
function refused(answer: ErrorAnswer, io: LeaseIo, requestedSeconds?: number): number {
  const { error } = answer;
  if (error.code === "over_cap" && requestedSeconds !== undefined) {
    io.stderr.write(
      formatOverCap(
        requestedSeconds,
        error.capSeconds ?? DEFAULT_MAX_KEEP_RUNNING_SECONDS,
        error.capSource ?? "default",
      ),
    );
  } else {
    // The agent's message may quote what another user typed.
    io.stderr.write(`ws-lease: ${terminalText(error.message, 1000)}\n`);
  }
  return 1;
}

function printJson(io: LeaseIo, value: unknown): void {
  io.stdout.write(`${escapedJson(value, 2)}\n`);
}

async function request(socketPath: string, outgoing: OutgoingRequest): Promise<Answer> {
  return callAgent(socketPath, outgoing);
}

async function takeCommand(
  argv: string[],
  io: LeaseIo,
  socketPath: string,
  moment: Moment,
  explicit: boolean,
): Promise<number> {
  const { values, positionals } = parse(argv, { reason: { type: "string" } }, TAKE_HELP);
  if (values.help) {
    io.stdout.write(explicit || positionals.length > 0 || values.reason !== undefined ? TAKE_HELP : LEASE_SHORT_HELP);
    return 0;
  }
  if (explicit && positionals.length === 0) throw new UsageError("take needs a duration: ws-lease take 8h");
  if (positionals.length === 0) {
    if (values.reason !== undefined) throw new UsageError("--reason needs a duration: ws-lease 8h --reason TEXT");
    return statusCommand(values.json ? ["--json"] : [], io, socketPath, moment);
  }
  if (positionals.length > 1) {
    throw new UsageError(
      `one duration please, got ${positionals.map((p) => JSON.stringify(p)).join(" ")} (quote a reason with spaces: --reason "two words")`,
    );
  }
  const text = positionals[0]!;
  if (!/^\d/.test(text))
    throw new UsageError(
      `unknown command "${text}": expected a duration (8h, 90m, 1h30m), status, list, cancel or schedule`,
    );
  const seconds = parseDuration(text);
  if (seconds < MIN_LEASE_SECONDS)
    throw new UsageError(
      `"${text}" is shorter than ${MIN_LEASE_SECONDS}s: a lease that short keeps nothing running (try 30m or 2h)`,
    );
  const reason = typeof values.reason === "string" ? values.reason : "";
  if (reason.length > MAX_REASON_LENGTH)
    throw new UsageError(`--reason is ${reason.length} characters long; keep it under ${MAX_REASON_LENGTH}`);
  const answer = await request(socketPath, { op: "take", seconds, reason, wait: CONFIRM_WAIT_SECONDS });
  if (!answer.ok) return refused(answer, io, seconds);
  if (answer.op !== "take") throw new AgentProtocolError("the agent answered another question");
  if (values.json)
    printJson(io, {
      lease: answer.lease,
      capSeconds: answer.capSeconds,
      capSource: answer.capSource,
      collectorConnected: answer.collectorConnected,
    });
  else io.stdout.write(formatTaken(answer.lease, answer.collectorConnected, moment));
  return 0;
}

/**
 * `ws-lease schedule …`: checked here with the collector's own parser (a typo never leaves the
 * VM), then carried by the agent to the collector, which keeps it and answers.
 */
async function scheduleCommand(argv: string[], io: LeaseIo, socketPath: string, moment: Moment): Promise<number> {
  const { values, positionals } = parse(argv, { tz: { type: "string" }, "stop-by": { type: "string" } }, SCHEDULE_HELP);
  if (values.help) {
    io.stdout.write(SCHEDULE_HELP);
    return 0;
  }
  const [first, ...more] = positionals;
  const tz = typeof values.tz === "string" ? values.tz : undefined;
  const stopBy = typeof values["stop-by"] === "string" ? values["stop-by"] : undefined;
  let outgoing: OutgoingRequest;
  if (first === undefined || first === "status" || first === "clear") {
    if (more.length > 0) throw new UsageError(`schedule ${first} takes no arguments, got "${more[0]}"`);
    if (tz !== undefined || stopBy !== undefined)
      throw new UsageError(
        "--tz and --stop-by go with a schedule: ws-lease schedule weekdays 08:45 --tz Europe/Berlin",
      );
    outgoing = { op: "schedule", action: first === "clear" ? "clear" : "status" };
  } else if (first === "skip") {
    if (more.length !== 1) throw new UsageError("schedule skip needs one date: tomorrow or YYYY-MM-DD");
    const date = parseSkipDate(more[0]!, moment.nowMs, "UTC");
    if ("error" in date) throw new UsageError(date.error);
    outgoing = { op: "schedule", action: "skip", date: more[0]! };
  } else {
    if (tz !== undefined && !validTimeZone(tz)) {
      const checked = parseSchedule(`daily 00:00 tz ${tz}`);
      throw new UsageError(checked.ok ? `"${tz}" is not a time zone` : checked.error);
    }
    const line = [...positionals, ...(stopBy !== undefined ? ["stop-by", stopBy] : [])].join(" ");
    // The zone here only lets the line be checked; the collector applies the VM's default.
    const checked = parseSchedule(tz ? `${line} tz ${tz}` : line, "UTC");
    if (!checked.ok) throw new UsageError(checked.error);
    outgoing = { op: "schedule", action: "set", line, ...(tz ? { tz } : {}) };
  }
  const answer = await request(socketPath, outgoing);
  if (!answer.ok) return refused(answer, io);
  if (answer.op !== "schedule") throw new AgentProtocolError("the agent answered another question");
  if (values.json) printJson(io, { message: answer.message, schedule: answer.schedule });
  else io.stdout.write(formatSchedule(answer.message, answer.schedule));
  return 0;
}

/** The collector's answer in a few lines a person reads. */
export function formatSchedule(message: string, schedule: Record<string, unknown> | null): string {
  const lines = message ? [`${terminalText(message, 500)}.`] : [];
  const text = (key: string) =>
    typeof schedule?.[key] === "string" ? terminalText(schedule[key] as string, 500) : undefined;
  if (!schedule) lines.push("No start schedule: the VM starts when someone starts it.");
  else if (schedule.valid !== true)
    lines.push(`The schedule "${text("line")}" is invalid and not applied: ${text("error")}`);
  else {
    lines.push(`Schedule: ${text("description")}.`);
    if (text("nextStart")) lines.push(`Next start: ${text("nextStart")}.`);
    if (text("nextStopBy"))
      lines.push(`Stop by: ${text("nextStopBy")} (notice and grace; activity or a lease keeps it running).`);
  }
  return `${lines.join("\n")}\n`;
}

async function statusCommand(argv: string[], io: LeaseIo, socketPath: string, moment: Moment): Promise<number> {
  const { values, positionals } = parse(argv, {}, STATUS_HELP);
  if (values.help) {
    io.stdout.write(STATUS_HELP);
    return 0;
  }
  if (positionals.length > 0) throw new UsageError(`status takes no arguments, got "${positionals[0]}"`);
  const answer = await request(socketPath, { op: "status" });
  if (!answer.ok) return refused(answer, io);
  if (answer.op !== "status") throw new AgentProtocolError("the agent answered another question");
  if (values.json) printJson(io, answer.status);
  else io.stdout.write(formatStatus(answer.status, moment));
  return 0;
}

async function listCommand(argv: string[], io: LeaseIo, socketPath: string, moment: Moment): Promise<number> {
  const { values, positionals } = parse(argv, {}, LIST_HELP);
  if (values.help) {
    io.stdout.write(LIST_HELP);
    return 0;
  }
  if (positionals.length > 0) throw new UsageError(`list takes no arguments, got "${positionals[0]}"`);
  const answer = await request(socketPath, { op: "list" });
  if (!answer.ok) return refused(answer, io);
  if (answer.op !== "list") throw new AgentProtocolError("the agent answered another question");
  if (values.json) printJson(io, { leases: answer.leases });
  else io.stdout.write(formatLeaseList(answer.leases, moment));
  return 0;
}

async function cancelCommand(argv: string[], io: LeaseIo, socketPath: string): Promise<number> {
  const { values, positionals } = parse(argv, { all: { type: "boolean" } }, CANCEL_HELP);
  if (values.help) {
    io.stdout.write(CANCEL_HELP);
    return 0;
  }
  if (positionals.length > 1) throw new UsageError("cancel takes one lease ID (or --all)");
  if (values.all && positionals.length > 0) throw new UsageError("give either a lease ID or --all, not both");
  let outgoing: OutgoingRequest;
  if (values.all) {
    outgoing = { op: "cancel", all: true };
  } else if (positionals[0] !== undefined) {
    const id = positionals[0].toLowerCase();
    if (!isLeaseId(id))
      throw new UsageError(`"${positionals[0]}" is not a lease ID (8 hex digits, as ws-lease list shows them)`);
    outgoing = { op: "cancel", id };
  } else {
    const mine = await yourLeaseIds(socketPath);
    if (mine.length === 0) {
      io.stderr.write("ws-lease: you hold no lease to cancel (see ws-lease list).\n");
      return 1;
    }
    if (mine.length > 1) {
      io.stderr.write(`ws-lease: you hold ${mine.length} leases (${mine.join(", ")}): say which, or use --all.\n`);
      return 2;
    }
    outgoing = { op: "cancel", id: mine[0]! };
  }
  const answer = await request(socketPath, outgoing);
  if (!answer.ok) return refused(answer, io);
  if (answer.op !== "cancel") throw new AgentProtocolError("the agent answered another question");
  if (values.json) printJson(io, { cancelled: answer.cancelled });
  else io.stdout.write(formatCancelled(answer.cancelled));
  return 0;
}

/**
 * The caller's own leases, for `cancel` without an ID. Which uid is "you" is
 * only a convenience here: the agent checks ownership again on cancel.
 */
async function yourLeaseIds(socketPath: string): Promise<string[]> {
  const answer = await request(socketPath, { op: "list" });
  if (!answer.ok || answer.op !== "list") return [];
  const uid = process.getuid?.() ?? -1;
  return answer.leases.filter((lease) => lease.uid === uid).map((lease) => lease.id);
}

/** The exit status a shell reports for a process killed by `signal`. */
function signalStatus(signal: NodeJS.Signals): number {
  return 128 + (osConstants.signals[signal] ?? 0);
}

const FORWARDED_SIGNALS: NodeJS.Signals[] = ["SIGINT", "SIGTERM", "SIGHUP"];

/**
 * `ws-lease run DURATION -- COMMAND...`: take a lease, run COMMAND, cancel the
 * lease when it ends, exit with its status. The lease is bounded by DURATION,
 * so a ws-lease killed without a chance to clean up holds the VM no longer.
 */
async function runCommand(argv: string[], io: LeaseIo, socketPath: string): Promise<number> {
  const split = argv.indexOf("--");
  const own = split >= 0 ? argv.slice(0, split) : argv;
  const command = split >= 0 ? argv.slice(split + 1) : [];
  const { values, positionals } = parse(own, { reason: { type: "string" } }, RUN_HELP);
  if (values.help) {
    io.stdout.write(RUN_HELP);
    return 0;
  }
  if (positionals.length !== 1)
    throw new UsageError("run needs one duration, then -- and the command: ws-lease run 2h -- make test");
  if (command.length === 0) throw new UsageError("run needs a command after --: ws-lease run 2h -- make test");
  const seconds = parseDuration(positionals[0]!);
  const reason =
    typeof values.reason === "string"
      ? values.reason
      : `while running: ${command.join(" ")}`.slice(0, MAX_REASON_LENGTH);
  if (reason.length > MAX_REASON_LENGTH)
    throw new UsageError(`--reason is ${reason.length} characters long; keep it under ${MAX_REASON_LENGTH}`);
  // Signals are caught from the start: one that arrives while the lease is being taken still
  // releases it (and reaches the command, once there is one).
  let child: ReturnType<typeof spawn> | undefined;
  let caught: NodeJS.Signals | undefined;
  const handlers = FORWARDED_SIGNALS.map((signal) => {
    const handler = () => {
      caught ??= signal;
      child?.kill(signal);
    };
    process.on(signal, handler);
    return [signal, handler] as const;
  });
  try {
    const answer = await request(socketPath, { op: "take", seconds, reason, wait: 0 });
    if (!answer.ok) return refused(answer, io, seconds);
    if (answer.op !== "take") throw new AgentProtocolError("the agent answered another question");
    const leaseId = answer.lease.id;

    const release = async (): Promise<void> => {
      try {
        const cancelled = await callAgent(socketPath, { op: "cancel", id: leaseId }, 10_000);
        if (!cancelled.ok && cancelled.error.code !== "not_found")
          io.stderr.write(
            `ws-lease: could not release lease ${leaseId}: ${terminalText(cancelled.error.message, 1000)}\n`,
          );
      } catch (error) {
        io.stderr.write(
          `ws-lease: could not release lease ${leaseId} (${errorMessage(error)}); it ends by itself after ${positionals[0]}\n`,
        );
      }
    };
    if (caught) {
      await release();
      return signalStatus(caught);
    }
    const status = await new Promise<number>((resolve) => {
      child = spawn(command[0]!, command.slice(1), { stdio: "inherit" });
      child.once("error", (error: NodeJS.ErrnoException) => {
        io.stderr.write(
          `ws-lease: cannot run ${JSON.stringify(command[0])}: ${error.code === "ENOENT" ? "command not found" : error.message}\n`,
        );
        resolve(error.code === "ENOENT" ? 127 : 126);
      });
      child.once("exit", (code, signal) => resolve(code ?? (signal ? signalStatus(signal) : 1)));
    });
    await release();
    return status;
  } finally {
    for (const [signal, handler] of handlers) process.off(signal, handler);
  }
}
