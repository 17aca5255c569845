/**
 * The one place the collector builds its Kubernetes clients: a KubeConfig from a kubeconfig file
 * or the pod's service account, the official typed APIs with a request timeout (client-node's own
 * transport has none, and a hung apiserver must not hang the collector), and a raw request for
 * what the typed APIs lack (the KubeVirt stop subresource) with auth and TLS from the same config.
 */
import http from "node:http";
import https from "node:https";
import { parseRetryAfterMs } from "../../lib/retry.js";
import {
  CoordinationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  EventsV1Api,
  KubeConfig,
  ResponseContext,
  ServerConfiguration,
  createConfiguration,
  wrapHttpLibrary,
  type RequestContext,
} from "@kubernetes/client-node";

export interface KubeConfigSource {
  /** A kubeconfig file (`--kubeconfig`). */
  kubeconfigPath?: string;
  /** Use the pod's service account (token, CA and namespace under /var/run/secrets). */
  inCluster?: boolean;
}

export function loadKubeConfig(source: KubeConfigSource): KubeConfig {
  const kc = new KubeConfig();
  if (source.kubeconfigPath) {
    try {
      kc.loadFromFile(source.kubeconfigPath);
    } catch (err) {
      throw new Error(`cannot read kubeconfig ${source.kubeconfigPath}: ${describeError(err)}`);
    }
  } else if (source.inCluster) {
    kc.loadFromCluster();
  } else {
    throw new Error(
      "no Kubernetes configuration: pass --kubeconfig FILE, or run in a pod (in-cluster service account)",
    );
  }
  const cluster = kc.getCurrentCluster();
  if (!cluster?.server) {
    throw new Error(`kubeconfig ${source.kubeconfigPath ?? "(in-cluster)"} has no current cluster with a server URL`);
  }
  return kc;
}

/** The current context's namespace (in a pod: the service account's namespace), or null. */
export function contextNamespace(kc: KubeConfig): string | null {
  const context = kc.getContextObject(kc.getCurrentContext());
  const ns = context?.namespace?.trim();
  return ns ? ns : null;
}

export interface KubeRequestInfo {
  method: string;
  /** Path without the query string, e.g. /apis/kubevirt.io/v1/namespaces/a/virtualmachines/b. */
  path: string;
  /** HTTP status, or null for a timeout or a network error. */
  status: number | null;
  durationMs: number;
}

export type KubeRequestObserver = (info: KubeRequestInfo) => void;

export interface KubeClients {
  readonly kubeConfig: KubeConfig;
  readonly server: string;
  readonly core: CoreV1Api;
  readonly custom: CustomObjectsApi;
  readonly coordination: CoordinationV1Api;
  readonly events: EventsV1Api;
  readonly requestTimeoutMs: number;
  readonly onRequest: KubeRequestObserver | undefined;
}

export interface KubeClientOptions {
  /** Whole-exchange limit for one non-watch request (default 15 s). */
  requestTimeoutMs?: number;
  /** Called after every request (for kube_requests_total{code}). */
  onRequest?: KubeRequestObserver;
}

/** A request that got no answer in time, or no answer at all. */
export class KubeTransportError extends Error {
  constructor(
    message: string,
    readonly timedOut: boolean,
  ) {
    super(message);
    this.name = "KubeTransportError";
  }
}

/** A non-2xx answer to a raw request. */
export class KubeHttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly headers: Record<string, string>,
  ) {
    super(message);
    this.name = "KubeHttpError";
  }
}

const MAX_RESPONSE_BYTES = 128 * 1024 * 1024;

interface HttpExchange {
  url: URL;
  method: string;
  headers: Record<string, string>;
  body: string | undefined;
  agent: http.Agent | undefined;
  timeoutMs: number;
}

interface HttpAnswer {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
}

function exchange(x: HttpExchange): Promise<HttpAnswer> {
  return new Promise((resolve, reject) => {
    const transport = x.url.protocol === "https:" ? https : http;
    const headers: Record<string, string | number> = { ...x.headers };
    if (x.body !== undefined) headers["Content-Length"] = Buffer.byteLength(x.body);
    const req = transport.request(
      x.url,
      { method: x.method, headers, ...(x.agent ? { agent: x.agent } : {}) },
      (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on("data", (chunk: Buffer) => {
          size += chunk.length;
          if (size > MAX_RESPONSE_BYTES) {
            req.destroy(
              new KubeTransportError(
                `${x.method} ${x.url.pathname}: response larger than ${MAX_RESPONSE_BYTES} bytes`,
                false,
              ),
            );
            return;
          }
          chunks.push(chunk);
        });
        res.on("end", () => {
          clearTimeout(timer);
          const flat: Record<string, string> = {};
          for (const [k, v] of Object.entries(res.headers))
            if (v !== undefined) flat[k] = Array.isArray(v) ? v.join(", ") : v;
          resolve({ status: res.statusCode ?? 0, headers: flat, body: Buffer.concat(chunks) });
        });
        res.on("error", (err) => {
          clearTimeout(timer);
          reject(err);
        });
      },
    );
    const timer = setTimeout(() => {
      req.destroy(new KubeTransportError(`${x.method} ${x.url.pathname}: no answer within ${x.timeoutMs} ms`, true));
    }, x.timeoutMs);
    req.on("error", (err) => {
      clearTimeout(timer);
      reject(
        err instanceof KubeTransportError
          ? err
          : new KubeTransportError(`${x.method} ${x.url.pathname}: ${err.message}`, false),
      );
    });
    if (x.body !== undefined) req.write(x.body);
    req.end();
  });
}

