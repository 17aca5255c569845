// Settings both ends of the stream must agree on. A change here changes both.

/** Largest message either side accepts. A Report with 1,000 processes and 64 GPUs stays far below this. */
export const MAX_MESSAGE_BYTES = 1024 * 1024;

/**
 * Largest message the collector accepts from an agent. A Report with every list at the
 * collector's per-agent limits and realistic names is about 100 kB; one of 0.8 MB (every string
 * at 256 characters) held the collector's event loop 23 ms to decode and decide, and delayed every
 * other VM's Report meanwhile (benchmark 2, hostile agents). A larger message is refused before
 * it is decoded (RESOURCE_EXHAUSTED).
 */
export const MAX_AGENT_MESSAGE_BYTES = 256 * 1024;

/** Agents ping this often when the stream is quiet, so NATs and load balancers keep it open. */
export const KEEPALIVE_TIME_MS = 30_000;
/** A ping unanswered this long means the connection is dead. */
export const KEEPALIVE_TIMEOUT_MS = 10_000;
/** The server tolerates pings this often; must be ≤ KEEPALIVE_TIME_MS or the server sends GOAWAY (too_many_pings). */
export const SERVER_MIN_PING_INTERVAL_MS = 20_000;

export const PROTOCOL_VERSION = 1;

/**
 * The Hello capability of an agent that reads Directive.report_when (docs/protocol.md, "Reports
 * on change"); a collector sends a ReportWhen only to an agent that announces it.
 */
export const REPORT_ON_CHANGE_CAPABILITY = "report-on-change";

/**
 * HTTP/2 streams one agent connection may hold open at once. An agent keeps one Report stream;
 * a second covers a reconnect racing the old stream's end. Each stream costs the server state.
 */
export const SERVER_MAX_CONCURRENT_STREAMS = 2;

export function serverChannelOptions(): Record<string, number> {
  return {
    "grpc.max_receive_message_length": MAX_AGENT_MESSAGE_BYTES,
    "grpc.max_send_message_length": MAX_MESSAGE_BYTES,
    "grpc.max_concurrent_streams": SERVER_MAX_CONCURRENT_STREAMS,
    // channelz keeps a trace, call counters and a child reference per connection and counts every
    // message: memory and CPU per agent for a debugging interface the collector does not serve.
    "grpc.enable_channelz": 0,
    "grpc.keepalive_time_ms": KEEPALIVE_TIME_MS * 2,
    "grpc.keepalive_timeout_ms": KEEPALIVE_TIMEOUT_MS,
    "grpc.http2.min_ping_interval_without_data_ms": SERVER_MIN_PING_INTERVAL_MS,
    "grpc.keepalive_permit_without_calls": 1,
  };
}

export function clientChannelOptions(): Record<string, number> {
  return {
    "grpc.max_receive_message_length": MAX_MESSAGE_BYTES,
    "grpc.max_send_message_length": MAX_MESSAGE_BYTES,
    "grpc.keepalive_time_ms": KEEPALIVE_TIME_MS,
    "grpc.keepalive_timeout_ms": KEEPALIVE_TIMEOUT_MS,
    "grpc.keepalive_permit_without_calls": 1,
    // The agent runs its own reconnect loop with backoff; grpc-js must not add a second one under it.
    "grpc.initial_reconnect_backoff_ms": 1000,
    "grpc.max_reconnect_backoff_ms": 1000,
  };
}

/**
 * Trailing metadata key of a RESOURCE_EXHAUSTED (or UNAVAILABLE) status: the collector is busy
 * and asks the agent to come back after this many milliseconds (the agent adds jitter).
 */
export const RETRY_AFTER_METADATA_KEY = "ws-retry-after-ms";
/** The longest wait a retry hint can ask for; a larger value is taken as this. */
export const MAX_RETRY_AFTER_MS = 5 * 60_000;

/** The retry hint of a status's metadata, bounded; undefined when there is none or it is not a number. */
export function retryAfterMs(metadata: { get(key: string): Array<string | Buffer> } | undefined): number | undefined {
  const value = metadata?.get(RETRY_AFTER_METADATA_KEY)[0];
  const ms = typeof value === "string" ? Number(value) : NaN;
  if (!Number.isFinite(ms) || ms < 0) return undefined;
  return Math.min(ms, MAX_RETRY_AFTER_MS);
}
