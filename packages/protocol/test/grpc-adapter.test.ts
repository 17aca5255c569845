import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as grpc from "@grpc/grpc-js";
import { create } from "@bufbuild/protobuf";
import {
  AgentMessageSchema,
  AgentService,
  clientChannelOptions,
  CollectorMessageSchema,
  MAX_MESSAGE_BYTES,
  serverChannelOptions,
  type AgentMessage,
  type CollectorMessage,
} from "../src/index.js";
import { bidiHandler, clientConstructor, methodPath, openBidi, serverDefinition } from "../src/grpc.js";

let server: grpc.Server;
let address: string;
const decodeFailures: string[] = [];

beforeAll(async () => {
  server = new grpc.Server(serverChannelOptions());
  server.addService(serverDefinition(AgentService), {
    connect: bidiHandler<AgentMessage, CollectorMessage>(
      (stream) => {
        // Echo: each Hello's VM name comes back as a Directive status explanation.
        stream.onMessage((message) => {
          if (message.payload.case === "hello") {
            stream.write(
              create(CollectorMessageSchema, {
                payload: {
                  case: "directive",
                  value: { status: { explanation: `hello ${message.payload.value.vm?.name}` } },
                },
              }),
            );
          } else if (message.payload.case === "report") {
            stream.write(
              create(CollectorMessageSchema, {
                payload: {
                  case: "directive",
                  value: { reportIntervalSeconds: Number(message.payload.value.sequence) },
                },
              }),
            );
          }
        });
      },
      (failure) => decodeFailures.push(failure.reason),
    ),
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))),
  );
  address = `127.0.0.1:${port}`;
});

afterAll(() => server.forceShutdown());

function client(): grpc.Client {
  const Client = clientConstructor(AgentService);
  return new Client(address, grpc.credentials.createInsecure(), clientChannelOptions());
}

function collect(call: grpc.ClientDuplexStream<AgentMessage, CollectorMessage>) {
  const messages: CollectorMessage[] = [];
  const done = new Promise<{ code: grpc.status; details: string }>((resolve) => {
    call.on("data", (m: CollectorMessage) => messages.push(m));
    call.on("error", (e: grpc.ServiceError) => resolve({ code: e.code, details: e.details }));
    call.on("status", (s: grpc.StatusObject) => {
      if (s.code === grpc.status.OK) resolve({ code: s.code, details: s.details });
    });
  });
  return { messages, done };
}

describe("grpc adapter", () => {
  it("names the method after the proto service", () => {
    expect(methodPath(AgentService.method.connect)).toBe("/workstation.v1.AgentService/Connect");
  });

  it("round-trips typed messages over a real loopback server", async () => {
    const c = client();
    const call = openBidi(c, AgentService, "connect", new grpc.Metadata());
    const { messages, done } = collect(call);
    call.write(
      create(AgentMessageSchema, { payload: { case: "hello", value: { vm: { namespace: "ns", name: "vm-1" } } } }),
    );
    call.write(
      create(AgentMessageSchema, {
        payload: { case: "report", value: { sequence: 7n, system: { cpuBusyRatio: 0.5 } } },
      }),
    );
    call.end();
    const status = await done;
    expect(status.code).toBe(grpc.status.OK);
    expect(messages.map((m) => (m.payload.case === "directive" ? m.payload.value : undefined))).toMatchObject([
      { status: { explanation: "hello vm-1" } },
      { reportIntervalSeconds: 7 },
    ]);
    c.close();
  });

  it("answers garbage bytes with INVALID_ARGUMENT, closes that stream, and keeps serving others", async () => {
    const c = client();
    // A raw call whose serializer sends bytes that are not an AgentMessage (field 1, wire type 7 is invalid).
    const raw = c.makeBidiStreamRequest(
      methodPath(AgentService.method.connect),
      (b: Buffer) => b,
      (b: Buffer) => b,
      new grpc.Metadata(),
    );
    const status = await new Promise<grpc.ServiceError>((resolve) => {
      raw.on("error", resolve);
      raw.on("data", () => {});
      raw.write(Buffer.from([0x0f, 0xff, 0xff, 0xff]));
    });
    expect(status.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(status.details).toMatch(/malformed message/);
    expect(decodeFailures.length).toBeGreaterThan(0);

    const call = openBidi(c, AgentService, "connect", new grpc.Metadata());
    const { messages, done } = collect(call);
    call.write(create(AgentMessageSchema, { payload: { case: "hello", value: { vm: { name: "still-fine" } } } }));
    call.end();
    expect((await done).code).toBe(grpc.status.OK);
    expect(messages).toHaveLength(1);
    c.close();
  });

  it("refuses messages over the size limit", async () => {
    const c = client();
    const call = openBidi(c, AgentService, "connect", new grpc.Metadata());
    const { done } = collect(call);
    const huge = "x".repeat(MAX_MESSAGE_BYTES + 10);
    call.write(create(AgentMessageSchema, { payload: { case: "hello", value: { hostname: huge } } }));
    const status = await done;
    expect(status.code).toBe(grpc.status.RESOURCE_EXHAUSTED);
    c.close();
  });
});
