/**
 * Pure parsers for what Jupyter writes and answers: runtime files (jpserver-PID.json,
 * nbserver-PID.json), /api/kernels, /api/terminals, /api/status, /api. Every time Jupyter
 * reports becomes an age against the `nowMs` passed in; nothing here reads a clock.
 */
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { JupyterKernelSchema, JupyterTerminalSchema } from "@ws/protocol";

export type KernelInit = MessageInitShape<typeof JupyterKernelSchema>;
export type TerminalInit = MessageInitShape<typeof JupyterTerminalSchema>;

/** The fields of a runtime file the agent uses; both jupyter_server and notebook 6 write them. */
export interface RuntimeInfo {
  url?: string;
  hostname?: string;
  port?: number;
  secure: boolean;
  baseUrl: string;
  /** Unix socket path (jupyter_server --sock); empty when it listens on TCP. */
  sock: string;
  token: string;
  pid?: number;
  version?: string;
}

/** Where and how to query one server. */
export interface JupyterEndpoint {
  /** Shown in reports: the base URL (base_url included, trailing slash), never the token. */
  url: string;
  protocol: "http:" | "https:";
  host: string;
  port: number;
  socketPath?: string;
  /** base_url with leading and trailing slash. */
  basePath: string;
  token: string;
  /** Local servers make their own certificates; remote configured ones must present a valid one. */
  acceptSelfSigned: boolean;
}

const RUNTIME_FILE_NAME = /^(?:jp|nb)server-(\d+)\.json$/;

/** The pid a runtime file's name carries, or undefined if the name is not a runtime file's. */
export function runtimeFilePid(fileName: string): number | undefined {
  const match = RUNTIME_FILE_NAME.exec(fileName);
  return match ? Number(match[1]) : undefined;
}

export function isRuntimeFileName(fileName: string): boolean {
  return RUNTIME_FILE_NAME.test(fileName);
}

export function parseRuntimeFile(text: string): RuntimeInfo {
  const info = parseJsonObject(text, "runtime file");
  const port = optionalInteger(info.port);
  const sock = optionalString(info.sock) ?? "";
  const url = optionalString(info.url);
  if (port === undefined && sock === "" && url === undefined) {
    throw new Error("runtime file: no port, sock or url: not a Jupyter server's runtime file");
  }
  const result: RuntimeInfo = {
    secure: info.secure === true,
    baseUrl: normaliseBasePath(optionalString(info.base_url) ?? "/"),
    sock,
    token: optionalString(info.token) ?? "",
  };
  if (url !== undefined) result.url = url;
  const hostname = optionalString(info.hostname);
  if (hostname !== undefined) result.hostname = hostname;
  if (port !== undefined) result.port = port;
  const pid = optionalInteger(info.pid);
  if (pid !== undefined && pid > 0) result.pid = pid;
  const version = optionalString(info.version);
  if (version !== undefined) result.version = version;
  return result;
}

const WILDCARD_HOSTS = new Set(["", "0.0.0.0", "*"]);

/**
 * Where to reach the server a runtime file describes. The agent runs on the same machine, so
 * a server bound to every address (its url then names the machine's hostname, which may not
 * resolve) is reached on loopback.
 */
export function endpointFromRuntime(info: RuntimeInfo): JupyterEndpoint {
  const protocol = info.secure ? "https:" : "http:";
  const common = { protocol, basePath: info.baseUrl, token: info.token, acceptSelfSigned: true } as const;
  if (info.sock !== "") {
    const url = `http+unix://${encodeURIComponent(info.sock)}${info.baseUrl}`;
    return { ...common, protocol: "http:", url, host: "localhost", port: 0, socketPath: info.sock };
  }
  let host = info.hostname;
  let port = info.port;
  if ((host === undefined || port === undefined) && info.url !== undefined) {
    const fromUrl = tryUrl(info.url);
    host ??= fromUrl?.hostname.replace(/^\[|\]$/g, "");
    port ??= fromUrl ? Number(fromUrl.port || (fromUrl.protocol === "https:" ? 443 : 80)) : undefined;
  }
  if (port === undefined || port <= 0 || port > 65535) {
    throw new Error(`runtime file: no usable port (${String(port)})`);
  }
  if (host === undefined || WILDCARD_HOSTS.has(host)) host = "127.0.0.1";
  else if (host === "::") host = "::1";
  const hostInUrl = host.includes(":") ? `[${host}]` : host;
  return { ...common, url: `${protocol}//${hostInUrl}:${port}${info.baseUrl}`, host, port };
}

/**
 * A URL from the agent's configuration, e.g. http://127.0.0.1:8888/user/alice/?token=abc.
 * The token travels in the query as Jupyter prints it; it is moved to the Authorization header.
 */
export function parseConfiguredUrl(text: string): JupyterEndpoint {
  const url = tryUrl(text.trim());
  if (!url) throw new Error(`jupyter url ${JSON.stringify(text)}: not a URL`);
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw new Error(`jupyter url ${JSON.stringify(text)}: scheme must be http or https, not ${url.protocol}`);
  }
  const token = url.searchParams.get("token") ?? "";
  const basePath = normaliseBasePath(url.pathname);
  const host = url.hostname.replace(/^\[|\]$/g, "");
  const port = Number(url.port || (url.protocol === "https:" ? 443 : 80));
  return {
    url: `${url.protocol}//${url.host}${basePath}`,
    protocol: url.protocol,
    host,
    port,
    basePath,
    token,
    acceptSelfSigned: isLoopbackHost(host),
  };
}