function observed<T>(
  observer: KubeRequestObserver | undefined,
  method: string,
  url: URL,
  run: () => Promise<T>,
  statusOf: (r: T) => number,
): Promise<T> {
  const started = performance.now();
  return run().then(
    (result) => {
      observer?.({ method, path: url.pathname, status: statusOf(result), durationMs: performance.now() - started });
      return result;
    },
    (err: unknown) => {
      observer?.({ method, path: url.pathname, status: null, durationMs: performance.now() - started });
      throw err;
    },
  );
}

function timeoutHttpLibrary(timeoutMs: number, observer: KubeRequestObserver | undefined) {
  return wrapHttpLibrary({
    async send(request: RequestContext): Promise<ResponseContext> {
      const url = new URL(request.getUrl());
      const method = String(request.getHttpMethod());
      const body = request.getBody();
      if (body !== undefined && typeof body !== "string")
        throw new Error(`unsupported request body type for ${method} ${url.pathname}`);
      const answer = await observed(
        observer,
        method,
        url,
        () => exchange({ url, method, headers: request.getHeaders(), body, agent: request.getAgent(), timeoutMs }),
        (a) => a.status,
      );
      return new ResponseContext(answer.status, answer.headers, {
        text: async () => answer.body.toString("utf8"),
        binary: async () => answer.body,
      });
    },
  });
}

export function createKubeClients(kc: KubeConfig, options: KubeClientOptions = {}): KubeClients {
  const cluster = kc.getCurrentCluster();
  if (!cluster?.server) throw new Error("kubeconfig has no current cluster with a server URL");
  const requestTimeoutMs = options.requestTimeoutMs ?? 15_000;
  const configuration = createConfiguration({
    baseServer: new ServerConfiguration(cluster.server, {}),
    authMethods: { default: kc },
    httpApi: timeoutHttpLibrary(requestTimeoutMs, options.onRequest),
  });
  return {
    kubeConfig: kc,
    server: cluster.server.replace(/\/+$/, ""),
    core: new CoreV1Api(configuration),
    custom: new CustomObjectsApi(configuration),
    coordination: new CoordinationV1Api(configuration),
    events: new EventsV1Api(configuration),
    requestTimeoutMs,
    onRequest: options.onRequest,
  };
}

export interface RawRequest {
  method: string;
  /** Absolute API path, e.g. /apis/subresources.kubevirt.io/v1/namespaces/ns/virtualmachines/vm/stop. */
  path: string;
  /** Sent as JSON. */
  body?: unknown;
  /** The body's content type (default application/json; a merge patch: application/merge-patch+json). */
  contentType?: string;
  timeoutMs?: number;
}

export interface RawAnswer {
  status: number;
  headers: Record<string, string>;
  text: string;
}

/**
 * One request the typed APIs cannot make, authenticated and verified exactly as they would be
 * (token, client certificate, CA, exec/OIDC plugins all come from the KubeConfig). Resolves with
 * any HTTP answer; rejects with KubeTransportError on a timeout or a network failure.
 */
export async function rawKubeRequest(clients: KubeClients, request: RawRequest): Promise<RawAnswer> {
  const options: https.RequestOptions = {};
  await clients.kubeConfig.applyToHTTPSOptions(options);
  const url = new URL(clients.server + request.path);
  const headers: Record<string, string> = { Accept: "application/json" };
  for (const [k, v] of Object.entries(options.headers ?? {})) if (v !== undefined) headers[k] = String(v);
  if (options.auth) headers["Authorization"] = `Basic ${Buffer.from(options.auth).toString("base64")}`;
  const body = request.body === undefined ? undefined : JSON.stringify(request.body);
  if (body !== undefined) headers["Content-Type"] = request.contentType ?? "application/json";
  const answer = await observed(
    clients.onRequest,
    request.method,
    url,
    () =>
      exchange({
        url,
        method: request.method,
        headers,
        body,
        agent: options.agent instanceof http.Agent ? options.agent : undefined,
        timeoutMs: request.timeoutMs ?? clients.requestTimeoutMs,
      }),
    (a) => a.status,
  );
  return { status: answer.status, headers: answer.headers, text: answer.body.toString("utf8") };
}

/** The HTTP status behind an error from the typed APIs or a raw request; null for timeouts and network errors. */
export function httpStatusOf(err: unknown): number | null {
  if (err instanceof KubeTransportError) return null;
  if (err instanceof KubeHttpError) return err.status;
  if (typeof err === "object" && err !== null) {
    const e = err as { code?: unknown; statusCode?: unknown };
    if (typeof e.code === "number") return e.code;
    if (typeof e.statusCode === "number") return e.statusCode;
  }
  return null;
}

/** The Retry-After header of a throttled answer, in milliseconds (0: none). */
export function retryAfterMsOf(err: unknown): number {
  if (typeof err !== "object" || err === null) return 0;
  const headers = (err as { headers?: Record<string, string> }).headers;
  return parseRetryAfterMs(headers?.["retry-after"]);
}

/** A short human message: the apiserver's Status message when there is one. */
export function describeError(err: unknown): string {
  if (typeof err === "object" && err !== null) {
    const body = (err as { body?: unknown }).body;
    const status = httpStatusOf(err);
    const message = statusMessage(body);
    if (status !== null && message) return `HTTP ${status}: ${message}`;
    if (status !== null) return `HTTP ${status}`;
  }
  return err instanceof Error ? err.message : String(err);
}

/** The `message` of a Kubernetes Status body (object or JSON text), if any. */
export function statusMessage(body: unknown): string | null {
  let value = body;
  if (typeof body === "string") {
    try {
      value = JSON.parse(body);
    } catch {
      return body.trim() ? body.trim().slice(0, 500) : null;
    }
  }
  if (typeof value === "object" && value !== null && typeof (value as { message?: unknown }).message === "string") {
    return (value as { message: string }).message;
  }
  return null;
}
