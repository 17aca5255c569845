// The gRPC adapter (and with it @grpc/grpc-js, 12 MiB) is a subpath of its own, @ws/protocol/grpc:
// only what speaks gRPC loads it (the agent's `run`, the collector), not `ws-lease` or `probe`.
export * from "./gen/workstation/v1/agent_pb.js";
export * from "./gen/workstation/v1/report_pb.js";
export * from "./gen/workstation/v1/directive_pb.js";
export * from "./limits.js";
export * from "./duration.js";
export * from "./logfmt.js";
export * from "./safe-text.js";
export * from "./errors.js";
export * from "./sources.js";
export * from "./io.js";
export * from "./backoff.js";
export * from "./program.js";
export * from "./cli-args.js";
export * from "./config-check.js";
export * from "./config-schema.js";
export * from "./suggest.js";
export * from "./unhandled.js";
export * from "./shape.js";
export * from "./links.js";
export { decodeMessage, encodeMessage } from "./codec.js";
export * from "./schedule.js";
