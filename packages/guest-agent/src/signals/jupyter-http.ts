/**
 * GET requests to one Jupyter server with Node's own http/https: the token in the
 * Authorization header, self-signed certificates accepted only where the endpoint allows it,
 * a bounded body, and an AbortSignal that ends everything at the deadline.
 *
 * Connections are kept alive between samples (JupyterAgents): one keep-alive agent per server,
 * at most REQUESTS_PER_SERVER sockets each, closed after IDLE_SOCKET_MS unused and dropped with
 * the server when a sample no longer finds it. A new TCP (and TLS) connection per request per
 * sample was most of what a Jupyter query cost.
 */
import http from "node:http";
import https from "node:https";
import type { JupyterEndpoint } from "./jupyter-parse.js";

export interface JupyterReply {
  status: number;
  body: string;
}

/** A Jupyter answer is a few kB; anything far larger is not the API we expect. */
const MAX_BODY_BYTES = 4 * 1024 * 1024;

export class HttpStatusError extends Error {
  constructor(
    readonly status: number,
    apiPath: string,
  ) {
    super(`${apiPath}: HTTP ${status}${status === 403 ? " (token rejected)" : ""}`);
  }
}

/** The agent queries each server with this many requests at once (kernels, terminals, status, api). */
export const REQUESTS_PER_SERVER = 4;
/**
 * An idle kept-alive socket is closed after this long: longer than the default 15 s interval so
 * one sample's sockets serve the next, far shorter than Jupyter's (tornado's) own idle timeout of
 * an hour, so the agent is normally the side that closes.
 */
export const IDLE_SOCKET_MS = 60_000;
/**
 * Servers whose connections are kept at most: a user can plant runtime files naming any number
 * of servers (64 per directory are read), and each kept agent holds up to 4 sockets. Servers past
 * this get one connection per request, as before keep-alive.
 */
export const MAX_KEPT_SERVERS = 32;

/** One keep-alive agent per server the last sample queried. */
export class JupyterAgents {
  private agents = new Map<string, http.Agent>();
  private used = new Set<string>();

  /** The agent for this endpoint, made on first use; undefined past MAX_KEPT_SERVERS (no keep-alive). */
  for(endpoint: JupyterEndpoint): http.Agent | undefined {
    const key = agentKey(endpoint);
    this.used.add(key);
    let agent = this.agents.get(key);
    if (agent === undefined) {
      if (this.agents.size >= MAX_KEPT_SERVERS) return undefined;
      const options: https.AgentOptions = {
        keepAlive: true,
        maxSockets: REQUESTS_PER_SERVER,
        maxFreeSockets: REQUESTS_PER_SERVER,
        timeout: IDLE_SOCKET_MS,
        scheduling: "lifo",
      };
      agent = endpoint.protocol === "https:" ? new https.Agent(options) : new http.Agent(options);
      this.agents.set(key, agent);
    }
    return agent;
  }

  /** Closes the agents of servers not queried since the last call (a server that went away). */
  sweep(): void {
    for (const [key, agent] of this.agents) {
      if (this.used.has(key)) continue;
      agent.destroy();
      this.agents.delete(key);
    }
    this.used = new Set();
  }

  /** Servers with an agent now. */
  get size(): number {
    return this.agents.size;
  }

  close(): void {
    for (const agent of this.agents.values()) agent.destroy();
    this.agents.clear();
  }
}

/** A server is one agent per way of reaching it: its URL, its socket, whether its certificate is checked. */
function agentKey(endpoint: JupyterEndpoint): string {
  return JSON.stringify([endpoint.url, endpoint.socketPath ?? "", endpoint.protocol, endpoint.acceptSelfSigned]);
}

/**
 * GET with one retry: a kept-alive socket the server closed while it sat idle (a restarted
 * server, an idle timeout shorter than ours) fails the request at once with ECONNRESET or EPIPE,
 * which says nothing about the server; the retry goes out on a new connection.
 */
export async function jupyterGet(
  endpoint: JupyterEndpoint,
  apiPath: string,
  signal: AbortSignal,
  agent?: http.Agent,
): Promise<JupyterReply> {
  try {
    return await getOnce(endpoint, apiPath, signal, agent);
  } catch (error) {
    if (!(error instanceof StaleSocketError)) throw error;
    if (signal.aborted) throw error.cause;
    return getOnce(endpoint, apiPath, signal, agent);
  }
}

