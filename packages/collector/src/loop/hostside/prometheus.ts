// A client for Prometheus' HTTP query API (GET /api/v1/query): the one way the
// collector reads host-side evidence. A configured base URL, an optional
// bearer token file (read at each query, so a rotated token is picked up), an
// optional CA bundle; a deadline per query and a cap on the response size, so
// a slow or huge answer costs a bounded wait and bounded memory, and becomes
// an error the caller turns into missing data.
import { readFileSync } from "node:fs";
import http from "node:http";
import https from "node:https";
import { errorMessage } from "@ws/protocol";

export interface PrometheusClientOptions {
  /** Base URL, e.g. https://prometheus-k8s.monitoring.svc:9091 (a path prefix is kept). */
  url: string;
  /** File holding a bearer token (a projected ServiceAccount token, for kube-rbac-proxy in front of Prometheus). */
  bearerTokenFile?: string;
  /** PEM CA bundle that signs Prometheus' certificate (default: the system's). */
  caFile?: string;
  timeoutMs: number;
  maxResponseBytes: number;
}

export interface VectorSample {
  metric: Record<string, string>;
  /** As Prometheus wrote it: NaN and ±Inf are kept (queries.ts judges them impossible, never skips them). */
  value: number;
  /** The sample's time (an instant query's is its evaluation time); NaN when it was not a number. */
  timestampMs?: number;
}

export class PrometheusQueryError extends Error {
  override name = "PrometheusQueryError";
}

export interface PrometheusClient {
  /** An instant query evaluated at `atMs`; resolves with the vector, rejects with a PrometheusQueryError saying why. */
  query(expr: string, atMs: number): Promise<VectorSample[]>;
  /** Where it queries, without credentials (for logs and the page). */
  readonly endpoint: string;
}

export function prometheusClient(options: PrometheusClientOptions): PrometheusClient {
  const base = new URL(options.url);
  if (base.protocol !== "http:" && base.protocol !== "https:")
    throw new PrometheusQueryError(`hostSide.prometheus.url must be http:// or https://, not ${base.protocol}`);
  if (base.username || base.password)
    throw new PrometheusQueryError("hostSide.prometheus.url must not carry credentials: use bearerTokenFile");
  const ca = options.caFile ? readFileSync(options.caFile) : undefined;
  const endpoint = `${base.origin}${base.pathname.replace(/\/$/, "")}`;
  return {
    endpoint,
    query(expr, atMs) {
      const target = new URL(`${endpoint}/api/v1/query`);
      target.searchParams.set("query", expr);
      target.searchParams.set("time", (atMs / 1000).toFixed(3));
      target.searchParams.set("timeout", `${Math.max(1, Math.floor(options.timeoutMs / 1000))}s`);
      const headers: Record<string, string> = { accept: "application/json" };
      if (options.bearerTokenFile) {
        let token: string;
        try {
          token = readFileSync(options.bearerTokenFile, "utf8").trim();
        } catch (error) {
          return Promise.reject(new PrometheusQueryError(`cannot read the bearer token file: ${errorMessage(error)}`));
        }
        headers.authorization = `Bearer ${token}`;
      }
      return get(target, headers, ca, options).then((body) => parseVector(body.status, body.text));
    },
  };
}

function get(
  target: URL,
  headers: Record<string, string>,
  ca: Buffer | undefined,
  options: PrometheusClientOptions,
): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const fail = (message: string) => reject(new PrometheusQueryError(message));
    const request = (target.protocol === "https:" ? https : http).request(
      target,
      { method: "GET", headers, ...(ca ? { ca } : {}), timeout: options.timeoutMs },
      (response) => {
        const chunks: Buffer[] = [];
        let size = 0;
        response.on("data", (chunk: Buffer) => {
          size += chunk.length;
          if (size > options.maxResponseBytes) {
            request.destroy();
            fail(`the answer is larger than ${options.maxResponseBytes} bytes (hostSide.prometheus.maxResponseBytes)`);
            return;
          }
          chunks.push(chunk);
        });
        response.on("end", () =>
          resolve({ status: response.statusCode ?? 0, text: Buffer.concat(chunks).toString("utf8") }),
        );
        response.on("error", (error) => fail(errorMessage(error)));
      },
    );
    const deadline = setTimeout(() => {
      request.destroy();
      fail(`no answer within ${options.timeoutMs} ms (hostSide.prometheus.timeout)`);
    }, options.timeoutMs);
    request.on("timeout", () => request.destroy(new Error(`no answer within ${options.timeoutMs} ms`)));
    request.on("error", (error) => fail(errorMessage(error)));
    request.on("close", () => clearTimeout(deadline));
    request.end();
  });
}

/** Prometheus' sample value ("1.5", "NaN", "+Inf", "-Inf") as a number; anything else is NaN. */
export function promNumber(text: unknown): number {
  if (text === "+Inf") return Number.POSITIVE_INFINITY;
  if (text === "-Inf") return Number.NEGATIVE_INFINITY;
  return typeof text === "string" && text.trim() !== "" ? Number(text) : Number.NaN;
}

/** Parses an API answer; every way it can be wrong becomes a PrometheusQueryError with what Prometheus said. */
export function parseVector(status: number, text: string): VectorSample[] {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw new PrometheusQueryError(`HTTP ${status}: not a Prometheus API answer (${text.slice(0, 120).trim()})`);
  }
  const object = (typeof body === "object" && body !== null ? body : {}) as Record<string, unknown>;
  if (object.status !== "success" || status < 200 || status > 299) {
    const kind = typeof object.errorType === "string" ? `${object.errorType}: ` : "";
    const error = typeof object.error === "string" ? object.error.slice(0, 300) : "no error message";
    throw new PrometheusQueryError(`HTTP ${status}: ${kind}${error}`);
  }
  const data = object.data as { resultType?: unknown; result?: unknown } | undefined;
  if (data?.resultType !== "vector" || !Array.isArray(data.result))
    throw new PrometheusQueryError(`expected an instant vector, got ${String(data?.resultType)}`);
  const samples: VectorSample[] = [];
  for (const entry of data.result as Array<{ metric?: unknown; value?: unknown }>) {
    const metric = entry?.metric;
    const value = entry?.value;
    if (typeof metric !== "object" || metric === null || !Array.isArray(value) || value.length !== 2) continue;
    // "NaN", "+Inf", "-Inf" or garbage stay in as a non-finite value: dropping them would make
    // the VM's series look absent, and a reading that cannot be true must fail the VM instead.
    samples.push({
      metric: metric as Record<string, string>,
      value: promNumber(value[1]),
      timestampMs: Number(value[0]) * 1000,
    });
  }
  return samples;
}
