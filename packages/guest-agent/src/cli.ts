// Command-line entry: dispatches on the name it was started under (ws-lease)
// and on the subcommand. Every command has --help; the exit statuses are @ws/protocol's EXIT
// (usage 2, config 3), the same as ws-collector's.
import type { Io } from "@ws/protocol";
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import type { ParseArgsConfig } from "node:util";
import { toJson } from "@bufbuild/protobuf";
import {
  withSubcommands,
  installUnhandledErrorPolicy,
  parseCommandLine,
  writeConfigCheck,
  logfmtLogger,
  PROTOCOL_VERSION,
  ReportSchema,
  reportProgramError,
  runProgram,
  SourceState,
  UsageError,
  errorMessage,
  usageLine,
  escapedJson,
} from "@ws/protocol";
import { systemClock } from "./clock.js";
import {
  ConfigError,
  DEFAULT_CONFIG_PATH,
  resolveAgentConfig,
  type AgentConfig,
  type Credential,
  type ConfigOverrides,
} from "./config.js";
import { stuckUserPathReads } from "./fs/user-file.js";
import { createStoredLeasesSignal } from "./lease/stored-signal.js";
import type { Signal } from "./signals/types.js";
import { describeSources } from "./probe-format.js";
import { takeSample } from "./sampler.js";
import { createSignals } from "./signals/index.js";
import { loadUsers } from "./users.js";
import { AGENT_VERSION } from "./version.js";

// The seal, grow, lease and run code paths are loaded only when their command runs: esbuild wraps
// a dynamically imported module in a lazy initializer, so `ws-lease status` in a user's shell and
// `ws-agent probe` do not evaluate the seal/grow planners or the agent runtime, and `run` does not
// evaluate the seal/grow/lease-CLI code it never calls.
const leaseCommand = async (argv: string[], io: Io): Promise<number> =>
  (await import("./lease/cli.js")).leaseCommand(argv, io);
const sealCommand = async (argv: string[], io: Io): Promise<number> =>
  (await import("./seal/command.js")).sealCommand(argv, io);
const growCommand = async (argv: string[], io: Io): Promise<number> =>
  (await import("./grow/command.js")).growCommand(argv, io);

export type { Io } from "@ws/protocol";

export { UsageError } from "@ws/protocol";

const MAIN_HELP = `ws-agent ${AGENT_VERSION} — the in-guest agent of ws (persistent-workstation idle detection)

Usage: ws-agent <command> [options]

Commands:
  run       Run the agent: sample every signal and report to the collector (what systemd runs)
  probe     Take one sample of every signal and print it; needs no collector
  config    config check [FILE]: validate the configuration without running, and print what it sets
  lease     Keep this VM running for a while (same as the ws-lease command)
  seal      Prepare this machine (or --root DIR) to become a golden image
  grow      Grow the root partition and filesystem after the disk was enlarged
  version   Print the version

Run 'ws-agent <command> --help' for the options of a command.
Configuration: ${DEFAULT_CONFIG_PATH} (written by cloud-init), then WS_AGENT_* environment, then flags.
Exit status: 0 done, 1 failed, 2 usage error (unknown command or flag), 3 configuration error
(systemd does not restart on 2 or 3), 70 a bug (uncaught exception).
`;

const CONFIG_OPTIONS = {
  config: { type: "string", short: "c" },
  collector: { type: "string" },
  namespace: { type: "string" },
  name: { type: "string" },
  token: { type: "string" },
  "report-interval": { type: "string" },
  insecure: { type: "boolean" },
  "ca-file": { type: "string" },
  "state-dir": { type: "string" },
  socket: { type: "string" },
  "proc-root": { type: "string" },
  "sys-root": { type: "string" },
  "dev-root": { type: "string" },
  "run-root": { type: "string" },
  "home-root": { type: "string" },
  "etc-root": { type: "string" },
  "jupyter-url": { type: "string", multiple: true },
  "gpu-command": { type: "string" },
  mount: { type: "string", multiple: true },
  help: { type: "boolean", short: "h" },
} as const satisfies ParseArgsConfig["options"];