/** A request failed on a socket reused from an earlier one, before any answer. */
class StaleSocketError extends Error {}

function getOnce(
  endpoint: JupyterEndpoint,
  apiPath: string,
  signal: AbortSignal,
  agent: http.Agent | undefined,
): Promise<JupyterReply> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) {
      reject(abortError(signal));
      return;
    }
    const client = endpoint.protocol === "https:" ? https : http;
    const headers: Record<string, string> = { Accept: "application/json" };
    if (endpoint.token !== "") headers.Authorization = `token ${endpoint.token}`;
    const options: https.RequestOptions = {
      method: "GET",
      path: `${endpoint.basePath}${apiPath}`,
      headers,
      // Without a keep-alive agent: one request, one socket, closed with the answer.
      agent: agent ?? false,
    };
    if (endpoint.socketPath !== undefined) {
      options.socketPath = endpoint.socketPath;
    } else {
      options.host = endpoint.host;
      options.port = endpoint.port;
    }
    if (endpoint.protocol === "https:") {
      options.rejectUnauthorized = !endpoint.acceptSelfSigned;
    }

    let settled = false;
    const finish = (error: Error | undefined, reply?: JupyterReply) => {
      if (settled) return;
      settled = true;
      signal.removeEventListener("abort", onAbort);
      if (error) reject(error);
      else resolve(reply!);
    };
    const request = client.request(options, (response) => {
      const chunks: Buffer[] = [];
      let size = 0;
      response.on("data", (chunk: Buffer) => {
        size += chunk.length;
        if (size > MAX_BODY_BYTES) {
          request.destroy(new Error(`${apiPath}: answer larger than ${MAX_BODY_BYTES} bytes`));
          return;
        }
        chunks.push(chunk);
      });
      response.on("end", () =>
        finish(undefined, { status: response.statusCode ?? 0, body: Buffer.concat(chunks).toString("utf8") }),
      );
      response.on("error", (error) => finish(error));
      response.on("aborted", () => finish(new Error(`${apiPath}: connection closed mid-answer`)));
    });
    const onAbort = () => request.destroy(abortError(signal));
    signal.addEventListener("abort", onAbort, { once: true });
    let answered = false;
    request.on("response", () => {
      answered = true;
    });
    request.on("error", (error) => {
      const code = (error as NodeJS.ErrnoException).code;
      if (request.reusedSocket && !answered && (code === "ECONNRESET" || code === "EPIPE"))
        finish(new StaleSocketError(error.message, { cause: error }));
      else finish(error);
    });
    request.end();
  });
}

/** GET that insists on 2xx; the body is returned for a parser. */
export async function jupyterGetOk(
  endpoint: JupyterEndpoint,
  apiPath: string,
  signal: AbortSignal,
  agent?: http.Agent,
): Promise<string> {
  const reply = await jupyterGet(endpoint, apiPath, signal, agent);
  if (reply.status < 200 || reply.status >= 300) throw new HttpStatusError(reply.status, apiPath);
  return reply.body;
}

function abortError(signal: AbortSignal): Error {
  const reason: unknown = signal.reason;
  return reason instanceof Error ? reason : new Error(String(reason ?? "aborted"));
}

/**
 * An AbortSignal that fires at `timeoutMs` or when the parent fires, whichever is first.
 * (AbortSignal.any is missing from the oldest Node the bundle supports.)
 */
export function deadline(parent: AbortSignal, timeoutMs: number): { signal: AbortSignal; dispose(): void } {
  const controller = new AbortController();
  const onParentAbort = () => {
    controller.abort(new Error(`sample aborted: ${String(abortError(parent).message)}`));
  };
  const timer = setTimeout(() => controller.abort(new Error(`timed out after ${timeoutMs} ms`)), timeoutMs);
  timer.unref?.();
  if (parent.aborted) onParentAbort();
  else parent.addEventListener("abort", onParentAbort, { once: true });
  return {
    signal: controller.signal,
    dispose: () => {
      clearTimeout(timer);
      parent.removeEventListener("abort", onParentAbort);
    },
  };
}
