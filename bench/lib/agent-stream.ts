// One simulated agent stream through the project's own grpc-js adapter
// (clientConstructor/openBidi), each on its own HTTP/2 connection as separate
// VMs would be.
import * as grpc from "@grpc/grpc-js";
import { create } from "@bufbuild/protobuf";
import {
  AgentMessageSchema,
  AgentService,
  clientChannelOptions,
  PROTOCOL_VERSION,
  retryAfterMs,
  type CollectorMessage,
  type Directive,
  type Report,
} from "@ws/protocol";
import { clientConstructor, openBidi } from "@ws/protocol/grpc";

const Client = clientConstructor(AgentService);

export interface AgentStream {
  sendReport(report: Report): boolean;
  close(): void;
}

export interface AgentStreamHandlers {
  onDirective(directive: Directive): void;
  /** `retryAfterMs`: the collector's retry hint (RESOURCE_EXHAUSTED when it is admitting agents at its limit). */
  onEnd(reason: string, retryAfterMs?: number): void;
}

export function openAgentStream(
  address: string,
  vm: { namespace: string; name: string },
  token: string,
  handlers: AgentStreamHandlers,
  /** Capabilities beyond the signal families (an agent that reports on change adds "report-on-change"). */
  extraCapabilities: readonly string[] = [],
  /** The channel's credentials (default: insecure); e.g. TLS against a collector with grpc.certFile. */
  credentials: grpc.ChannelCredentials = grpc.credentials.createInsecure(),
): AgentStream {
  // A local subchannel pool: without it grpc-js would multiplex every simulated VM over one connection.
  const client = new Client(address, credentials, {
    ...clientChannelOptions(),
    "grpc.use_local_subchannel_pool": 1,
  });
  const call = openBidi(client, AgentService, "connect", new grpc.Metadata());
  let ended = false;
  const end = (reason: string, retryAfter?: number) => {
    if (ended) return;
    ended = true;
    // As the agent does after every stream end: the connection goes with it (a refused agent must not leave one open on both sides).
    client.close();
    handlers.onEnd(reason, retryAfter);
  };
  call.on("data", (message: CollectorMessage) => {
    if (message.payload.case === "directive") handlers.onDirective(message.payload.value);
  });
  call.on("error", (error: grpc.ServiceError) =>
    end(`${grpc.status[error.code] ?? error.code}: ${error.details}`, retryAfterMs(error.metadata)),
  );
  call.on("end", () => end("collector closed the stream"));
  call.write(
    create(AgentMessageSchema, {
      payload: {
        case: "hello",
        value: {
          vm,
          agentVersion: "bench-loadgen",
          capabilities: [
            "jupyter",
            "sessions",
            "code_server",
            "gpu",
            "system",
            "inhibitors",
            "leases",
            "disk",
            ...extraCapabilities,
          ],
          bootId: "00000000-0000-4000-8000-000000000000",
          token,
          hostname: vm.name,
          protocolVersion: PROTOCOL_VERSION,
        },
      },
    }),
  );
  return {
    sendReport(report) {
      if (ended) return false;
      call.write(create(AgentMessageSchema, { payload: { case: "report", value: report } }));
      return true;
    },
    close() {
      ended = true;
      call.end();
      client.close();
    },
  };
}
