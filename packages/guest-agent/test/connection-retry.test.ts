// The agent honours a busy collector's retry hint: RESOURCE_EXHAUSTED with ws-retry-after-ms
// trailing metadata makes it wait that long, spread ±50 % by its jitter, instead of its own
// backoff (which starts at 1 s and would bring a whole fleet back at once).
import * as grpc from "@grpc/grpc-js";
import {
  AgentService,
  RETRY_AFTER_METADATA_KEY,
  serverChannelOptions,
  type AgentMessage,
  type CollectorMessage,
} from "@ws/protocol";
import { bidiHandler, serverDefinition } from "@ws/protocol/grpc";
import { afterEach, describe, expect, it } from "vitest";
import { AgentConnection } from "../src/agent/connection.js";
import type { AgentConfig } from "../src/config.js";

let server: grpc.Server | undefined;
let connection: AgentConnection | undefined;

afterEach(async () => {
  await connection?.stop();
  server?.forceShutdown();
});

/** A collector that answers every Hello "busy, come back in `hintMs`" (or, without a hint, plain UNAVAILABLE). */
async function busyCollector(hintMs: number | undefined): Promise<{ address: string; hellos: () => number }> {
  let hellos = 0;
  server = new grpc.Server(serverChannelOptions());
  server.addService(serverDefinition(AgentService), {
    connect: bidiHandler<AgentMessage, CollectorMessage>((stream) => {
      stream.onMessage(() => {
        hellos++;
        if (hintMs === undefined) return stream.fail(grpc.status.UNAVAILABLE, "not now");
        const metadata = new grpc.Metadata();
        metadata.set(RETRY_AFTER_METADATA_KEY, String(hintMs));
        stream.fail(grpc.status.RESOURCE_EXHAUSTED, "collector busy admitting agents", metadata);
      });
    }),
  });
  const port = await new Promise<number>((resolve, reject) =>
    server!.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))),
  );
  return { address: `127.0.0.1:${port}`, hellos: () => hellos };
}

function agentAgainst(address: string, logs: string[], random: number): AgentConnection {
  const config = {
    collector: { address, insecure: true },
    vm: { namespace: "lab", name: "ws14" },
    token: "t",
  } as unknown as AgentConfig;
  return new AgentConnection({
    config,
    hello: { vm: { namespace: "lab", name: "ws14" }, token: "t", agentVersion: "test" },
    log: (_level, message) => logs.push(message),
    onDirective: () => {},
    onConnectedChange: () => {},
    random: () => random,
  });
}

async function firstRetryLine(logs: string[]): Promise<string> {
  for (let i = 0; i < 400; i++) {
    const line = logs.find((l) => l.includes("reconnecting in"));
    if (line) return line;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  throw new Error(`no reconnect line; log: ${logs.join(" | ")}`);
}

describe("the agent and a busy collector", () => {
  it("waits the hinted time, with jitter, before reconnecting", async () => {
    const collector = await busyCollector(8_000);
    const logs: string[] = [];
    connection = agentAgainst(collector.address, logs, 0.25);
    void connection.run();
    // 8 s × (0.5 + 0.25): the hint, spread by the agent's jitter.
    expect(await firstRetryLine(logs)).toMatch(
      /^collector stream ended \(RESOURCE_EXHAUSTED: collector busy admitting agents\); reconnecting in 6\.0s$/,
    );
    expect(collector.hellos()).toBe(1);
  });

  it("keeps its own backoff when the collector gives no hint", async () => {
    const collector = await busyCollector(undefined);
    const logs: string[] = [];
    connection = agentAgainst(collector.address, logs, 0.25);
    void connection.run();
    // The reconnect backoff: half of the 1 s ceiling fixed, the other half drawn (1 × (0.5 + 0.5 × 0.25)).
    expect(await firstRetryLine(logs)).toMatch(/reconnecting in 0\.6s$/);
  });
});