const CONFIG_HELP = `Configuration options (override ${DEFAULT_CONFIG_PATH} and WS_AGENT_* variables):
  -c, --config FILE          Config file (default ${DEFAULT_CONFIG_PATH}; WS_AGENT_CONFIG)
      --collector HOST:PORT  Collector gRPC address (WS_AGENT_COLLECTOR)
      --namespace NS         VM namespace (WS_AGENT_VM_NAMESPACE)
      --name VM              VM name (WS_AGENT_VM_NAME)
      --token TOKEN          Token from 'ws-collector token' (WS_AGENT_TOKEN); prefer tokenFile in the config
      --insecure             Plaintext gRPC, no TLS (WS_AGENT_INSECURE=true)
      --ca-file FILE         CA bundle to verify the collector's certificate
      --report-interval DUR  Report interval, e.g. 15s (the collector may change it)
      --state-dir DIR        Leases and agent state (default /var/lib/ws-agent)
      --socket PATH          Lease socket (default /run/ws-agent/agent.sock)
      --proc-root DIR --sys-root DIR --dev-root DIR --run-root DIR --home-root DIR --etc-root DIR
                             Read the machine from other roots (tests, containers)
      --jupyter-url URL      Extra Jupyter server URL (repeatable; ?token=... allowed)
      --gpu-command PATH     nvidia-smi to run (default nvidia-smi)
      --mount PATH           Mount to report disk usage for (repeatable; default /)
`;

function overridesFrom(values: Record<string, unknown>): ConfigOverrides {
  const s = (k: string) => values[k] as string | undefined;
  const overrides: ConfigOverrides = {};
  const set = <K extends keyof ConfigOverrides>(key: K, value: ConfigOverrides[K] | undefined) => {
    if (value !== undefined) overrides[key] = value;
  };
  set("collector", s("collector"));
  set("namespace", s("namespace"));
  set("name", s("name"));
  set("token", s("token"));
  set("reportInterval", s("report-interval"));
  set("insecure", values.insecure as boolean | undefined);
  set("caFile", s("ca-file"));
  set("stateDir", s("state-dir"));
  set("socket", s("socket"));
  set("procRoot", s("proc-root"));
  set("sysRoot", s("sys-root"));
  set("devRoot", s("dev-root"));
  set("runRoot", s("run-root"));
  set("homeRoot", s("home-root"));
  set("etcRoot", s("etc-root"));
  set("jupyterUrls", values["jupyter-url"] as string[] | undefined);
  set("gpuCommand", s("gpu-command"));
  set("mounts", values.mount as string[] | undefined);
  return overrides;
}

/** The credential disk's files (docs/credentials.md), when it is mounted; root-owned, read-only, from the hypervisor. */
function readCredential(dir: string): Credential | undefined {
  const read = (name: string) => {
    try {
      return readFileSync(path.join(dir, name), "utf8");
    } catch {
      return undefined;
    }
  };
  const configText = read("config.yaml");
  const token = read("token");
  if (configText === undefined && token === undefined) return undefined;
  const caFile = path.join(dir, "collector-ca.crt");
  return {
    ...(configText !== undefined ? { configText } : {}),
    ...(token !== undefined ? { token } : {}),
    ...(existsSync(caFile) ? { caFile } : {}),
  };
}

export function loadConfig(values: Record<string, unknown>, env: Io["env"], requireCollector: boolean): AgentConfig {
  const explicit = (values.config as string | undefined) ?? env.WS_AGENT_CONFIG;
  const filePath = explicit ?? DEFAULT_CONFIG_PATH;
  let fileText: string | undefined;
  if (explicit !== undefined || existsSync(filePath)) {
    try {
      fileText = readFileSync(filePath, "utf8");
    } catch (error) {
      throw new ConfigError([
        `cannot read config file ${filePath}: ${(error as NodeJS.ErrnoException).code ?? errorMessage(error)}`,
      ]);
    }
  }
  return resolveAgentConfig({
    fileText,
    filePath,
    readTokenFile: (p) => readFileSync(p, "utf8"),
    readCredential,
    env,
    flags: overridesFrom(values),
    requireCollector,
  });
}

const RUN_HELP = `Usage: ws-agent run [options]\n\nRuns the agent: samples every signal each interval and reports to the collector over gRPC.\nReconnects by itself; stops cleanly on SIGTERM/SIGINT (a second signal: at once).\n\n${CONFIG_HELP}`;

