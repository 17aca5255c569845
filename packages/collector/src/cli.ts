// ws-collector: serve | token | keygen | replay | version. Every command has --help; bad usage exits 2.
import type { Io } from "@ws/protocol";
import { existsSync, readFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { parseArgs, type ParseArgsConfig } from "node:util";
import { replayCommand } from "./replay/command.js";
import { CollectorConfigError, resolveCollectorConfig } from "./config.js";
import { serve } from "./serve.js";
import { loadKey } from "./key-file.js";
import { generateKey, KeyError, tokenFor } from "./token.js";
import { COLLECTOR_VERSION } from "./version.js";
import { errorMessage, runProgram, UsageError } from "@ws/protocol";

export type { Io } from "@ws/protocol";

const DEFAULT_CONFIG = "/etc/ws-collector/config.yaml";

const MAIN_HELP = `ws-collector ${COLLECTOR_VERSION} — decides when persistent workstation VMs are idle, warns, and stops them

Usage: ws-collector <command> [options]

Commands:
  serve     Run the collector: gRPC for agents, HTTP for /metrics, /healthz, /readyz and the status page
  token     Print the token a VM's agent needs (HMAC of namespace/name under the key file)
  keygen    Print a new random key for --key-file
  replay    Run the decision engine over a recorded trace and print every decision
  whatif    Replay a period recorded in Prometheus under other thresholds: stops, hours saved
  ssh-proxy An OpenSSH ProxyCommand that starts a stopped workstation when a person connects
  version   Print the version

Run 'ws-collector <command> --help' for the options of a command.
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
      --record-trace FILE  Append every report and connection event to FILE (replayable)
  -h, --help               This help
`;

function parse<T extends ParseArgsConfig["options"]>(argv: string[], options: T) {
  try {
    return parseArgs({ args: argv, options, strict: true, allowPositionals: false });
  } catch (error) {
    throw new UsageError(errorMessage(error));
  }
}

async function serveCommand(argv: string[], io: Io): Promise<number> {
  const { values } = parse(argv, {
    config: { type: "string", short: "c" },
    standalone: { type: "boolean" },
    kubeconfig: { type: "string" },
    "grpc-listen": { type: "string" },
    "http-listen": { type: "string" },
    "metrics-listen": { type: "string" },
    "key-file": { type: "string" },
    "stop-command": { type: "string", multiple: true },
    "record-trace": { type: "string" },
    help: { type: "boolean", short: "h" },
  });
  if (values.help) {
    io.stdout.write(SERVE_HELP);
    return 0;
  }
  const configPath = values.config ?? io.env.WS_COLLECTOR_CONFIG ?? DEFAULT_CONFIG;
  let fileText: string | undefined;
  if (values.config || io.env.WS_COLLECTOR_CONFIG || existsSync(configPath)) {
    try {
      fileText = readFileSync(configPath, "utf8");
    } catch (error) {
      throw new CollectorConfigError([
        `cannot read ${configPath}: ${(error as NodeJS.ErrnoException).code ?? errorMessage(error)}`,
      ]);
    }
  }
  const config = resolveCollectorConfig(
    fileText,
    configPath,
    {
      ...(values.standalone ? { standalone: true } : {}),
      ...(values.kubeconfig ? { kubeconfig: values.kubeconfig } : {}),
      ...(values["grpc-listen"] ? { grpcListen: values["grpc-listen"] } : {}),
      ...(values["http-listen"] ? { httpListen: values["http-listen"] } : {}),
      ...(values["metrics-listen"] ? { metricsListen: values["metrics-listen"] } : {}),
      ...(values["key-file"] ? { keyFile: values["key-file"] } : {}),
      ...(values["stop-command"] ? { stopCommand: values["stop-command"] } : {}),
      ...(values["record-trace"] ? { recordTrace: values["record-trace"] } : {}),
    },
    io.env,
  );
  return serve(config, io);
}

function tokenCommand(argv: string[], io: Io): number {
  const { values } = parse(argv, {
    namespace: { type: "string", short: "n" },
    name: { type: "string" },
    "key-file": { type: "string" },
    help: { type: "boolean", short: "h" },
  });
  if (values.help) {
    io.stdout.write(`Usage: ws-collector token --namespace NS --name VM [--key-file FILE]

Prints the token the agent in VM NS/VM presents (put it in the agent's config, usually through
cloud-init). It is an HMAC of "NS/VM" under the collector's key, so nothing is stored per VM and
the token is worthless for any other VM. Rotating the key invalidates every token.
`);
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
        token: tokenCommand,
        keygen: keygenCommand,
        replay: (rest) =>
          replayCommand(rest, { stdout: io.stdout, stderr: io.stderr, readFile: (p: string) => readFile(p, "utf8") }),
        whatif: async (rest) =>
          (await import("./whatif/command.js")).whatifCommand(rest, { stdout: io.stdout, stderr: io.stderr }),
        "ssh-proxy": async (rest) => (await import("./ssh-proxy/command.js")).sshProxyCommand(rest, io),
      },
    },
    argv,
    io,
  );
}

function keygenCommand(rest: string[], io: Io): number {
  if (rest.includes("--help") || rest.includes("-h")) {
    io.stdout.write(
      "Usage: ws-collector keygen > /etc/ws-collector/token.key\n\nPrints a new random 64-character key for signing VM tokens.\n",
    );
    return 0;
  }
  if (rest.length) throw new UsageError("keygen takes no arguments");
  io.stdout.write(`${generateKey()}\n`);
  return 0;
}
