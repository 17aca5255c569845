// ws-collector: serve | config check | token | keygen | replay | whatif | ssh-proxy | version.
// Every command has --help; the exit statuses are @ws/protocol's EXIT (usage 2, config 3).
import type { Io } from "@ws/protocol";
import { existsSync, readFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { replayCommand } from "../offline/replay/command.js";
import {
  type CollectorConfig,
  CollectorConfigError,
  type CollectorFlags,
  resolveCollectorConfig,
} from "../platform/config.js";
import { loadPolicyConfig, serve } from "../serve/serve.js";
import { loadKey } from "../links/key-file.js";
import { generateKey, KeyError, tokenFor } from "../links/agent-token.js";
import { COLLECTOR_VERSION } from "../lib/version.js";
import {
  withSubcommands,
  errorMessage,
  parseCommandLine,
  runProgram,
  UsageError,
  usageLine,
  writeConfigCheck,
} from "@ws/protocol";

export type { Io } from "@ws/protocol";

const DEFAULT_CONFIG = "/etc/ws-collector/config.yaml";

const MAIN_HELP = `ws-collector ${COLLECTOR_VERSION} — decides when persistent workstation VMs are idle, warns, and stops them

Usage: ws-collector <command> [options]

Commands:
  serve     Run the collector: gRPC for agents, HTTP for /metrics, /healthz, /readyz and the status page
  config    config check FILE: validate a config file without serving it, and print what it sets
  token     Print the token a VM's agent needs (HMAC of namespace/name under the key file)
  keygen    Print a new random key for --key-file
  replay    Run the decision engine over a recorded trace and print every decision
  whatif    Replay a period recorded in Prometheus under other thresholds: stops, hours saved
  ssh-proxy An OpenSSH ProxyCommand that starts a stopped workstation when a person connects
  version   Print the version

Run 'ws-collector <command> --help' for the options of a command.
Exit status: 0 done, 1 failed, 2 usage error (unknown command or flag), 3 configuration error
(config file, key file), 70 a bug (uncaught exception).
`;

const SERVE_HELP = `Usage: ws-collector serve [options]

Runs the collector. In standalone mode (the default without a kubeconfig) the VMs are the agents
that connect, policy comes from the config file, and a stop is a log line or the configured
stopCommand (argv, {namespace} and {name} replaced; never run through a shell);
a start (the start link's button) is the configured startCommand, the same way.
In kubernetes mode it watches VirtualMachines and stops them through the KubeVirt API.
The config file's notifications: section sends webhooks (JSON, Slack, ntfy) with signed
keep-running links (docs/notifications.md).

Options:
  -c, --config FILE        Config file (default ${DEFAULT_CONFIG} when it exists)
      --standalone         Standalone mode (no Kubernetes)
      --kubeconfig FILE    Kubernetes mode with this kubeconfig (in a pod: in-cluster config)
      --grpc-listen ADDR   Agents' gRPC address (default 0.0.0.0:7443)
      --http-listen ADDR   HTTP address for the pages / and /vm/NS/NAME, /api/vms and the /keep
                           links, and for /metrics, /healthz, /readyz unless --metrics-listen is
                           set (default 0.0.0.0:8080)
      --metrics-listen ADDR  /metrics, /healthz and /readyz on their own address for Prometheus
                           and probes (config http.metricsListen); the pages stay on --http-listen
      --key-file FILE      Token key (default /etc/ws-collector/token.key; WS_COLLECTOR_KEY_FILE)
      --stop-command ARG   Standalone stop command, one argv entry per flag, e.g.
                           --stop-command virsh --stop-command shutdown --stop-command {name}
      --start-command ARG  Standalone start command (the start link's Start button), the same way:
                           --start-command virsh --start-command start --start-command {name}
      --record-trace FILE  Append every report and connection event to FILE (replayable)
  -h, --help               This help
`;

const SERVE_OPTIONS = {
  config: { type: "string", short: "c" },
  standalone: { type: "boolean" },
  kubeconfig: { type: "string" },
  "grpc-listen": { type: "string" },
  "http-listen": { type: "string" },
  "metrics-listen": { type: "string" },
  "key-file": { type: "string" },
  "stop-command": { type: "string", multiple: true },
  "start-command": { type: "string", multiple: true },
  "record-trace": { type: "string" },
  help: { type: "boolean", short: "h" },
} as const;

async function serveCommand(argv: string[], io: Io): Promise<number> {
  const { values } = parseCommandLine(argv, { help: SERVE_HELP, options: SERVE_OPTIONS });
  if (values.help) {
    io.stdout.write(SERVE_HELP);
    return 0;
  }
  const flags: CollectorFlags = {
    ...(values.standalone ? { standalone: true } : {}),
    ...(values.kubeconfig ? { kubeconfig: values.kubeconfig } : {}),
    ...(values["grpc-listen"] ? { grpcListen: values["grpc-listen"] } : {}),
    ...(values["http-listen"] ? { httpListen: values["http-listen"] } : {}),
    ...(values["metrics-listen"] ? { metricsListen: values["metrics-listen"] } : {}),
    ...(values["key-file"] ? { keyFile: values["key-file"] } : {}),
    ...(values["stop-command"] ? { stopCommand: values["stop-command"] } : {}),
    ...(values["start-command"] ? { startCommand: values["start-command"] } : {}),
    ...(values["record-trace"] ? { recordTrace: values["record-trace"] } : {}),
  };
  return serve(readCollectorConfig(values.config, flags, io.env), io);
}

/** The config file (the flag, WS_COLLECTOR_CONFIG, or the default path when it exists), resolved with the flags. */
function readCollectorConfig(explicitPath: string | undefined, flags: CollectorFlags, env: Io["env"]): CollectorConfig {
  const configPath = explicitPath ?? env.WS_COLLECTOR_CONFIG ?? DEFAULT_CONFIG;
  let fileText: string | undefined;
  if (explicitPath || env.WS_COLLECTOR_CONFIG || existsSync(configPath)) {
    try {
      fileText = readFileSync(configPath, "utf8");
    } catch (error) {
      throw new CollectorConfigError([
        `cannot read ${configPath}: ${(error as NodeJS.ErrnoException).code ?? errorMessage(error)}`,
      ]);
    }
  }
  return resolveCollectorConfig(fileText, configPath, flags, env);
}

const CONFIG_HELP = `Usage: ws-collector config check [FILE] [--json]

Validates a collector config file without serving it: the file itself, its policy: section (with
the rules between settings, judged on the values this file sets), and that the token key file it
names can be read. Prints what the file resolves to (--json: as JSON, for CI), or every problem.
FILE defaults to --config, WS_COLLECTOR_CONFIG, then ${DEFAULT_CONFIG}.

Options:
  -c, --config FILE   The file to check (same as FILE)
      --json          Print {"ok": true, "found": {...}} or {"ok": false, "problems": [...]}
  -h, --help          This help

Exit status: 0 valid, 3 the configuration has problems, 2 usage error.
`;

function configCheckCommand(argv: string[], io: Io): number {
  const { values, positionals } = parseCommandLine(argv, {
    help: CONFIG_HELP,
    options: {
      config: { type: "string", short: "c" },
      json: { type: "boolean" },
      help: { type: "boolean", short: "h" },
    },
    allowPositionals: true,
  });
  if (values.help) {
    io.stdout.write(CONFIG_HELP);
    return 0;
  }
  if (positionals.length > 1 || (positionals.length === 1 && values.config))
    throw new UsageError("config check takes one FILE (or --config FILE)", { usage: usageLine(CONFIG_HELP) });
  const explicit = positionals[0] ?? values.config ?? io.env.WS_COLLECTOR_CONFIG;
  if (explicit === undefined && !existsSync(DEFAULT_CONFIG))
    throw new UsageError(`config check needs a FILE (${DEFAULT_CONFIG} does not exist)`, {
      usage: usageLine(CONFIG_HELP),
    });
  const file = explicit ?? DEFAULT_CONFIG;
  const json = values.json ?? false;
  let config: CollectorConfig;
  try {
    config = readCollectorConfig(file, {}, io.env);
  } catch (error) {
    if (!(error instanceof CollectorConfigError)) throw error;
    return writeConfigCheck("ws-collector", { ok: false, file, problems: error.problems }, json, io);
  }
  // The policy and the key file are both checked, so one run names every problem.
  const problems: string[] = [];
  let policy: ReturnType<typeof loadPolicyConfig> | undefined;
  try {
    policy = loadPolicyConfig(config);
  } catch (error) {
    if (!(error instanceof CollectorConfigError)) throw error;
    problems.push(...error.problems);
  }
  try {
    loadKey(config.tokenKeyFile);
  } catch (error) {
    if (!(error instanceof KeyError)) throw error;
    problems.push(error.message);
  }
  if (!policy || problems.length > 0) return writeConfigCheck("ws-collector", { ok: false, file, problems }, json, io);
  return writeConfigCheck("ws-collector", { ok: true, file, found: collectorConfigFacts(config, policy) }, json, io);
}

const TOKEN_HELP = `Usage: ws-collector token --namespace NS --name VM [--key-file FILE]

Prints the token the agent in VM NS/VM presents (put it in the agent's config, usually through
cloud-init). It is an HMAC of "NS/VM" under the collector's key, so nothing is stored per VM and
the token is worthless for any other VM. Rotating the key invalidates every token.
`;

function tokenCommand(argv: string[], io: Io): number {
  const { values } = parseCommandLine(argv, {
    help: TOKEN_HELP,
    options: {
      namespace: { type: "string", short: "n" },
      name: { type: "string" },
      "key-file": { type: "string" },
      help: { type: "boolean", short: "h" },
    },
  });
  if (values.help) {
    io.stdout.write(TOKEN_HELP);
    return 0;
  }
  if (!values.namespace || !values.name) throw new UsageError("token needs --namespace and --name");
  const key = loadKey(values["key-file"] ?? io.env.WS_COLLECTOR_KEY_FILE ?? "/etc/ws-collector/token.key");
  io.stdout.write(`${tokenFor(key, values.namespace, values.name)}\n`);
  return 0;
}

export function main(argv: string[], io: Io): Promise<number> {
  return runProgram(
    {
      name: "ws-collector",
      version: COLLECTOR_VERSION,
      help: MAIN_HELP,
      userErrors: [CollectorConfigError, KeyError],
      commands: {
        serve: serveCommand,
        config: withSubcommands(CONFIG_HELP, { check: configCheckCommand }),
        token: tokenCommand,
        keygen: keygenCommand,
        replay: (rest) =>
          replayCommand(rest, { stdout: io.stdout, stderr: io.stderr, readFile: (p: string) => readFile(p, "utf8") }),
        whatif: async (rest) =>
          (await import("../offline/whatif/command.js")).whatifCommand(rest, { stdout: io.stdout, stderr: io.stderr }),
        "ssh-proxy": async (rest) => (await import("../comeback/ssh-proxy/command.js")).sshProxyCommand(rest, io),
      },
    },
    argv,
    io,
  );
}

const KEYGEN_HELP =
  "Usage: ws-collector keygen > /etc/ws-collector/token.key\n\nPrints a new random 64-character key for signing VM tokens.\n";

function keygenCommand(rest: string[], io: Io): number {
  const { values } = parseCommandLine(rest, { help: KEYGEN_HELP, options: { help: { type: "boolean", short: "h" } } });
  if (values.help) {
    io.stdout.write(KEYGEN_HELP);
    return 0;
  }
  io.stdout.write(`${generateKey()}\n`);
  return 0;
}

/** What `config check` prints: the settings a person most often gets wrong, as the collector will use them. */
function collectorConfigFacts(
  config: CollectorConfig,
  policy: ReturnType<typeof loadPolicyConfig>,
): Array<readonly [string, string]> {
  const defaults = policy.defaults;
  const profiles = Object.keys(policy.profiles);
  return [
    ["mode", config.mode],
    ["grpc.listen", config.grpc.listen],
    ["grpc.tls", config.grpc.certFile ? `${config.grpc.certFile} (key ${config.grpc.keyFile})` : "off (plaintext)"],
    ["http.listen", config.http.listen],
    ["http.metricsListen", config.http.metricsListen ?? "(on http.listen)"],
    ["tokenKeyFile", `${config.tokenKeyFile} (readable)`],
    ["reportInterval", `${config.reportIntervalSeconds}s`],
    ["policy.mode", defaults.mode],
    ["policy.idle-timeout", `${defaults.idleTimeoutSeconds}s`],
    ["policy.grace-period", `${defaults.gracePeriodSeconds}s`],
    ["policy.agent-lost-after", `${defaults.agentLostAfterSeconds}s`],
    ["policy.profiles", profiles.length ? profiles.join(", ") : "(none)"],
    ["notifications.publicUrl", config.notifications.publicUrl || "(unset: no keep or start links)"],
    ...(config.mode === "standalone"
      ? ([
          ["standalone.stopCommand", config.standalone.stopCommand?.join(" ") ?? "(unset: a stop is a log line)"],
          ["standalone.startCommand", config.standalone.startCommand?.join(" ") ?? "(unset: no Start button)"],
          ["standalone.vms", String(Object.keys(config.standalone.vms).length)],
        ] as const)
      : ([["kubernetes.leaseNamespace", config.kubernetes.leaseNamespace]] as const)),
  ];
}
