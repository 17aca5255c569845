// No input on any listener may end a process (issue 23). The shipped collector and agent run as
// real processes; raw bytes go to the collector's HTTP listener (every route, /keep/ with a real
// pending notice, /vm/ and /api/vms/ of a real VM), its gRPC listener (bytes that are not HTTP/2,
// and well-framed gRPC messages that are not protobuf), and the agent's lease socket. After each
// input the process must be alive and must answer a normal request; an answer to a fuzzed request
// must be a well-formed status below 500 (a 500 would be a route that failed on its input).
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import * as grpc from "@grpc/grpc-js";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  agentBundle,
  collectorBundle,
  eventually,
  getText,
  requireBundles,
  start,
  type Proc,
} from "../support/process.js";
import { quietMachine, type QuietMachine } from "../support/quiet-machine.js";
import { standaloneCollector, type StandaloneCollector } from "../support/standalone.js";
import { webhookReceiver, type WebhookReceiver } from "../support/webhook-receiver.js";

let dir: string;
let setup: StandaloneCollector;
let collector: Proc;
let agent: Proc;
let machine: QuietMachine;
let wsLease: string;
let keepPath: string;
let receiver: WebhookReceiver;

const base = () => `http://127.0.0.1:${setup.httpPort}`;

/** Sends raw bytes to a TCP port or a unix socket, half-closes, and collects what comes back until the server closes (or 3 s). */
function rawExchange(to: number | string, bytes: Uint8Array | string): Promise<string> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    const socket = typeof to === "number" ? net.connect({ port: to, host: "127.0.0.1" }) : net.connect(to);
    const done = () => {
      clearTimeout(timer);
      socket.destroy();
      resolve(Buffer.concat(chunks).toString("latin1"));
    };
    const timer = setTimeout(done, 3_000);
    socket.on("connect", () => socket.end(bytes));
    socket.on("data", (chunk: Buffer) => chunks.push(chunk));
    socket.on("close", done);
    socket.on("error", done);
  });
}

/** The status of the first response in a raw answer, or undefined when none came back. */
function statusOf(answer: string): number | undefined {
  if (answer === "") return undefined;
  const match = /^HTTP\/1\.[01] (\d{3}) /.exec(answer);
  if (!match) throw new Error(`not an HTTP response: ${JSON.stringify(answer.slice(0, 200))}`);
  return Number(match[1]);
}

async function collectorAnswers(): Promise<void> {
  expect(collector.child.exitCode, collector.output().slice(-2000)).toBeNull();
  const health = await getText(`${base()}/healthz`);
  expect(health.status).toBe(200);
}

beforeAll(async () => {
  requireBundles();
  dir = mkdtempSync(path.join(os.tmpdir(), "ws23-fuzz-"));
  wsLease = path.join(dir, "ws-lease");
  symlinkSync(agentBundle, wsLease);
  receiver = await webhookReceiver();
  setup = await standaloneCollector(dir, {
    // A long grace keeps the notice (and so a real keep link) pending for the whole run.
    policyDefaults: { autostop: "enabled", mode: "enforce", "idle-timeout": "2s", "grace-period": "1h" },
    extra: `notifications:
  publicUrl: "http://127.0.0.1:HTTP_PORT"
  webhooks:
    - { url: "${receiver.url}/json", format: json }
standalone:
  vms:
    e2e/fuzz: { labels: { platform.example.com/user: alice } }`,
  });
  const { readFileSync } = await import("node:fs");
  writeFileSync(setup.configFile, readFileSync(setup.configFile, "utf8").replace("HTTP_PORT", String(setup.httpPort)));
  collector = start(collectorBundle, ["serve", "--config", setup.configFile]);
  await collector.waitFor(/collector serving/);
  machine = await quietMachine();
  writeFileSync(path.join(dir, "none.yaml"), "");
  agent = start(agentBundle, setup.agentRunArgs("e2e", "fuzz", machine.flags), {
    WS_AGENT_TOKEN: setup.token("e2e", "fuzz"),
    WS_AGENT_CONFIG: path.join(dir, "none.yaml"),
  });
  await agent.waitFor(/connected to collector/);
  // The VM goes idle, a notice is pending, and the webhook carries its keep link.
  const keepUrl = await eventually(
    () =>
      receiver
        .on("/json")
        .map((hook) => hook.body as { event: string; keepUrl: string | null })
        .find((body) => body.event === "notice" && body.keepUrl)?.keepUrl,
    60_000,
    "the notice's keep link",
  );
  keepPath = new URL(keepUrl!).pathname + new URL(keepUrl!).search;
  expect((await getText(`${base()}${keepPath}`)).status).toBe(200);
}, 120_000);

