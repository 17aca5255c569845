// `ws-agent probe`'s collector check: for each configured address, the first step that fails —
// DNS, TCP, TLS, the token — in one line that says what to look at. Each step is the real one
// (the resolver, a socket, a TLS handshake with the configured CA and name, a gRPC Hello marked
// probe), so the verdict is what the agent itself would meet. The wording is pure (describe*).
import { lookup } from "node:dns/promises";
import { X509Certificate } from "node:crypto";
import { readFileSync } from "node:fs";
import net from "node:net";
import tls from "node:tls";
import * as grpc from "@grpc/grpc-js";
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { AgentMessageSchema, AgentService, clientChannelOptions, errorMessage, type HelloSchema } from "@ws/protocol";
import { clientConstructor, openBidi } from "@ws/protocol/grpc";
import type { AgentConfig } from "../config.js";

export type ProbeStep = "dns" | "tcp" | "tls" | "token" | "ok";

export interface CollectorCheck {
  address: string;
  /** The step that failed, or "ok". */
  step: ProbeStep;
  /** The system's or the collector's own words (error code, gRPC status, certificate names). */
  detail: string;
}

const RUNBOOK = "docs/alerts.md#workstationagentneverconnected";

/** One line per address. */
export function describeCollectorCheck(check: CollectorCheck): string {
  const at = `collector ${check.address}`;
  switch (check.step) {
    case "ok":
      return `${at}: ok — ${check.detail}`;
    case "dns":
      return `${at}: DNS failure — ${check.detail}; with dnsPolicy None (enterprise DNS) *.svc.cluster.local does not resolve: list a LoadBalancer/NodePort address or an enterprise name too (${RUNBOOK})`;
    case "tcp":
      return `${at}: connection failed — ${check.detail} (${RUNBOOK})`;
    case "tls":
      return `${at}: TLS mismatch — ${check.detail}`;
    case "token":
      return `${at}: refused by the collector — ${check.detail}`;
  }
}

/** What a socket error means here, in words. */
export function describeSocketError(code: string | undefined, target: string): string {
  switch (code) {
    case "ECONNREFUSED":
      return `connection refused at ${target}: nothing listens there (wrong port, or the Service has no ready endpoint)`;
    case "ETIMEDOUT":
      return `no answer from ${target}: packets are dropped (a NetworkPolicy, a firewall, or Cilium's kube-proxy replacement not translating the guest's ClusterIP traffic)`;
    case "EHOSTUNREACH":
    case "ENETUNREACH":
      return `${target} is unreachable from this guest (${code}): no route`;
    case "ECONNRESET":
      return `${target} reset the connection`;
    default:
      return `${target}: ${code ?? "error"}`;
  }
}

/** What a TLS handshake error means, given the name the certificate was checked against. */
export function describeTlsError(
  code: string | undefined,
  message: string,
  name: string,
  caFile: string | undefined,
): string {
  switch (code) {
    case "ERR_TLS_CERT_ALTNAME_INVALID":
      return `the certificate does not name ${name} (${message.replace(/^Hostname\/IP does not match certificate's altnames: /, "")}): set collector.serverName to a name it has, or add ${name} to the certificate's subjectAltName`;
    case "UNABLE_TO_VERIFY_LEAF_SIGNATURE":
    case "SELF_SIGNED_CERT_IN_CHAIN":
    case "DEPTH_ZERO_SELF_SIGNED_CERT":
    case "UNABLE_TO_GET_ISSUER_CERT_LOCALLY":
    case "CERT_SIGNATURE_FAILURE":
      return `the certificate is not signed by ${caFile ? `the CA in ${caFile}` : "a CA this system trusts (no collector.caFile set)"} (${code})`;
    case "CERT_HAS_EXPIRED":
      return "the collector's certificate has expired";
    default:
      return /wrong version number|packet length too long/i.test(message)
        ? "the collector does not speak TLS on this port (a plaintext collector needs collector.insecure: true)"
        : `${code ?? "handshake failed"}: ${message}`;
  }
}

/**
 * When the collector's certificate and the agent's CA expire, for the ok line: a renewal the
 * collector has not picked up, or a CA file cert-manager rotated past, shows here before it
 * fails a handshake. The agent reads caFile at every connection, so a rotated CA needs no restart.
 */
export function describeValidity(peerValidTo: string, ca: Buffer | undefined, caFile: string | undefined): string {
  const iso = (text: string) => {
    const ms = Date.parse(text);
    return Number.isNaN(ms) ? text : new Date(ms).toISOString();
  };
  let caText = "";
  if (ca && caFile) {
    try {
      caText = `, the CA in ${caFile} until ${iso(new X509Certificate(ca).validTo)}`;
    } catch {
      caText = "";
    }
  }
  return `; its certificate is valid until ${iso(peerValidTo)}${caText}`;
}

function splitAddress(address: string): { host: string; port: number } {
  const bracket = /^\[([^\]]+)\]:(\d+)$/.exec(address);
  if (bracket) return { host: bracket[1]!, port: Number(bracket[2]) };
  const i = address.lastIndexOf(":");
  return { host: address.slice(0, i), port: Number(address.slice(i + 1)) };
}

type Outcome = { ok: true; value: string } | { ok: false; code: string | undefined; message: string };

