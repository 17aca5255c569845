#!/usr/bin/env node
// `npm start`: the main job on one machine. Installs and builds what it needs,
// starts the standalone collector and an agent reporting this very machine
// (observe mode, short demo timeouts so the state machine moves within
// minutes), prints the URLs, and stops both on Ctrl-C.
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { ensureNpmDependencies } from "./lib/npm-deps.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const work = path.join(root, ".cache/start");
const grpcPort = Number(process.env.WS_START_GRPC_PORT ?? 7443);
const httpPort = Number(process.env.WS_START_HTTP_PORT ?? 8080);

function run(command, args) {
  const result = spawnSync(command, args, { cwd: root, stdio: "inherit" });
  if (result.status !== 0) {
    console.error(`npm start: '${[command, ...args].join(" ")}' failed`);
    process.exit(result.status || 1);
  }
}

ensureNpmDependencies(root);
run("node", ["scripts/build.mjs"]);

mkdirSync(path.join(work, "state"), { recursive: true });
const collectorBin = path.join(root, "packages/collector/dist/ws-collector.cjs");
const agentBin = path.join(root, "packages/guest-agent/dist/ws-agent.cjs");
const keyFile = path.join(work, "token.key");
if (!existsSync(keyFile)) {
  const key = spawnSync(process.execPath, [collectorBin, "keygen"], { encoding: "utf8" });
  writeFileSync(keyFile, key.stdout, { mode: 0o600 });
}
const vm = { namespace: "local", name: os.hostname().toLowerCase().replace(/[^a-z0-9-]/g, "-").replace(/^-+|-+$/g, "") || "this-machine" };
const configFile = path.join(work, "collector.yaml");
writeFileSync(
  configFile,
  `# Written by npm start: a standalone collector with demo timeouts, observe mode.
mode: standalone
grpc: { listen: "127.0.0.1:${grpcPort}" }
http: { listen: "127.0.0.1:${httpPort}" }
tokenKeyFile: ${JSON.stringify(keyFile)}
reportInterval: 5s
tick: 1s
policy:
  defaults:
    autostop: enabled
    mode: observe
    idle-timeout: 2m
    grace-period: 1m
    agent-lost-after: 30s
`,
);
const token = spawnSync(process.execPath, [collectorBin, "token", "--key-file", keyFile, "--namespace", vm.namespace, "--name", vm.name], { encoding: "utf8" }).stdout.trim();

const children = [];
function start(name, args, env = {}) {
  const child = spawn(process.execPath, args, { cwd: root, env: { ...process.env, ...env }, stdio: ["ignore", "inherit", "pipe"] });
  child.stderr.on("data", (chunk) => {
    for (const line of chunk.toString().split("\n")) if (line.trim()) process.stderr.write(`[${name}] ${line}\n`);
  });
  child.on("exit", (code, signal) => {
    if (!stopping) {
      console.error(`[${name}] exited (${code ?? signal}); stopping`);
      stop(1);
    }
  });
  children.push(child);
  return child;
}

let stopping = false;
function stop(code = 0) {
  if (stopping) return;
  stopping = true;
  for (const child of children) child.kill("SIGTERM");
  setTimeout(() => process.exit(code), 1500).unref();
  Promise.all(children.map((c) => new Promise((resolve) => (c.exitCode !== null ? resolve() : c.on("exit", resolve))))).then(() => process.exit(code));
}
process.on("SIGINT", () => stop(0));
process.on("SIGTERM", () => stop(0));

start("collector", [collectorBin, "serve", "--config", configFile]);
await new Promise((resolve) => setTimeout(resolve, 800));
start("agent", [
  agentBin, "run", "--insecure",
  "--collector", `127.0.0.1:${grpcPort}`,
  "--namespace", vm.namespace, "--name", vm.name,
  "--state-dir", path.join(work, "state"),
  "--socket", path.join(work, "agent.sock"),
  "--report-interval", "5s",
], { WS_AGENT_TOKEN: token, WS_AGENT_CONFIG: path.join(work, "agent.yaml") });
writeFileSync(path.join(work, "agent.yaml"), "# npm start passes everything as flags\n");

console.log(`
ws is running: a standalone collector and an agent reporting this machine as ${vm.namespace}/${vm.name}.
  status page  http://127.0.0.1:${httpPort}/
  metrics      http://127.0.0.1:${httpPort}/metrics
  VMs as JSON  http://127.0.0.1:${httpPort}/api/vms
  lease        WS_AGENT_SOCKET=${path.join(work, "agent.sock")} ${agentBin} lease 10m --reason demo
Observe mode with a 2m idle timeout and 1m grace: leave the machine alone and watch the state move.
Press Ctrl-C to stop both.
`);
