// Certificates that renew (issue 40 #5): cert-manager renews the collector's Secret and the
// kubelet swaps the mounted files. The real collector bundle serves the new certificate to new
// connections without a restart (the agent's open stream keeps going), exports when the one it
// serves expires, and a running agent whose CA file was rotated trusts the new CA at its next
// connection. Real TLS files from openssl, rotated the way a Secret volume is (rename over).
import { execFileSync } from "node:child_process";
import { X509Certificate } from "node:crypto";
import { mkdtempSync, renameSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import tls from "node:tls";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  agentBundle,
  collectorBundle,
  eventually,
  freePort,
  getText,
  requireBundles,
  start,
  type Proc,
} from "../support/process.js";

let dir: string;
let grpcPort: number;
let httpPort: number;
let configFile: string;
let collector: Proc;
let agent: Proc;

function openssl(args: string[]): void {
  try {
    execFileSync("openssl", args, { cwd: dir, stdio: "pipe" });
  } catch (error) {
    throw new Error(`openssl ${args[0]} failed (Debian package: openssl): ${String(error)}`);
  }
}

/** A CA `name`.crt/.key, and `name`-tls.crt/.key it signs for 127.0.0.1, valid `days`. */
function issue(name: string, days: number): { ca: string; cert: string; key: string } {
  openssl(
    ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", String(days), "-subj", `/CN=${name}`].concat([
      "-keyout",
      `${name}.key`,
      "-out",
      `${name}.crt`,
    ]),
  );
  openssl(
    ["req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=ws-collector", "-keyout", `${name}-tls.key`].concat([
      "-out",
      `${name}-tls.csr`,
    ]),
  );
  writeFileSync(path.join(dir, "san.ext"), "subjectAltName=DNS:ws-collector.ws-system.svc,IP:127.0.0.1\n");
  openssl(
    ["x509", "-req", "-in", `${name}-tls.csr`, "-CA", `${name}.crt`, "-CAkey", `${name}.key`].concat([
      "-CAcreateserial",
      "-days",
      String(days),
      "-out",
      `${name}-tls.crt`,
      "-extfile",
      "san.ext",
    ]),
  );
  return {
    ca: path.join(dir, `${name}.crt`),
    cert: path.join(dir, `${name}-tls.crt`),
    key: path.join(dir, `${name}-tls.key`),
  };
}

/** Puts `from` at `to` in one rename, as the kubelet's atomic writer swaps a Secret's files. */
function swapIn(from: string, to: string): void {
  const staged = `${to}.new`;
  execFileSync("cp", [from, staged]);
  renameSync(staged, to);
}

const expirySeconds = (file: string): number =>
  Math.floor(Date.parse(new X509Certificate(execFileSync("cat", [file])).validTo) / 1000);

/** The certificate a new TLS connection to the gRPC port gets, checked against `ca`. */
function servedCertificate(ca: string): Promise<{ fingerprint: string } | { error: string }> {
  return new Promise((resolve) => {
    const socket = tls.connect({
      host: "127.0.0.1",
      port: grpcPort,
      ca: execFileSync("cat", [ca]),
      ALPNProtocols: ["h2"],
    });
    socket.once("secureConnect", () => {
      const fingerprint = socket.getPeerCertificate().fingerprint256;
      socket.end();
      resolve({ fingerprint });
    });
    socket.once("error", (error: NodeJS.ErrnoException) => resolve({ error: error.code ?? error.message }));
  });
}

const fingerprintOf = (file: string) => new X509Certificate(execFileSync("cat", [file])).fingerprint256;

async function certExpiryMetric(): Promise<number | undefined> {
  const { body } = await getText(`http://127.0.0.1:${httpPort}/metrics`);
  const line = body
    .split("\n")
    .find((l) => l.startsWith('workstation_collector_cert_expiry_timestamp_seconds{cert="grpc"}'));
  return line === undefined ? undefined : Number(line.split(" ")[1]);
}

async function vmConnected(): Promise<boolean> {
  const { status, body } = await getText(`http://127.0.0.1:${httpPort}/api/vms`).catch(() => ({ status: 0, body: "" }));
  if (status !== 200) return false;
  return (JSON.parse(body).vms as Array<{ name: string; connected: boolean }>).some(
    (v) => v.name === "vm1" && v.connected,
  );
}

function startCollector(): Proc {
  const proc = start(collectorBundle, ["serve", "--config", configFile]);
  return proc;
}

let first: ReturnType<typeof issue>;
let second: ReturnType<typeof issue>;
const served = { cert: "", key: "", ca: "" };