async function runCommand(argv: string[], io: Io): Promise<number> {
  const { values } = parseCommandLine(argv, { help: RUN_HELP, options: CONFIG_OPTIONS });
  if (values.help) {
    io.stdout.write(RUN_HELP);
    return 0;
  }
  const config = loadConfig(values, io.env, true);
  const log = logfmtLogger((line) => io.stderr.write(line), systemClock.nowMs);
  // A bug that leaves a promise unhandled is logged, counted in the Report and survived; an
  // uncaught exception exits 70 and systemd restarts the agent (docs/security.md).
  const unhandled = { rejection: 0, exception: 0 };
  installUnhandledErrorPolicy({ log, counts: unhandled });
  // Listening before start(): a SIGTERM that comes while the agent starts must stop it cleanly too.
  const signalled = new Promise<string>((resolve) => {
    process.once("SIGTERM", () => resolve("SIGTERM"));
    process.once("SIGINT", () => resolve("SIGINT"));
  });
  const { AgentRuntime } = await import("./agent/runtime.js");
  const runtime = new AgentRuntime(config, systemClock, log, unhandled);
  await runtime.start();
  const signal = await signalled;
  log("info", `received ${signal}, shutting down`);
  // A second signal, or a stop that takes too long, ends the agent without waiting further.
  // Stopped on purpose (systemctl stop, package removal, shutdown): the collector is told so.
  const ended = await boundedStop(runtime, SHUTDOWN_DEADLINE_MS, `${signal}: stopped on purpose`);
  if (ended.by === "deadline")
    log("warn", `shutdown took longer than ${SHUTDOWN_DEADLINE_MS / 1000}s; exiting without waiting for it`);
  else if (ended.by === "signal")
    log("warn", `received ${ended.signal} while shutting down; exiting without waiting for the shutdown`);
  const stuck = stuckUserPathReads(1_000);
  if (stuck > 0) {
    // exit() joins libuv's pool threads, so with one stuck in the kernel a clean exit would hang forever.
    log("error", `${stuck} read(s) of user files are stuck in the kernel (a hanging filesystem); exiting with SIGKILL`);
    process.kill(process.pid, "SIGKILL");
  }
  return 0;
}

/** How long `run` waits for the stream, the lease socket and pending writes to close after SIGTERM. */
const SHUTDOWN_DEADLINE_MS = 5_000;

/** How the shutdown ended: the runtime stopped (or failed to), the deadline passed, or a second signal came. */
type StopEnd = { by: "stopped" } | { by: "deadline" } | { by: "signal"; signal: string };

async function boundedStop(
  runtime: { stop(goodbye?: string): Promise<void> },
  deadlineMs: number,
  goodbye: string,
): Promise<StopEnd> {
  let timer: NodeJS.Timeout | undefined;
  const giveUp = new Promise<StopEnd>((resolve) => {
    timer = setTimeout(() => resolve({ by: "deadline" }), deadlineMs);
    process.once("SIGTERM", () => resolve({ by: "signal", signal: "SIGTERM" }));
    process.once("SIGINT", () => resolve({ by: "signal", signal: "SIGINT" }));
  });
  const stopped = runtime.stop(goodbye).then(
    (): StopEnd => ({ by: "stopped" }),
    (): StopEnd => ({ by: "stopped" }),
  );
  try {
    return await Promise.race([stopped, giveUp]);
  } finally {
    clearTimeout(timer);
  }
}

const PROBE_HELP = `Usage: ws-agent probe [--json] [--window DUR] [--no-collector | --collector-only] [options]\n\nTakes one sample of every signal and prints it, one line per source (or the Report as JSON).\nNeeds no collector. Rates (CPU, network, disk) are measured over --window (default 1s).\nWith a collector address configured, then checks each address in order and prints one line\nper address: ok, or the step that failed (DNS failure, connection refused or unanswered,\nTLS mismatch, refused token). Exits 1 when a source failed or no address answered.\n\n${CONFIG_HELP}`;

async function probeCommand(argv: string[], io: Io): Promise<number> {
  const { values } = parseCommandLine(argv, {
    help: PROBE_HELP,
    options: {
      ...CONFIG_OPTIONS,
      json: { type: "boolean" },
      window: { type: "string" },
      "no-collector": { type: "boolean" },
      "collector-only": { type: "boolean" },
    },
  });
  if (values.help) {
    io.stdout.write(PROBE_HELP);
    return 0;
  }
  const config = loadConfig(values, io.env, false);
  if (values["collector-only"]) return (await probeCollectors(config, io)) ? 0 : 1;
  const windowMs = values.window ? parseWindow(values.window) : 1000;
  const users = await loadUsers(config.roots);
  const signals = [...createSignals(config), createStoredLeasesSignal() as Signal<unknown>];
  const base = { roots: config.roots, clock: systemClock, users };
  await takeSample(signals, config.disabledSignals, base, config.sampleTimeoutMs, systemClock);
  await new Promise((resolve) => setTimeout(resolve, windowMs));
  const sample = await takeSample(signals, config.disabledSignals, base, config.sampleTimeoutMs, systemClock);
  const report = sample.report;
  if (values.json) {
    io.stdout.write(`${escapedJson(toJson(ReportSchema, report, { alwaysEmitImplicit: false }), 2)}\n`);
  } else {
    io.stdout.write(describeSources(report));
  }
  const collectorOk = values["no-collector"] || values.json ? true : await probeCollectors(config, io);
  return report.sources.some((s) => s.state === SourceState.FAILED) || !collectorOk ? 1 : 0;
}

