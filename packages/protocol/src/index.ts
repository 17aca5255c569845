export * from "./gen/workstation/v1/agent_pb.js";
export * from "./gen/workstation/v1/report_pb.js";
export * from "./gen/workstation/v1/directive_pb.js";
export * from "./grpc.js";
export * from "./limits.js";
export * from "./duration.js";
export * from "./logfmt.js";
export * from "./errors.js";