beforeAll(async () => {
  requireBundles();
  dir = mkdtempSync(path.join(os.tmpdir(), "ws-certs-"));
  first = issue("first", 2);
  // The renewal: another CA too (a CA rotation is the harder case for the agent), valid longer.
  second = issue("second", 5);
  served.cert = path.join(dir, "tls.crt");
  served.key = path.join(dir, "tls.key");
  served.ca = path.join(dir, "ca.crt");
  swapIn(first.cert, served.cert);
  swapIn(first.key, served.key);
  swapIn(first.ca, served.ca);
  const keyFile = path.join(dir, "token.key");
  writeFileSync(keyFile, execFileSync(process.execPath, [collectorBundle, "keygen"]), { mode: 0o600 });
  const token = execFileSync(
    process.execPath,
    [collectorBundle, "token", "--key-file", keyFile, "--namespace", "e2e", "--name", "vm1"],
    {
      encoding: "utf8",
    },
  ).trim();
  grpcPort = await freePort();
  httpPort = await freePort();
  configFile = path.join(dir, "collector.yaml");
  writeFileSync(
    configFile,
    `mode: standalone
grpc: { listen: "127.0.0.1:${grpcPort}", certFile: ${JSON.stringify(served.cert)}, keyFile: ${JSON.stringify(served.key)}, certCheckInterval: 1s }
http: { listen: "127.0.0.1:${httpPort}" }
tokenKeyFile: ${JSON.stringify(keyFile)}
reportInterval: 1s
policy:
  defaults:
    idle-timeout: "1h"
`,
  );
  collector = startCollector();
  await eventually(
    async () => (await getText(`http://127.0.0.1:${httpPort}/healthz`).catch(() => ({ status: 0 }))).status === 200,
    30_000,
    "collector up",
  );
  const agentConfig = path.join(dir, "agent.yaml");
  writeFileSync(
    agentConfig,
    `collector:\n  address: 127.0.0.1:${grpcPort}\n  caFile: ${served.ca}\nvm:\n  namespace: e2e\n  name: vm1\ntoken: ${JSON.stringify(token)}\n`,
  );
  agent = start(
    agentBundle,
    ["run", "--config", agentConfig, "--report-interval", "1s"].concat([
      "--state-dir",
      path.join(dir, "state"),
      "--socket",
      path.join(dir, "agent.sock"),
    ]),
  );
  await eventually(vmConnected, 60_000, "the agent connected with the first CA");
}, 180_000);

afterAll(async () => {
  await agent?.stop();
  await collector?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("a renewed collector certificate", () => {
  it("is served to new connections without a restart, its expiry exported, while the open stream keeps going", async () => {
    expect(await servedCertificate(first.ca)).toEqual({ fingerprint: fingerprintOf(first.cert) });
    expect(await certExpiryMetric()).toBe(expirySeconds(first.cert));
    const agentMark = agent.mark();
    const collectorMark = collector.mark();

    // The key lands first: for a moment the files are two renewals' halves, which the collector must not serve.
    swapIn(second.key, served.key);
    await collector.waitFor(/changed but cannot be served yet; still serving the previous one/, 60_000, collectorMark);
    expect(await servedCertificate(first.ca)).toEqual({ fingerprint: fingerprintOf(first.cert) });
    swapIn(second.cert, served.cert);
    swapIn(second.ca, served.ca);

    await eventually(
      async () => (await certExpiryMetric()) === expirySeconds(second.cert),
      60_000,
      "the renewed expiry exported",
    );
    expect(await servedCertificate(second.ca)).toEqual({ fingerprint: fingerprintOf(second.cert) });
    expect(await servedCertificate(first.ca)).toEqual({
      error: expect.stringMatching(/UNABLE_TO_VERIFY_LEAF_SIGNATURE|SELF_SIGNED/),
    });
    expect(collector.output().slice(collectorMark)).toMatch(/gRPC certificate reloaded/);
    // Connections opened before keep their session: the agent never saw its stream end.
    expect(await vmConnected()).toBe(true);
    expect(agent.output().slice(agentMark)).not.toMatch(/collector stream ended/);
  }, 120_000);

  it("is trusted by a running agent through its rotated CA file when it next connects, without a restart", async () => {
    const pid = agent.child.pid;
    const agentMark = agent.mark();
    // The collector goes away (a rollout): the agent's next connection meets only the new certificate.
    await collector.stop();
    collector = startCollector();
    await agent.waitFor(/collector stream ended/, 60_000, agentMark);
    await eventually(vmConnected, 90_000, "the agent back, trusting the rotated CA");
    expect(agent.child.pid).toBe(pid);
    expect(agent.child.exitCode).toBeNull();
  }, 180_000);
});
