/**
 * A fake Kubernetes API server for tests, speaking the real REST protocol over HTTP(S): get, list
 * and watch with resourceVersion (410 Expired after compaction), create and update with
 * optimistic concurrency (409), merge and JSON patch, delete, bearer-token auth, the KubeVirt
 * `stop` subresource, and fault injection (status codes, hangs). It is the one fake the project
 * allows; the collector talks to it through @kubernetes/client-node like to a real cluster.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import http from "node:http";
import https from "node:https";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Faults, reasonForStatus, type ActiveFault, type FaultSpec } from "./faults.js";
import {
  WorkstationSeeder,
  kubevirtController,
  parseStopBody,
  type SeededWorkstation,
  type VmiTermination,
  type WorkstationSeed,
} from "./kubevirt.js";
import { guestPowerOff, type GuestPowerOff } from "./guest-power.js";
import { startProvisioning, type ProvisioningOptions } from "./provisioning.js";
import { JsonPatchError, applyJsonPatch, applyMergePatch, type Json } from "./patch.js";
import { apiVersionOf, findResource, resourceByKind, type ResourceType } from "./resources.js";
import { SelectorError, matchesRequirements, parseFieldSelector, parseLabelSelector } from "./selectors.js";
import { ApiError, ObjectStore, notFound, type KubeObject, type StoredEvent } from "./store.js";
import { policyAllows, verbFor, type RbacPolicy, type RequestAttributes } from "./rbac.js";
import { validateEventsV1Event, validateLease } from "./validation.js";

export { ApiError, ObjectStore, resourceByKind };
export type {
  ActiveFault,
  FaultSpec,
  GuestPowerOff,
  KubeObject,
  RbacPolicy,
  SeededWorkstation,
  StoredEvent,
  WorkstationSeed,
};

export interface FakeKubeOptions {
  /** Bearer token clients must send (default "fake-kube-token"). */
  token?: string;
  /** Serve HTTPS with this key pair; the certificate is also the kubeconfig's CA. */
  tls?: { key: string; cert: string };
  /** Namespace of the kubeconfig context (default "ws-system"). */
  namespace?: string;
  /** How long the stand-in virt-controller takes to tear down a stopped VM's VMI (default 0). */
  stopDelayMs?: number;
  /**
   * Milliseconds per second of a VMI's terminationGracePeriodSeconds that a stopped VMI stays
   * terminating before it is gone (default 0: at once; the grace is recorded either way).
   */
  graceSecondMs?: number;
  /** Send a BOOKMARK this often on watches that allow them (default: never). */
  bookmarkIntervalMs?: number;
  /** Authorize every resource request against these RBAC rules (403 Forbidden otherwise). Default: allow all. */
  rbac?: RbacPolicy;
  /**
   * Stand-ins for CDI and virt-controller's start on creation: DataVolumes become Ready (with
   * their PVC) after importDelayMs, and a created VM gets its VMI once they are. Default: off.
   */
  provisioning?: ProvisioningOptions;
}

export interface RequestRecord {
  method: string;
  /** Path without the query string. */
  path: string;
  query: URLSearchParams;
  contentType: string | null;
  /** Parsed JSON body when it was JSON, else the raw text (empty string for none). */
  body: unknown;
  /** Response status; 0 when the client went away before an answer. */
  status: number;
  /** A fault answered (or delayed) this request. */
  faulted: boolean;
  /** The answer reached the client's connection (false: held or dropped by a fault, or client gone). */
  delivered: boolean;
  watch: boolean;
  /** performance.now() when the request arrived and when its answer was written (or abandoned). */
  receivedAtMs: number;
  answeredAtMs: number | null;
}

