// A standalone collector set up the way an admin would: a key from
// `ws-collector keygen`, tokens from `ws-collector token`, a config file.
import { spawnSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import path from "node:path";
import { collectorBundle, freePort } from "./process.js";

export interface StandaloneCollector {
  keyFile: string;
  configFile: string;
  grpcPort: number;
  httpPort: number;
  /** The token `ws-collector token` prints for namespace/name. */
  token(namespace: string, name: string): string;
  /** `ws-agent run` arguments for an agent that reports VM namespace/name here every second. */
  agentRunArgs(namespace: string, name: string, flags: readonly string[]): string[];
}

export interface StandaloneOptions {
  /** YAML lines under `policy: defaults:` (two-space indented knobs). */
  policyDefaults: Record<string, string>;
  /** Extra top-level YAML (e.g. a `standalone:` section). */
  extra?: string;
}

function collector(args: string[]): string {
  const result = spawnSync(process.execPath, [collectorBundle, ...args], { encoding: "utf8", timeout: 30_000 });
  if (result.status !== 0) throw new Error(`ws-collector ${args.join(" ")} failed: ${result.stderr}`);
  return result.stdout;
}

export async function standaloneCollector(dir: string, options: StandaloneOptions): Promise<StandaloneCollector> {
  const keyFile = path.join(dir, "token.key");
  writeFileSync(keyFile, collector(["keygen"]), { mode: 0o600 });
  const grpcPort = await freePort();
  const httpPort = await freePort();
  const configFile = path.join(dir, "collector.yaml");
  const defaults = Object.entries(options.policyDefaults)
    .map(([knob, value]) => `    ${knob}: ${JSON.stringify(value)}`)
    .join("\n");
  writeFileSync(
    configFile,
    `mode: standalone
grpc: { listen: "127.0.0.1:${grpcPort}" }
http: { listen: "127.0.0.1:${httpPort}" }
tokenKeyFile: ${JSON.stringify(keyFile)}
reportInterval: 1s
tick: 1s
${options.extra ?? ""}
policy:
  defaults:
${defaults}
`,
  );
  return {
    keyFile,
    configFile,
    grpcPort,
    httpPort,
    token: (namespace, name) =>
      collector(["token", "--key-file", keyFile, "--namespace", namespace, "--name", name]).trim(),
    agentRunArgs: (namespace, name, flags) => [
      "run",
      "--insecure",
      "--collector",
      `127.0.0.1:${grpcPort}`,
      "--namespace",
      namespace,
      "--name",
      name,
      "--report-interval",
      "1s",
      ...flags,
    ],
  };
}
