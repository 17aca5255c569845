// Reaching the collector from the guest's network: `ws-agent probe --collector-only` against the
// real collector bundle over TLS tells an unresolvable name, a refusing port, a certificate from
// another CA, a certificate for another name and a bad token apart, one line each; and the agent
// tries several addresses in order until one answers.
import { execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
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
let collector: Proc;
let grpcPort: number;
let httpPort: number;
let keyFile: string;
const running: Proc[] = [];

function openssl(args: string[]): void {
  try {
    execFileSync("openssl", args, { cwd: dir, stdio: "pipe" });
  } catch (error) {
    throw new Error(`openssl ${args[0]} failed (Debian package: openssl): ${String(error)}`);
  }
}

/** A CA, and a collector certificate it signs for the Service name and 127.0.0.1 (as docs/install.md makes them). */
function makeCertificates(): void {
  for (const ca of ["ca", "other-ca"]) {
    openssl([
      "req",
      "-x509",
      "-newkey",
      "rsa:2048",
      "-nodes",
      "-days",
      "1",
      "-subj",
      `/CN=${ca}`,
      "-keyout",
      `${ca}.key`,
      "-out",
      `${ca}.crt`,
    ]);
  }
  openssl([
    "req",
    "-newkey",
    "rsa:2048",
    "-nodes",
    "-subj",
    "/CN=ws-collector.ws-system.svc",
    "-keyout",
    "tls.key",
    "-out",
    "tls.csr",
  ]);
  writeFileSync(path.join(dir, "san.ext"), "subjectAltName=DNS:ws-collector.ws-system.svc,IP:127.0.0.1\n");
  openssl([
    "x509",
    "-req",
    "-in",
    "tls.csr",
    "-CA",
    "ca.crt",
    "-CAkey",
    "ca.key",
    "-CAcreateserial",
    "-days",
    "1",
    "-out",
    "tls.crt",
    "-extfile",
    "san.ext",
  ]);
}

function collectorCli(args: string[]): string {
  const result = spawnSync(process.execPath, [collectorBundle, ...args], { encoding: "utf8", timeout: 30_000 });
  if (result.status !== 0) throw new Error(`ws-collector ${args.join(" ")}: ${result.stderr}`);
  return result.stdout;
}

function agentConfig(name: string, collectorLines: string, token: string): string {
  const file = path.join(dir, `${name}.yaml`);
  writeFileSync(
    file,
    `collector:\n${collectorLines}\nvm:\n  namespace: e2e\n  name: vm1\ntoken: ${JSON.stringify(token)}\n`,
  );
  return file;
}

function probe(configFile: string): { status: number | null; lines: string[] } {
  const result = spawnSync(process.execPath, [agentBundle, "probe", "--collector-only", "--config", configFile], {
    encoding: "utf8",
    timeout: 60_000,
  });
  return { status: result.status, lines: result.stdout.trim().split("\n").filter(Boolean) };
}

let goodToken: string;

beforeAll(async () => {
  requireBundles();
  dir = mkdtempSync(path.join(os.tmpdir(), "ws-reach-"));
  makeCertificates();
  keyFile = path.join(dir, "token.key");
  writeFileSync(keyFile, collectorCli(["keygen"]), { mode: 0o600 });
  goodToken = collectorCli(["token", "--key-file", keyFile, "--namespace", "e2e", "--name", "vm1"]).trim();
  grpcPort = await freePort();
  httpPort = await freePort();
  const configFile = path.join(dir, "collector.yaml");
  writeFileSync(
    configFile,
    `mode: standalone
grpc: { listen: "127.0.0.1:${grpcPort}", certFile: ${JSON.stringify(path.join(dir, "tls.crt"))}, keyFile: ${JSON.stringify(path.join(dir, "tls.key"))} }
http: { listen: "127.0.0.1:${httpPort}" }
tokenKeyFile: ${JSON.stringify(keyFile)}
reportInterval: 1s
tick: 1s
policy:
  defaults:
    idle-timeout: "1h"
`,
  );
  collector = start(collectorBundle, ["serve", "--config", configFile]);
  running.push(collector);
  await eventually(
    async () => (await getText(`http://127.0.0.1:${httpPort}/healthz`)).status === 200,
    20_000,
    "collector up",
  );
}, 120_000);

afterAll(async () => {
  for (const proc of running) await proc.stop();
  rmSync(dir, { recursive: true, force: true });
});

const ca = () => path.join(dir, "ca.crt");

describe("ws-agent probe: the collector, one line per address", () => {
  it("ok with the right CA, name and token", () => {
    const cfg = agentConfig("good", `  address: 127.0.0.1:${grpcPort}\n  caFile: ${ca()}`, goodToken);
    const { status, lines } = probe(cfg);
    const expiry = (file: string) =>
      new Date(
        Date.parse(
          execFileSync("openssl", ["x509", "-enddate", "-noout", "-in", file], { encoding: "utf8" }).split("=")[1]!,
        ),
      ).toISOString();
    // The line says when the collector's certificate and the agent's CA expire (a renewal not picked up shows here first).
    expect(lines).toEqual([
      `collector 127.0.0.1:${grpcPort}: ok — authenticated as e2e/vm1; its certificate is valid until ${expiry(path.join(dir, "tls.crt"))}, the CA in ${ca()} until ${expiry(ca())}`,
    ]);
    expect(status).toBe(0);
  });

  it("an unresolvable name is a DNS failure, with the dnsPolicy None hint", () => {
    const name = "ws-collector.ws-system.svc.cluster.local.invalid";
    const cfg = agentConfig("dns", `  address: ${name}:${grpcPort}\n  caFile: ${ca()}`, goodToken);
    const { status, lines } = probe(cfg);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(
      new RegExp(
        `^collector ${name.replace(/\./g, "\\.")}:${grpcPort}: DNS failure — ${name.replace(/\./g, "\\.")} does not resolve \\((ENOTFOUND|EAI_AGAIN)\\); with dnsPolicy None`,
      ),
    );
    expect(status).toBe(1);
  });

  it("a port nothing listens on is connection refused", async () => {
    const closed = await freePort();
    const cfg = agentConfig("refused", `  address: 127.0.0.1:${closed}\n  caFile: ${ca()}`, goodToken);
    const { status, lines } = probe(cfg);
    expect(lines).toEqual([
      expect.stringMatching(
        new RegExp(
          `^collector 127\\.0\\.0\\.1:${closed}: connection failed — connection refused at 127\\.0\\.0\\.1:${closed}`,
        ),
      ),
    ]);
    expect(status).toBe(1);
  });

  it("a certificate from another CA is a TLS mismatch naming the caFile", () => {
    const other = path.join(dir, "other-ca.crt");
    const cfg = agentConfig("other-ca", `  address: 127.0.0.1:${grpcPort}\n  caFile: ${other}`, goodToken);
    const { lines } = probe(cfg);
    expect(lines).toEqual([
      `collector 127.0.0.1:${grpcPort}: TLS mismatch — the certificate is not signed by the CA in ${other} (UNABLE_TO_VERIFY_LEAF_SIGNATURE)`,
    ]);
  });

  it("a certificate for other names is a TLS mismatch, and serverName fixes it", () => {
    const wrongName = agentConfig("name", `  address: localhost:${grpcPort}\n  caFile: ${ca()}`, goodToken);
    expect(probe(wrongName).lines).toEqual([
      expect.stringMatching(
        /: TLS mismatch — the certificate does not name localhost \(.*DNS:ws-collector\.ws-system\.svc.*\): set collector\.serverName/,
      ),
    ]);
    const named = agentConfig(
      "named",
      `  address: localhost:${grpcPort}\n  caFile: ${ca()}\n  serverName: ws-collector.ws-system.svc`,
      goodToken,
    );
    expect(probe(named).lines).toEqual([
      expect.stringMatching(
        new RegExp(`^collector localhost:${grpcPort}: ok — authenticated as e2e/vm1; its certificate is valid until `),
      ),
    ]);
  });

  it("a token for another VM is a bad token", () => {
    const otherToken = collectorCli(["token", "--key-file", keyFile, "--namespace", "e2e", "--name", "vm2"]).trim();
    const cfg = agentConfig("token", `  address: 127.0.0.1:${grpcPort}\n  caFile: ${ca()}`, otherToken);
    expect(probe(cfg).lines).toEqual([
      expect.stringMatching(
        new RegExp(`^collector 127\\.0\\.0\\.1:${grpcPort}: refused by the collector — bad token \\(`),
      ),
    ]);
  });

  it("several addresses: each gets its line, in order; one that answers is enough", async () => {
    const closed = await freePort();
    const cfg = agentConfig(
      "several",
      `  addresses:\n    - ws-collector.ws-system.svc.cluster.local.invalid:7443\n    - 127.0.0.1:${closed}\n    - 127.0.0.1:${grpcPort}\n  caFile: ${ca()}`,
      goodToken,
    );
    const { status, lines } = probe(cfg);
    expect(lines.map((l) => l.split(" — ")[0])).toEqual([
      "collector ws-collector.ws-system.svc.cluster.local.invalid:7443: DNS failure",
      `collector 127.0.0.1:${closed}: connection failed`,
      `collector 127.0.0.1:${grpcPort}: ok`,
    ]);
    expect(status).toBe(0);
  });
});

describe("ws-agent run with several collector addresses", () => {
  it("skips the unresolvable and the refusing address and connects to the third", async () => {
    const closed = await freePort();
    const cfg = agentConfig(
      "run",
      `  addresses:\n    - ws-collector.ws-system.svc.cluster.local.invalid:7443\n    - 127.0.0.1:${closed}\n    - 127.0.0.1:${grpcPort}\n  caFile: ${ca()}`,
      goodToken,
    );
    const agent = start(agentBundle, [
      "run",
      "--config",
      cfg,
      "--report-interval",
      "1s",
      "--state-dir",
      path.join(dir, "state"),
      "--socket",
      path.join(dir, "agent.sock"),
    ]);
    running.push(agent);
    await eventually(
      async () => {
        const { body } = await getText(`http://127.0.0.1:${httpPort}/api/vms`);
        return (JSON.parse(body).vms as Array<{ name: string; connected: boolean }>).some(
          (v) => v.name === "vm1" && v.connected,
        );
      },
      30_000,
      "vm1 connected through the third address",
    );
    expect(agent.output()).toMatch(/not reachable .*trying 127\.0\.0\.1:/);
    expect(readFileSync(cfg, "utf8")).toContain("addresses:");
  }, 60_000);
});
