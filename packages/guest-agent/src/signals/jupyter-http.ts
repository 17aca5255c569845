/**
 * GET requests to one Jupyter server with Node's own http/https: the token in the
 * Authorization header, self-signed certificates accepted only where the endpoint allows it,
 * a bounded body, and an AbortSignal that ends everything at the deadline.
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

export function jupyterGet(endpoint: JupyterEndpoint, apiPath: string, signal: AbortSignal): Promise<JupyterReply> {
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
      // One request, one socket: no keep-alive socket outlives the sample.
      agent: false,
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
    request.on("error", (error) => finish(error));
    request.end();
  });
}

/** GET that insists on 2xx; the body is returned for a parser. */
export async function jupyterGetOk(endpoint: JupyterEndpoint, apiPath: string, signal: AbortSignal): Promise<string> {
  const reply = await jupyterGet(endpoint, apiPath, signal);
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