export interface FakeKube {
  readonly url: string;
  readonly token: string;
  /** A kubeconfig file (JSON, which YAML readers accept) pointing at this server. */
  readonly kubeconfigPath: string;
  readonly store: ObjectStore;
  readonly faults: { add(spec: FaultSpec): ActiveFault; clear(): void };
  /** Every request answered or abandoned, in arrival order. */
  readonly requests: RequestRecord[];
  /** Requests matching a method and a path substring or RegExp. */
  requestsMatching(method: string, pathPattern: string | RegExp): RequestRecord[];
  /** Watches currently streaming (only those whose path contains `pathPart`, when given). */
  openWatchCount(pathPart?: string): number;
  /** Ends every open watch stream, as an apiserver restart or a timeout would. */
  closeWatches(): void;
  /** Makes every resourceVersion handed out so far too old to watch from (410 Expired). */
  compact(): void;
  seedWorkstation(seed: WorkstationSeed): SeededWorkstation;
  /** Every VMI a stop tore down, with the terminationGracePeriodSeconds its guest was given. */
  readonly vmiTerminations: readonly VmiTermination[];
  startWorkstation(namespace: string, name: string, options?: { podIp?: string; extraPodIps?: string[] }): void;
  /** The guest shuts itself down; virt-controller then does what the VM's run strategy says. */
  guestPowerOff(namespace: string, name: string): GuestPowerOff;
  close(): Promise<void>;
}

const MAX_BODY_BYTES = 3 * 1024 * 1024;

interface Route {
  resource: ResourceType;
  namespace: string | undefined;
  name: string | undefined;
  subresource: string | undefined;
}

interface KubevirtSubresourceRoute {
  namespace: string;
  name: string;
  action: string;
}

function parsePath(pathname: string): Route | KubevirtSubresourceRoute | null {
  const parts = pathname
    .split("/")
    .filter((p) => p.length > 0)
    .map(decodeURIComponent);
  let group: string;
  let version: string;
  let rest: string[];
  if (parts[0] === "api" && parts.length >= 2) {
    group = "";
    version = parts[1]!;
    rest = parts.slice(2);
  } else if (parts[0] === "apis" && parts.length >= 3) {
    group = parts[1]!;
    version = parts[2]!;
    rest = parts.slice(3);
  } else {
    return null;
  }
  let namespace: string | undefined;
  if (rest[0] === "namespaces" && rest.length >= 3) {
    namespace = rest[1];
    rest = rest.slice(2);
  }
  if (group === "subresources.kubevirt.io" && version === "v1") {
    if (namespace !== undefined && rest.length === 3 && rest[0] === "virtualmachines") {
      return { namespace, name: rest[1]!, action: rest[2]! };
    }
    return null;
  }
  const resource = findResource(group, version, rest[0] ?? "");
  if (!resource || rest.length > 3) return null;
  return { resource, namespace, name: rest[1], subresource: rest[2] };
}

function attributesOf(method: string, pathname: string, watch: boolean): RequestAttributes | null {
  const route = parsePath(pathname);
  if (!route) return null;
  if ("action" in route) {
    return {
      verb: verbFor(method, true, false),
      group: "subresources.kubevirt.io",
      resource: `virtualmachines/${route.action}`,
      namespace: route.namespace,
      name: route.name,
    };
  }
  return {
    verb: verbFor(method, route.name !== undefined, watch),
    group: route.resource.group,
    resource: route.subresource ? `${route.resource.plural}/${route.subresource}` : route.resource.plural,
    namespace: route.namespace,
    name: route.name,
  };
}

function statusBody(err: ApiError): Record<string, unknown> {
  return {
    kind: "Status",
    apiVersion: "v1",
    metadata: {},
    status: "Failure",
    message: err.message,
    reason: err.reason,
    ...(err.details ? { details: err.details } : {}),
    code: err.code,
  };
}