afterAll(async () => {
  await agent?.stop();
  await collector?.stop();
  await receiver?.close();
  await machine?.remove();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("the collector's HTTP listener", () => {
  it("answers the reported malformed targets with 400 and keeps serving", async () => {
    for (const target of ["http://[::1", "http://a:99999/", "http://%zz/", "http://[/keep/e2e/fuzz", "*", "a:1"]) {
      const answer = await rawExchange(setup.httpPort, `GET ${target} HTTP/1.1\r\nHost: x\r\n\r\n`);
      expect(statusOf(answer), `${target}: ${answer.slice(0, 120)}`).toBe(400);
      await collectorAnswers();
    }
    // An origin-form path that names nothing is simply not found.
    for (const target of ["//[", "//[/keep/x", "/%zz", "/vm/%zz/%"]) {
      expect(statusOf(await rawExchange(setup.httpPort, `GET ${target} HTTP/1.1\r\nHost: x\r\n\r\n`))).toBe(404);
      await collectorAnswers();
    }
    const metrics = await getText(`${base()}/metrics`);
    expect(metrics.body).toMatch(/workstation_http_requests_refused_total\{reason="malformed-target"\} [1-9]/);
    expect(metrics.body).toMatch(/workstation_unhandled_errors_total\{kind="rejection"\} 0/);
  });

  it("answers a malformed request line or header with 400 and an oversized form with 413, not a reset", async () => {
    expect(statusOf(await rawExchange(setup.httpPort, "GET /vm/e2e/fuzz HTTP/1.1\r\nBad Header\r\n\r\n"))).toBe(400);
    expect(statusOf(await rawExchange(setup.httpPort, "\x00\x01\x02 / HTTP/1.1\r\n\r\n"))).toBe(400);
    expect(statusOf(await rawExchange(setup.httpPort, `GET / HTTP/1.1\r\nX: ${"a".repeat(40_000)}\r\n\r\n`))).toBe(431);
    const big = `t=${"x".repeat(64 * 1024)}`;
    for (const declared of [true, false]) {
      const head = declared ? `Content-Length: ${big.length}\r\n` : "Transfer-Encoding: chunked\r\n";
      const body = declared ? big : `${big.length.toString(16)}\r\n${big}\r\n0\r\n\r\n`;
      const answer = await rawExchange(
        setup.httpPort,
        `POST ${keepPath} HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\n${head}\r\n${body}`,
      );
      expect(statusOf(answer), answer.slice(0, 200)).toBe(413);
      expect(answer).toContain("form too large");
    }
    await collectorAnswers();
  });

  it("survives any request line, headers and body on every route (property)", async () => {
    const routes = [
      "/",
      "/metrics",
      "/healthz",
      "/readyz",
      "/api/vms",
      "/api/vms/e2e/fuzz",
      "/vm/e2e/fuzz",
      "/keep/e2e/fuzz",
      keepPath,
      "/keep/e2e/",
      "/vm/%zz/%",
      "/api/vms/../../",
      "http://[::1",
      "//[",
      "",
    ];
    const piece = fc.oneof(
      fc.string({ maxLength: 20 }),
      fc.constantFrom("%zz", "%", "[", "]", ":99999", "/", "//", "?t=", "&keep=3600", "#", "..", "\u00ff", "%00", "@"),
    );
    const target = fc
      .tuple(fc.constantFrom(...routes), fc.array(piece, { maxLength: 4 }))
      .map(([r, p]) => r + p.join(""));
    const method = fc.oneof(
      fc.constantFrom("GET", "POST", "HEAD", "PUT", "OPTIONS", "DELETE", "PRI"),
      fc.string({ maxLength: 8 }),
    );
    const version = fc.constantFrom("HTTP/1.1", "HTTP/1.0", "HTTP/2.0", "HTTP/9.9", "", "HTTP/1.1 extra");
    const header = fc.oneof(
      fc.tuple(
        fc.constantFrom(
          "Host",
          "Content-Length",
          "Transfer-Encoding",
          "Content-Type",
          "Expect",
          "Connection",
          "Cookie",
        ),
        fc.string({ maxLength: 40 }),
      ),
      fc.tuple(fc.string({ maxLength: 12 }), fc.string({ maxLength: 40 })),
      fc.tuple(fc.constant("Content-Length"), fc.integer({ min: -5, max: 100_000 }).map(String)),
    );
    const body = fc.oneof(
      fc.uint8Array({ maxLength: 6000 }),
      fc
        .tuple(fc.string({ maxLength: 80 }), fc.string({ maxLength: 12 }))
        .map(([t, keep]) => new TextEncoder().encode(`t=${encodeURIComponent(t)}&keep=${encodeURIComponent(keep)}`)),
    );
    const seen = new Set<number | undefined>();
    await fc.assert(
      fc.asyncProperty(method, target, version, fc.array(header, { maxLength: 6 }), body, async (m, t, v, hs, b) => {
        const head = `${m} ${t} ${v}\r\n${hs.map(([k, val]) => `${k}: ${val}`).join("\r\n")}\r\n\r\n`;
        const answer = await rawExchange(setup.httpPort, Buffer.concat([Buffer.from(head, "latin1"), b]));
        const status = statusOf(answer);
        seen.add(status);
        if (status !== undefined) expect(status, `${head.slice(0, 200)} → ${answer.slice(0, 200)}`).toBeLessThan(500);
        await collectorAnswers();
      }),
      {
        numRuns: 250,
        // Well-formed requests among the generated ones, so the property also covers the pages themselves.
        examples: [
          ["GET", "/vm/e2e/fuzz", "HTTP/1.1", [["Host", "x"]], new Uint8Array()],
          ["GET", "/api/vms/e2e/fuzz", "HTTP/1.0", [], new Uint8Array()],
          ["HEAD", keepPath, "HTTP/1.1", [["Host", "x"]], new Uint8Array()],
          ["POST", keepPath, "HTTP/1.1", [["Content-Length", "7"]], new TextEncoder().encode("keep=1x")],
          // One of each answer the coverage check below expects, so it never rests on what the random runs drew.
          ["GET", "/vm/%zz/%", "HTTP/1.1", [["Host", "x"]], new Uint8Array()],
          ["GET", "http://[::1", "HTTP/1.1", [["Host", "x"]], new Uint8Array()],
        ],
      },
    );
    // The inputs reached the routes (pages, refusals, parse errors), not only the parser.
    for (const status of [200, 400, 404]) expect(seen).toContain(status);
    // The fuzzing granted nothing and broke nothing: the VM is still pending its stop, and reporting.
    const detail = JSON.parse((await getText(`${base()}/api/vms/e2e/fuzz`)).body);
    expect(detail.view.state).toBe("StoppingPending");
    const metrics = await getText(`${base()}/metrics`);
    expect(metrics.body).toMatch(/workstation_unhandled_errors_total\{kind="rejection"\} 0/);
    expect(metrics.body).not.toMatch(/workstation_http_requests_refused_total\{reason="handler-error"\}/);
  }, 240_000);
});

describe("the collector's gRPC listener", () => {
  it("survives bytes that are not HTTP/2 and gRPC messages that are not protobuf (property)", async () => {
    await fc.assert(
      fc.asyncProperty(fc.uint8Array({ minLength: 1, maxLength: 4000 }), async (bytes) => {
        await rawExchange(setup.grpcPort, bytes);
        await collectorAnswers();
      }),
      { numRuns: 60 },
    );
    const client = new grpc.Client(`127.0.0.1:${setup.grpcPort}`, grpc.credentials.createInsecure());
    try {
      await fc.assert(
        fc.asyncProperty(
          fc.array(fc.uint8Array({ maxLength: 2000 }), { minLength: 1, maxLength: 4 }),
          async (messages) => {
            const call = client.makeBidiStreamRequest(
              "/workstation.v1.AgentService/Connect",
              (b: Uint8Array) => Buffer.from(b),
              (b: Buffer) => b,
            );
            const ended = new Promise<grpc.StatusObject>((resolve) => call.on("status", resolve));
            call.on("data", () => {});
            call.on("error", () => {});
            for (const message of messages) call.write(message);
            call.end();
            const status = await ended;
            // Garbage is refused with a status, never answered as an agent.
            expect(status.code).not.toBe(grpc.status.OK);
            await collectorAnswers();
          },
        ),
        { numRuns: 60 },
      );
    } finally {
      client.close();
    }
    // The real agent is still connected and reporting.
    const detail = JSON.parse((await getText(`${base()}/api/vms/e2e/fuzz`)).body);
    expect(detail.view.connected).toBe(true);
    expect(agent.output()).not.toMatch(/unhandled|uncaught/);
  }, 240_000);
});

describe("the agent's lease socket", () => {
  it("survives any bytes and still serves ws-lease (property)", async () => {
    const line = fc.oneof(
      fc.string({ maxLength: 200 }),
      fc.json({ maxDepth: 3 }),
      fc
        .record({
          op: fc.constantFrom("take", "list", "status", "cancel", "x"),
          seconds: fc.oneof(fc.double(), fc.integer(), fc.string()),
          reason: fc.string({ maxLength: 50 }),
        })
        .map((r) => JSON.stringify(r)),
    );
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          fc.uint8Array({ maxLength: 20_000 }),
          fc.array(line, { maxLength: 5 }).map((lines) => new TextEncoder().encode(lines.join("\n"))),
        ),
        async (bytes) => {
          const answer = await rawExchange(machine.socket, bytes);
          // The server speaks first (its challenge); whatever follows is JSON lines, never an echo of the input.
          expect(answer.split("\n")[0]).toMatch(/"protocol":"ws-agent-lease"/);
          expect(agent.child.exitCode).toBeNull();
        },
      ),
      { numRuns: 150 },
    );
    const status = spawnSync(process.execPath, [wsLease, "status", "--json"], {
      encoding: "utf8",
      timeout: 30_000,
      env: { ...process.env, WS_AGENT_SOCKET: machine.socket },
    });
    expect(status.status, status.stderr).toBe(0);
    expect(JSON.parse(status.stdout)).toHaveProperty("collector");
    expect(agent.output()).not.toMatch(/unhandled|uncaught/);
  }, 240_000);
});