function connectTcp(host: string, port: number, timeoutMs: number): Promise<Outcome & { socket?: net.Socket }> {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port });
    const timer = setTimeout(() => {
      socket.destroy();
      resolve({ ok: false, code: "ETIMEDOUT", message: "timed out" });
    }, timeoutMs);
    socket.once("connect", () => {
      clearTimeout(timer);
      resolve({ ok: true, value: `${host}:${port}`, socket });
    });
    socket.once("error", (error: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      resolve({ ok: false, code: error.code, message: error.message });
    });
  });
}

function handshake(socket: net.Socket, name: string, ca: Buffer | undefined, timeoutMs: number): Promise<Outcome> {
  return new Promise((resolve) => {
    const secure = tls.connect({
      socket,
      ...(net.isIP(name) ? {} : { servername: name }),
      ...(ca ? { ca } : {}),
      ALPNProtocols: ["h2"],
      checkServerIdentity: (host, cert) => tls.checkServerIdentity(name === host ? host : name, cert),
    });
    const timer = setTimeout(() => {
      secure.destroy();
      resolve({ ok: false, code: "ETIMEDOUT", message: "no TLS answer" });
    }, timeoutMs);
    secure.once("secureConnect", () => {
      clearTimeout(timer);
      const validTo = secure.getPeerCertificate().valid_to;
      secure.end();
      resolve({ ok: true, value: validTo });
    });
    secure.once("error", (error: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      secure.destroy();
      resolve({ ok: false, code: error.code, message: error.message });
    });
  });
}

function helloProbe(
  address: string,
  config: AgentConfig,
  hello: MessageInitShape<typeof HelloSchema>,
  timeoutMs: number,
): Promise<Outcome> {
  const Client = clientConstructor(AgentService);
  const credentials = config.collector.insecure
    ? grpc.credentials.createInsecure()
    : grpc.credentials.createSsl(config.collector.caFile ? readFileSync(config.collector.caFile) : undefined);
  const client = new Client(address, credentials, {
    ...clientChannelOptions(),
    ...(config.collector.serverName ? { "grpc.ssl_target_name_override": config.collector.serverName } : {}),
  });
  return new Promise((resolve) => {
    const call = openBidi(client, AgentService, "connect", new grpc.Metadata(), {
      deadline: Date.now() + timeoutMs,
    });
    let settled = false;
    const settle = (outcome: Outcome) => {
      if (settled) return;
      settled = true;
      call.cancel();
      client.close();
      resolve(outcome);
    };
    call.on("status", (status: grpc.StatusObject) => {
      if (status.code === grpc.status.OK) settle({ ok: true, value: "authenticated" });
      else settle({ ok: false, code: grpc.status[status.code], message: status.details });
    });
    call.on("error", (error: grpc.ServiceError) =>
      settle({ ok: false, code: grpc.status[error.code], message: error.details || error.message }),
    );
    // An older collector answers a probe with a Directive (it took it for a connection): it authenticated.
    call.on("data", () => settle({ ok: true, value: "authenticated (a collector older than the probe field)" }));
    call.write(create(AgentMessageSchema, { payload: { case: "hello", value: { ...hello, probe: true } } }));
  });
}

/** Checks one address step by step; never throws. */
export async function checkCollector(
  address: string,
  config: AgentConfig,
  hello: MessageInitShape<typeof HelloSchema>,
  timeoutMs: number,
): Promise<CollectorCheck> {
  if (address.startsWith("unix:")) {
    const answer = await helloProbe(address, config, hello, timeoutMs);
    return answer.ok
      ? { address, step: "ok", detail: answer.value }
      : { address, step: "token", detail: `${answer.code}: ${answer.message}` };
  }
  const { host, port } = splitAddress(address);
  let ip = host;
  if (!net.isIP(host)) {
    try {
      ip = (await lookup(host)).address;
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      return { address, step: "dns", detail: `${host} does not resolve (${code ?? errorMessage(error)})` };
    }
  }
  const tcp = await connectTcp(ip, port, timeoutMs);
  if (!tcp.ok) return { address, step: "tcp", detail: describeSocketError(tcp.code, `${ip}:${port}`) };
  let validity = "";
  if (config.collector.insecure) tcp.socket?.destroy();
  else {
    const name = config.collector.serverName ?? host;
    const ca = config.collector.caFile ? readFileSync(config.collector.caFile) : undefined;
    const secure = await handshake(tcp.socket!, name, ca, timeoutMs);
    if (!secure.ok)
      return {
        address,
        step: "tls",
        detail: describeTlsError(secure.code, secure.message, name, config.collector.caFile),
      };
    validity = describeValidity(secure.value, ca, config.collector.caFile);
  }
  const answer = await helloProbe(address, config, hello, timeoutMs);
  if (answer.ok) {
    return { address, step: "ok", detail: `${answer.value} as ${hello.vm?.namespace}/${hello.vm?.name}${validity}` };
  }
  if (answer.code === "UNAUTHENTICATED") {
    return {
      address,
      step: "token",
      detail: `bad token (${answer.message}): check vm.namespace, vm.name and the token (ws-collector token prints the right one)`,
    };
  }
  if (answer.code === "PERMISSION_DENIED") {
    return { address, step: "token", detail: `identity refused (${answer.message})` };
  }
  return { address, step: "token", detail: `${answer.code}: ${answer.message}` };
}