/** One line per configured collector address; true when none is configured or one answered. */
async function probeCollectors(config: AgentConfig, io: Io): Promise<boolean> {
  const addresses = config.collector.addresses;
  if (addresses.length === 0) return true;
  const hello = {
    vm: { namespace: config.vm.namespace, name: config.vm.name },
    agentVersion: AGENT_VERSION,
    token: config.token,
    protocolVersion: PROTOCOL_VERSION,
  };
  // The check speaks gRPC: loaded here, so the commands that do not (ws-lease, version) never load grpc-js.
  const { checkCollector, describeCollectorCheck } = await import("./agent/collector-probe.js");
  let anyOk = false;
  for (const address of addresses) {
    const check = await checkCollector(address, config, hello, COLLECTOR_PROBE_TIMEOUT_MS);
    if (check.step === "ok") anyOk = true;
    io.stdout.write(`${describeCollectorCheck(check)}\n`);
  }
  return anyOk;
}

const COLLECTOR_PROBE_TIMEOUT_MS = 5_000;

function parseWindow(text: string): number {
  const match = /^(\d+(?:\.\d+)?)(ms|s)?$/.exec(text.trim());
  if (!match) throw new UsageError(`--window: "${text}" is not a duration like 1s or 500ms`);
  const value = Number(match[1]) * (match[2] === "ms" ? 1 : 1000);
  if (value <= 0 || value > 60_000) throw new UsageError(`--window must be between 1ms and 60s`);
  return value;
}

export async function main(argv0: string, argv: string[], io: Io): Promise<number> {
  const invokedAs = path.basename(argv0).replace(/\.(c?js|mjs)$/, "");
  const program = {
    name: "ws-agent",
    version: AGENT_VERSION,
    help: MAIN_HELP,
    userErrors: [ConfigError],
    commands: {
      run: runCommand,
      probe: probeCommand,
      config: withSubcommands(AGENT_CONFIG_HELP, { check: configCheckCommand }),
      lease: leaseCommand,
      seal: sealCommand,
      grow: growCommand,
    },
  };
  if (invokedAs !== "ws-lease") return runProgram(program, argv, io);
  try {
    return await leaseCommand(argv, io);
  } catch (error) {
    return reportProgramError(program, error, io);
  }
}

const AGENT_CONFIG_HELP = `Usage: ws-agent config check [FILE] [--json] [options]

Validates the agent's configuration without running: the file (FILE, --config, WS_AGENT_CONFIG,
then ${DEFAULT_CONFIG_PATH}), the credential disk, WS_AGENT_* variables and the flags below, as
'ws-agent run' would resolve them (a collector address is required). Prints what it resolves to
(--json: as JSON; the token is never printed), or every problem.
Exit status: 0 valid, 3 the configuration has problems, 2 usage error.

${CONFIG_HELP}      --json                 Print {"ok": true, "found": {...}} or {"ok": false, "problems": [...]}
`;

function configCheckCommand(argv: string[], io: Io): number {
  const { values, positionals } = parseCommandLine(argv, {
    help: AGENT_CONFIG_HELP,
    options: { ...CONFIG_OPTIONS, json: { type: "boolean" } },
    allowPositionals: true,
  });
  if (values.help) {
    io.stdout.write(AGENT_CONFIG_HELP);
    return 0;
  }
  if (positionals.length > 1 || (positionals.length === 1 && values.config))
    throw new UsageError("config check takes one FILE (or --config FILE)", { usage: usageLine(AGENT_CONFIG_HELP) });
  const explicit = positionals[0] ?? values.config;
  const file = explicit ?? io.env.WS_AGENT_CONFIG ?? DEFAULT_CONFIG_PATH;
  const json = values.json ?? false;
  try {
    const config = loadConfig({ ...values, config: explicit }, io.env, true);
    return writeConfigCheck("ws-agent", { ok: true, file, found: agentConfigFacts(config) }, json, io);
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    return writeConfigCheck("ws-agent", { ok: false, file, problems: error.problems }, json, io);
  }
}

/** What `config check` prints: where the agent reports, as whom, how often, what it reads (never the token). */
function agentConfigFacts(config: AgentConfig): Array<readonly [string, string]> {
  const tls = config.collector.insecure
    ? "off (insecure: plaintext)"
    : `on${config.collector.caFile ? ` (CA ${config.collector.caFile})` : " (system CAs)"}`;
  return [
    ["collector", config.collector.addresses.join(", ")],
    ["tls", tls],
    ["vm", `${config.vm.namespace}/${config.vm.name}`],
    ["token", config.token ? "set" : "(unset)"],
    ["reportInterval", `${config.reportIntervalSeconds}s`],
    ["socket", config.socketPath],
    ["disk.mounts", config.disk.mounts.join(", ")],
    ["jupyter.urls", config.jupyter.urls.length ? String(config.jupyter.urls.length) : "(discovered)"],
    ["disabledSignals", config.disabledSignals.length ? config.disabledSignals.join(", ") : "(none)"],
  ];
}
