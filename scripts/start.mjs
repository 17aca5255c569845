#!/usr/bin/env node
// `npm start`: the main job on one machine. Installs and builds what it needs,
// starts the standalone collector and an agent reporting this very machine
// (observe mode, short demo timeouts so the state machine moves within
// minutes), prints the URLs, and stops both on Ctrl-C.
import { spawn, spawnSync } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, writeFileSync } from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { ensureNpmDependencies } from "./lib/npm-deps.mjs";
import { demoCollectorConfig } from "./lib/start-config.mjs";

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

/** One clear line when a port is taken, naming the variable that moves it (no stack trace). */
async function requireFreePort(port, variable) {
  const problem = await new Promise((resolve) => {
    const probe = net.createServer();
    probe.once("error", (error) =>
      resolve(error.code === "EADDRINUSE" ? "is already in use" : `cannot be opened (${error.code ?? error.message})`),
    );
    probe.listen(port, "127.0.0.1", () => probe.close(() => resolve(undefined)));
  });
  if (problem) {
    console.error(
      `npm start: port ${port} ${problem}; choose another with ${variable}, e.g. ${variable}=${port + 1} npm start`,
    );
    process.exit(1);
  }
}
for (const [port, variable] of [
  [grpcPort, "WS_START_GRPC_PORT"],
  [httpPort, "WS_START_HTTP_PORT"],
]) {
  if (!Number.isInteger(port) || port < 1 || port > 65535) {
    console.error(`npm start: ${variable} must be a port number (1-65535), not "${process.env[variable]}"`);
    process.exit(1);
  }
  await requireFreePort(port, variable);
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
const vm = {
  namespace: "local",
  name:
    os
      .hostname()
      .toLowerCase()
      .replace(/[^a-z0-9-]/g, "-")
      .replace(/^-+|-+$/g, "") || "this-machine",
};
const configFile = path.join(work, "collector.yaml");
writeFileSync(configFile, demoCollectorConfig({ grpcPort, httpPort, keyFile }));
const token = spawnSync(
  process.execPath,
  [collectorBin, "token", "--key-file", keyFile, "--namespace", vm.namespace, "--name", vm.name],
  { encoding: "utf8" },
).stdout.trim();

const children = [];
function start(name, args, env = {}) {
  // Each child in a process group of its own: Ctrl-C signals the terminal's foreground group,
  // and a child in it would get that SIGINT and then stop()'s SIGTERM milliseconds later, which
  // the agent rightly reads as "stop waiting" (a second signal). So only stop() signals them.
  const child = spawn(process.execPath, args, {
    cwd: root,
    env: { ...process.env, ...env },
    stdio: ["ignore", "inherit", "pipe"],
    detached: true,
  });
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
  Promise.all(
    children.map((c) => new Promise((resolve) => (c.exitCode !== null ? resolve() : c.on("exit", resolve)))),
  ).then(() => process.exit(code));
}
process.on("SIGINT", () => stop(0));
process.on("SIGTERM", () => stop(0));
process.on("SIGHUP", () => stop(0));
// Out of the terminal's group, the children would outlive an npm start that ends any other way.
process.on("exit", () => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
});

start("collector", [collectorBin, "serve", "--config", configFile]);
await new Promise((resolve) => setTimeout(resolve, 800));
start(
  "agent",
  [
    agentBin,
    "run",
    "--insecure",
    "--collector",
    `127.0.0.1:${grpcPort}`,
    "--namespace",
    vm.namespace,
    "--name",
    vm.name,
    "--state-dir",
    path.join(work, "state"),
    "--socket",
    path.join(work, "agent.sock"),
    "--report-interval",
    "5s",
  ],
  { WS_AGENT_TOKEN: token, WS_AGENT_CONFIG: path.join(work, "agent.yaml") },
);
writeFileSync(path.join(work, "agent.yaml"), "# npm start passes everything as flags\n");
// ws-lease for this demo: a one-word command once its folder is on PATH.
const binDir = path.join(work, "bin");
mkdirSync(binDir, { recursive: true });
const wsLease = path.join(binDir, "ws-lease");
writeFileSync(
  wsLease,
  `#!/bin/sh\n# Written by npm start: ws-lease for the demo agent.\nWS_AGENT_SOCKET=${JSON.stringify(path.join(work, "agent.sock"))} exec ${JSON.stringify(process.execPath)} ${JSON.stringify(agentBin)} lease "$@"\n`,
);
chmodSync(wsLease, 0o755);

console.log(`
ws is running: a standalone collector and an agent reporting this machine as ${vm.namespace}/${vm.name}.
  status page  http://127.0.0.1:${httpPort}/
  metrics      http://127.0.0.1:${httpPort}/metrics
  VMs as JSON  http://127.0.0.1:${httpPort}/api/vms
  this VM       http://127.0.0.1:${httpPort}/vm/${vm.namespace}/${vm.name}
  ws-lease     export PATH="${binDir}:$PATH"   then: ws-lease 10m --reason demo, ws-lease status, ws-lease run 2m -- sleep 60
Observe mode with a 2m idle timeout and 1m grace: leave the machine alone and watch the state move
("would stop at" on the VM's page; observe mode warns nobody, so no terminal is written to).
Demo thresholds: users' processes above 1.5 cores count as work; whole-machine CPU and disk do not.
Press Ctrl-C to stop both.
`);