export function isLoopbackHost(host: string): boolean {
  return host === "localhost" || host === "::1" || /^127(?:\.\d{1,3}){3}$/.test(host);
}

export function parseKernels(json: string, nowMs: number): KernelInit[] {
  return parseJsonArray(json, "api/kernels").map((entry, index) => {
    const kernel = asObject(entry, `api/kernels[${index}]`);
    const result: KernelInit = {
      id: optionalString(kernel.id) ?? "",
      name: optionalString(kernel.name) ?? "",
      executionState: optionalString(kernel.execution_state) ?? "unknown",
      connections: nonNegativeInteger(kernel.connections),
    };
    const age = activityAge(kernel.last_activity, nowMs);
    if (age !== undefined) result.lastActivityAgeSeconds = age;
    return result;
  });
}

export function parseTerminals(json: string, nowMs: number): TerminalInit[] {
  return parseJsonArray(json, "api/terminals").map((entry, index) => {
    const terminal = asObject(entry, `api/terminals[${index}]`);
    const result: TerminalInit = { name: optionalString(terminal.name) ?? "" };
    const age = activityAge(terminal.last_activity, nowMs);
    if (age !== undefined) result.lastActivityAgeSeconds = age;
    return result;
  });
}

export interface ServerStatus {
  /** The server's own last activity: any API call, kernel message or terminal I/O. */
  lastActivityAgeSeconds?: number;
  startedAgeSeconds?: number;
  connections: number;
  kernels: number;
}

export function parseStatus(json: string, nowMs: number): ServerStatus {
  const status = parseJsonObject(json, "api/status");
  const result: ServerStatus = {
    connections: nonNegativeInteger(status.connections),
    kernels: nonNegativeInteger(status.kernels),
  };
  const lastActivity = activityAge(status.last_activity, nowMs);
  if (lastActivity !== undefined) result.lastActivityAgeSeconds = lastActivity;
  const started = activityAge(status.started, nowMs);
  if (started !== undefined) result.startedAgeSeconds = started;
  return result;
}

/** GET /api answers {"version": "…"} without authentication. */
export function parseApiInfo(json: string): { version: string } {
  return { version: optionalString(parseJsonObject(json, "api").version) ?? "" };
}

const ISO_TIME = /^(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(Z|[+-]\d{2}:?\d{2})?$/;

/**
 * Jupyter's isoformat(): microseconds and "Z" (jupyter_server) or "+00:00" (notebook 6).
 * A time without a zone is UTC, which is what Jupyter means by it.
 */
export function parseJupyterTime(text: string): number | undefined {
  const match = ISO_TIME.exec(text.trim());
  if (!match) return undefined;
  const [, year, month, day, hour, minute, second, fraction, zone] = match;
  const ms = fraction ? Math.floor(Number(`0.${fraction}`) * 1000) : 0;
  let time = Date.UTC(Number(year), Number(month) - 1, Number(day), Number(hour), Number(minute), Number(second), ms);
  if (zone && zone !== "Z") {
    const sign = zone.startsWith("-") ? -1 : 1;
    const digits = zone.slice(1).replace(":", "");
    time -= sign * (Number(digits.slice(0, 2)) * 60 + Number(digits.slice(2))) * 60_000;
  }
  return Number.isFinite(time) ? time : undefined;
}

function activityAge(value: unknown, nowMs: number): number | undefined {
  if (typeof value !== "string") return undefined;
  const time = parseJupyterTime(value);
  return time === undefined ? undefined : Math.max(0, (nowMs - time) / 1000);
}

function normaliseBasePath(path: string): string {
  const withLeading = path.startsWith("/") ? path : `/${path}`;
  return withLeading.endsWith("/") ? withLeading : `${withLeading}/`;
}

function tryUrl(text: string): URL | undefined {
  try {
    return new URL(text);
  } catch {
    return undefined;
  }
}

function parseJson(text: string, what: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    // Neither the text nor V8's message (which quotes the text) goes into the error: a runtime
    // file may be a link to a root-only file, and errors travel into Reports and logs.
    throw new Error(`${what}: not JSON (${text.length} characters)`);
  }
}

function parseJsonObject(text: string, what: string): Record<string, unknown> {
  return asObject(parseJson(text, what), what);
}

function parseJsonArray(text: string, what: string): unknown[] {
  const value = parseJson(text, what);
  if (!Array.isArray(value)) throw new Error(`${what}: expected a JSON list, got ${describe(value)}`);
  return value;
}

function asObject(value: unknown, what: string): Record<string, unknown> {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new Error(`${what}: expected a JSON object, got ${describe(value)}`);
  }
  return value as Record<string, unknown>;
}

function describe(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "a list";
  // The kind only, never the value: see parseJson.
  return typeof value === "object" ? "an object" : `a ${typeof value}`;
}

function optionalString(value: unknown): string | undefined {
  return typeof value === "string" ? value : undefined;
}

function optionalInteger(value: unknown): number | undefined {
  return typeof value === "number" && Number.isInteger(value) ? value : undefined;
}

function nonNegativeInteger(value: unknown): number {
  const integer = optionalInteger(value);
  return integer !== undefined && integer >= 0 ? integer : 0;
}