export async function startFakeKube(options: FakeKubeOptions = {}): Promise<FakeKube> {
  const token = options.token ?? "fake-kube-token";
  const store = new ObjectStore();
  const faults = new Faults();
  const requests: RequestRecord[] = [];
  const kubevirt = kubevirtController(store, {
    stopDelayMs: options.stopDelayMs ?? 0,
    graceSecondMs: options.graceSecondMs ?? 0,
  });
  const seeder = new WorkstationSeeder(store);
  const provisioning = options.provisioning ? startProvisioning(store, seeder, options.provisioning) : undefined;
  const openWatches = new Map<http.ServerResponse, string>();

  const heldAnswers = new WeakMap<RequestRecord, number>();

  function send(
    res: http.ServerResponse,
    record: RequestRecord,
    status: number,
    body: unknown,
    headers: Record<string, string> = {},
  ): void {
    record.status = status;
    const hold = heldAnswers.get(record);
    if (hold !== undefined) {
      heldAnswers.delete(record);
      if (!Number.isFinite(hold)) return;
      const timer = setTimeout(() => send(res, record, status, body, headers), hold);
      res.on("close", () => clearTimeout(timer));
      return;
    }
    record.answeredAtMs = performance.now();
    if (res.destroyed || res.writableEnded) return;
    record.delivered = true;
    if (body === undefined) {
      res.writeHead(status, headers);
      res.end();
      return;
    }
    const text = JSON.stringify(body);
    res.writeHead(status, {
      "Content-Type": "application/json",
      "Content-Length": Buffer.byteLength(text),
      ...headers,
    });
    res.end(text);
  }

  function sendError(
    res: http.ServerResponse,
    record: RequestRecord,
    err: ApiError,
    headers: Record<string, string> = {},
  ): void {
    send(res, record, err.code, statusBody(err), headers);
  }

  function parseJsonBody(raw: string): Json {
    try {
      return JSON.parse(raw) as Json;
    } catch {
      throw new ApiError(400, "BadRequest", "the body of the request was in an unknown format");
    }
  }

  function validate(resource: ResourceType, obj: KubeObject): void {
    if (resource.kind === "Event") validateEventsV1Event(obj);
    if (resource.kind === "Lease") validateLease(obj);
  }

  function asObject(json: Json, resource: ResourceType): KubeObject {
    if (typeof json !== "object" || json === null || Array.isArray(json)) {
      throw new ApiError(400, "BadRequest", "the body of the request was in an unknown format");
    }
    const obj = json as unknown as KubeObject;
    if (typeof obj.metadata !== "object" || obj.metadata === null) obj.metadata = {};
    if (obj.kind !== undefined && obj.kind !== resource.kind) {
      throw new ApiError(
        400,
        "BadRequest",
        `the API version in the data (${String(obj.apiVersion)}) does not match the expected API version (${apiVersionOf(resource)})`,
      );
    }
    return obj;
  }

  function serveWatch(
    req: http.IncomingMessage,
    res: http.ServerResponse,
    record: RequestRecord,
    route: Route,
    query: URLSearchParams,
  ): void {
    const labels = parseLabelSelector(query.get("labelSelector"));
    const fields = parseFieldSelector(query.get("fieldSelector"));
    const rvParam = query.get("resourceVersion") ?? "";
    if (rvParam !== "" && !/^\d+$/.test(rvParam)) {
      throw new ApiError(400, "BadRequest", `invalid resource version: ${JSON.stringify(rvParam)}`);
    }
    const matches = (obj: KubeObject | null): boolean => {
      if (!obj) return false;
      if (route.namespace !== undefined && obj.metadata.namespace !== route.namespace) return false;
      if (!matchesRequirements(obj.metadata.labels, labels)) return false;
      return fields.every((f) => {
        const actual = f.field === "metadata.name" ? obj.metadata.name : obj.metadata.namespace;
        return f.negate ? actual !== f.value : actual === f.value;
      });
    };
    record.status = 200;
    record.delivered = true;
    record.answeredAtMs = performance.now();
    res.writeHead(200, { "Content-Type": "application/json", "Transfer-Encoding": "chunked" });
    // The apiserver flushes the headers at once: a watch with nothing to say yet is still open,
    // and a client waiting for headers (client-node gives up after 30 s) must not time out.
    res.flushHeaders();
    openWatches.set(res, new URL(req.url ?? "/", "http://fake-kube").pathname);
    const write = (type: string, object: unknown) => {
      if (!res.destroyed && !res.writableEnded) res.write(`${JSON.stringify({ type, object })}\n`);
    };
    const emit = (event: StoredEvent) => {
      if (event.resource !== route.resource) return;
      const now = matches(event.object);
      const before = event.type === "MODIFIED" ? matches(event.previous) : event.type === "DELETED";
      if (event.type === "ADDED" && now) write("ADDED", event.object);
      else if (event.type === "MODIFIED") {
        if (now && before) write("MODIFIED", event.object);
        else if (now) write("ADDED", event.object);
        else if (before) write("DELETED", event.object);
      } else if (event.type === "DELETED" && now) write("DELETED", event.object);
    };
    const timers: NodeJS.Timeout[] = [];
    let unsubscribe = () => {};
    const finish = () => {
      unsubscribe();
      for (const t of timers) clearTimeout(t);
      openWatches.delete(res);
      if (!res.writableEnded) res.end();
    };
    // Not req's "close": a consumed request emits it at once; the response's marks the client leaving.
    res.on("close", finish);

    const requested = rvParam === "" || rvParam === "0" ? null : Number(rvParam);
    if (requested !== null && requested < store.compactedResourceVersion()) {
      write("ERROR", {
        kind: "Status",
        apiVersion: "v1",
        metadata: {},
        status: "Failure",
        message: `too old resource version: ${requested} (${store.compactedResourceVersion()})`,
        reason: "Expired",
        code: 410,
      });
      finish();
      return;
    }
    if (requested === null) {
      for (const obj of store.list(route.resource, route.namespace)) if (matches(obj)) write("ADDED", obj);
    } else {
      for (const event of store.eventsSince(requested)) emit(event);
    }
    unsubscribe = store.subscribe(emit);
    const timeoutSeconds = Number(query.get("timeoutSeconds") ?? "0");
    if (timeoutSeconds > 0) timers.push(setTimeout(finish, timeoutSeconds * 1000));
    if (options.bookmarkIntervalMs && query.get("allowWatchBookmarks") === "true") {
      const tick = () => {
        write("BOOKMARK", {
          kind: route.resource.kind,
          apiVersion: apiVersionOf(route.resource),
          metadata: { resourceVersion: String(store.currentResourceVersion()) },
        });
        timers.push(setTimeout(tick, options.bookmarkIntervalMs));
      };
      timers.push(setTimeout(tick, options.bookmarkIntervalMs));
    }
  }

  function applyPatch(route: Route, current: KubeObject, contentType: string, raw: string): KubeObject {
    const type = contentType.split(";")[0]!.trim().toLowerCase();
    const patch = parseJsonBody(raw);
    let patched: Json;
    if (type === "application/merge-patch+json") {
      patched = applyMergePatch(current as unknown as Json, patch);
    } else if (type === "application/json-patch+json") {
      try {
        patched = applyJsonPatch(current as unknown as Json, patch);
      } catch (err) {
        if (err instanceof JsonPatchError) throw new ApiError(422, "Invalid", err.message);
        throw err;
      }
    } else if (type === "application/strategic-merge-patch+json" && route.resource.group !== "kubevirt.io") {
      // Strategic merge is plain merge for every field this fake's built-in types use.
      patched = applyMergePatch(current as unknown as Json, patch);
    } else {
      throw new ApiError(
        415,
        "UnsupportedMediaType",
        `the media type "${type}" is not supported for ${route.resource.plural}`,
      );
    }
    const obj = asObject(patched, route.resource);
    obj.metadata.name = current.metadata.name;
    obj.metadata.namespace = current.metadata.namespace;
    return obj;
  }

  function serve(
    req: http.IncomingMessage,
    res: http.ServerResponse,
    record: RequestRecord,
    raw: string,
    url: URL,
  ): void {
    const method = (req.method ?? "GET").toUpperCase();
    const route = parsePath(url.pathname);
    if (!route) throw new ApiError(404, "NotFound", "the server could not find the requested resource");
    if ("action" in route) {
      if (route.action !== "stop")
        throw new ApiError(404, "NotFound", "the server could not find the requested resource");
      if (method !== "PUT")
        throw new ApiError(405, "MethodNotAllowed", `the server does not allow this method on the requested resource`);
      kubevirt.stop(route.namespace, route.name, parseStopBody(raw));
      send(res, record, 202, undefined);
      return;
    }
    const { resource, namespace, name, subresource } = route;
    if (subresource !== undefined && subresource !== "status") {
      throw new ApiError(404, "NotFound", "the server could not find the requested resource");
    }
    if (name === undefined) {
      if (method === "GET") {
        if (record.watch) return serveWatch(req, res, record, route, url.searchParams);
        const labels = parseLabelSelector(url.searchParams.get("labelSelector"));
        const fields = parseFieldSelector(url.searchParams.get("fieldSelector"));
        const items = store.list(resource, namespace).filter(
          (o) =>
            matchesRequirements(o.metadata.labels, labels) &&
            fields.every((f) => {
              const actual = f.field === "metadata.name" ? o.metadata.name : o.metadata.namespace;
              return f.negate ? actual !== f.value : actual === f.value;
            }),
        );
        send(res, record, 200, {
          kind: resource.listKind,
          apiVersion: apiVersionOf(resource),
          metadata: { resourceVersion: String(store.currentResourceVersion()) },
          items,
        });
        return;
      }
      if (method === "POST") {
        if (namespace === undefined) throw new ApiError(405, "MethodNotAllowed", "create needs a namespace");
        const obj = asObject(parseJsonBody(raw), resource);
        obj.metadata.namespace = obj.metadata.namespace ?? namespace;
        validate(resource, obj);
        send(res, record, 201, store.create(resource, obj, namespace));
        return;
      }
      throw new ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource");
    }
    const current = store.get(resource, namespace, name);
    switch (method) {
      case "GET":
        if (!current) throw notFound(resource, name);
        send(res, record, 200, current);
        return;
      case "PUT": {
        const obj = asObject(parseJsonBody(raw), resource);
        if (obj.metadata.name !== undefined && obj.metadata.name !== name) {
          throw new ApiError(400, "BadRequest", "the name of the object does not match the name on the URL");
        }
        obj.metadata.name = name;
        obj.metadata.namespace = namespace;
        if (!current) throw notFound(resource, name);
        if (subresource === "status") {
          const next = {
            ...current,
            status: obj["status"],
            metadata: { ...current.metadata, resourceVersion: obj.metadata.resourceVersion },
          };
          send(res, record, 200, store.update(resource, next));
          return;
        }
        validate(resource, obj);
        send(res, record, 200, store.update(resource, obj, { keepStatus: true }));
        return;
      }
      case "PATCH": {
        if (!current) throw notFound(resource, name);
        const patched = applyPatch(route, current, String(req.headers["content-type"] ?? ""), raw);
        if (subresource === "status") {
          const next = {
            ...current,
            status: patched["status"],
            metadata: { ...current.metadata, resourceVersion: patched.metadata.resourceVersion },
          };
          send(res, record, 200, store.update(resource, next));
          return;
        }
        validate(resource, patched);
        send(res, record, 200, store.update(resource, patched, { keepStatus: true }));
        return;
      }
      case "DELETE":
        if (subresource !== undefined) throw new ApiError(405, "MethodNotAllowed", "cannot delete a subresource");
        send(res, record, 200, store.delete(resource, namespace, name));
        return;
      default:
        throw new ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource");
    }
  }

  function handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    const url = new URL(req.url ?? "/", "http://fake-kube");
    const method = (req.method ?? "GET").toUpperCase();
    const chunks: Buffer[] = [];
    let size = 0;
    let tooLarge = false;
    req.on("data", (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) tooLarge = true;
      else chunks.push(chunk);
    });
    req.on("end", () => {
      const raw = Buffer.concat(chunks).toString("utf8");
      const contentType = req.headers["content-type"] ?? null;
      let body: unknown = raw;
      if (raw !== "") {
        try {
          body = JSON.parse(raw);
        } catch {
          body = raw;
        }
      }
      const watchParam = url.searchParams.get("watch");
      const record: RequestRecord = {
        method,
        path: url.pathname,
        query: url.searchParams,
        contentType,
        body,
        status: 0,
        faulted: false,
        delivered: false,
        watch: method === "GET" && (watchParam === "true" || watchParam === "1"),
        receivedAtMs: performance.now(),
        answeredAtMs: null,
      };
      requests.push(record);
      if (tooLarge) {
        sendError(res, record, new ApiError(413, "RequestEntityTooLarge", "request is too large"));
        return;
      }
      if (req.headers["authorization"] !== `Bearer ${token}`) {
        sendError(res, record, new ApiError(401, "Unauthorized", "Unauthorized"));
        return;
      }
      if (options.rbac) {
        const attributes = attributesOf(method, url.pathname, record.watch);
        if (attributes && !policyAllows(options.rbac, attributes)) {
          const where = attributes.namespace ? ` in the namespace "${attributes.namespace}"` : " at the cluster scope";
          const target = attributes.name ? ` "${attributes.name}"` : "";
          sendError(
            res,
            record,
            new ApiError(
              403,
              "Forbidden",
              `${attributes.resource}${attributes.group ? `.${attributes.group}` : ""}${target} is forbidden: cannot ${attributes.verb} resource "${attributes.resource}" in API group "${attributes.group}"${where}`,
            ),
          );
          return;
        }
      }
      const fault = faults.take(method, url.pathname + url.search);
      const proceed = () => {
        if (res.destroyed || res.writableEnded) return;
        if (fault?.status !== undefined) {
          const headers: Record<string, string> =
            fault.retryAfter !== undefined ? { "Retry-After": String(fault.retryAfter) } : {};
          sendError(
            res,
            record,
            new ApiError(
              fault.status,
              reasonForStatus(fault.status),
              fault.message ?? `injected fault ${fault.status}`,
            ),
            headers,
          );
          return;
        }
        try {
          serve(req, res, record, raw, url);
        } catch (err) {
          if (err instanceof ApiError) sendError(res, record, err);
          else if (err instanceof SelectorError) sendError(res, record, new ApiError(400, "BadRequest", err.message));
          else
            sendError(
              res,
              record,
              new ApiError(500, "InternalError", err instanceof Error ? err.message : String(err)),
            );
        }
      };
      if (fault) record.faulted = true;
      if (fault?.afterProcessing && fault.hangMs !== undefined) {
        heldAnswers.set(record, fault.hangMs);
        proceed();
        return;
      }
      if (fault?.hangMs !== undefined) {
        const abandon = () => {
          if (record.answeredAtMs === null) record.answeredAtMs = performance.now();
        };
        if (Number.isFinite(fault.hangMs)) {
          const timer = setTimeout(proceed, fault.hangMs);
          res.on("close", () => {
            clearTimeout(timer);
            abandon();
          });
        } else {
          res.on("close", abandon);
        }
        return;
      }
      proceed();
    });
  }

  const server = options.tls
    ? https.createServer({ key: options.tls.key, cert: options.tls.cert }, handle)
    : http.createServer(handle);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  const url = `${options.tls ? "https" : "http"}://127.0.0.1:${port}`;

  const dir = mkdtempSync(join(tmpdir(), "fake-kube-"));
  const kubeconfigPath = join(dir, "kubeconfig");
  const cluster: Record<string, unknown> = { server: url };
  if (options.tls) cluster["certificate-authority-data"] = Buffer.from(options.tls.cert).toString("base64");
  else cluster["insecure-skip-tls-verify"] = true;
  writeFileSync(
    kubeconfigPath,
    JSON.stringify({
      apiVersion: "v1",
      kind: "Config",
      clusters: [{ name: "fake", cluster }],
      users: [{ name: "fake", user: { token } }],
      contexts: [
        { name: "fake", context: { cluster: "fake", user: "fake", namespace: options.namespace ?? "ws-system" } },
      ],
      "current-context": "fake",
    }),
  );

  return {
    url,
    token,
    kubeconfigPath,
    store,
    faults,
    requests,
    requestsMatching(method, pathPattern) {
      return requests.filter(
        (r) =>
          r.method === method.toUpperCase() &&
          (typeof pathPattern === "string" ? r.path.includes(pathPattern) : pathPattern.test(r.path)),
      );
    },
    openWatchCount: (pathPart) =>
      [...openWatches.values()].filter((p) => pathPart === undefined || p.includes(pathPart)).length,
    closeWatches() {
      for (const res of [...openWatches.keys()]) res.end();
    },
    compact: () => store.compact(),
    seedWorkstation: (seed) => seeder.seed(seed),
    vmiTerminations: kubevirt.terminations,
    startWorkstation(namespace, name, startOptions) {
      seeder.start(namespace, name, startOptions);
    },
    guestPowerOff: (namespace, name) => guestPowerOff(store, seeder, namespace, name),
    async close() {
      kubevirt.close();
      provisioning?.close();
      for (const res of [...openWatches.keys()]) res.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
