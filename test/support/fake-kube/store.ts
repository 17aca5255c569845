/**
 * The object store behind the fake API server: one global resourceVersion counter, every change
 * kept in a history so watches can resume from any resourceVersion newer than the compaction
 * point, and optimistic concurrency on updates.
 */
import { randomUUID } from "node:crypto";
import { jsonEqual } from "./patch.js";
import { apiVersionOf, qualifiedResource, type ResourceType } from "./resources.js";

export interface ObjectMeta {
  name?: string;
  generateName?: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  generation?: number;
  creationTimestamp?: string;
  deletionTimestamp?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  ownerReferences?: Array<Record<string, unknown>>;
  [key: string]: unknown;
}

export interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata: ObjectMeta;
  [key: string]: unknown;
}

export type WatchEventType = "ADDED" | "MODIFIED" | "DELETED";

export interface StoredEvent {
  rv: number;
  resource: ResourceType;
  type: WatchEventType;
  object: KubeObject;
  /** The object before this change (null for ADDED): lets label-filtered watches see objects leave. */
  previous: KubeObject | null;
}

/** An apiserver error, turned into a `Status` response by the server. */
export class ApiError extends Error {
  constructor(
    readonly code: number,
    readonly reason: string,
    message: string,
    readonly details?: Record<string, unknown>,
  ) {
    super(message);
  }
}

export function notFound(r: ResourceType, name: string): ApiError {
  return new ApiError(404, "NotFound", `${qualifiedResource(r)} "${name}" not found`, {
    name,
    group: r.group,
    kind: r.plural,
  });
}

export function conflict(r: ResourceType, name: string, why: string): ApiError {
  return new ApiError(409, "Conflict", `Operation cannot be fulfilled on ${qualifiedResource(r)} "${name}": ${why}`, {
    name,
    group: r.group,
    kind: r.plural,
  });
}

const STALE = "the object has been modified; please apply your changes to the latest version and try again";

function key(namespace: string | undefined, name: string): string {
  return `${namespace ?? ""}/${name}`;
}

export class ObjectStore {
  private revision = 1000;
  private compactedRevision = 0;
  private readonly objects = new Map<ResourceType, Map<string, KubeObject>>();
  private readonly history: StoredEvent[] = [];
  private readonly listeners = new Set<(event: StoredEvent) => void>();

  currentResourceVersion(): number {
    return this.revision;
  }

  /** Watches that start at or below this resourceVersion get 410 Expired. */
  compactedResourceVersion(): number {
    return this.compactedRevision;
  }

  /** Forgets the history: every resourceVersion handed out so far becomes too old to watch from. */
  compact(): void {
    this.compactedRevision = this.revision;
    this.history.length = 0;
  }

  eventsSince(rv: number): StoredEvent[] {
    return this.history.filter((e) => e.rv > rv);
  }

  subscribe(listener: (event: StoredEvent) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  get(r: ResourceType, namespace: string | undefined, name: string): KubeObject | undefined {
    const found = this.bucket(r).get(key(namespace, name));
    return found ? structuredClone(found) : undefined;
  }

  list(r: ResourceType, namespace?: string): KubeObject[] {
    return [...this.bucket(r).values()]
      .filter((o) => namespace === undefined || o.metadata.namespace === namespace)
      .sort((a, b) =>
        key(a.metadata.namespace, a.metadata.name ?? "").localeCompare(
          key(b.metadata.namespace, b.metadata.name ?? ""),
        ),
      )
      .map((o) => structuredClone(o));
  }

  create(r: ResourceType, input: KubeObject, namespace?: string): KubeObject {
    const obj = structuredClone(input);
    obj.metadata = { ...(obj.metadata ?? {}) };
    if (namespace !== undefined) {
      if (obj.metadata.namespace !== undefined && obj.metadata.namespace !== namespace) {
        throw new ApiError(
          400,
          "BadRequest",
          "the namespace of the provided object does not match the namespace sent on the request",
        );
      }
      obj.metadata.namespace = namespace;
    }
    if (!obj.metadata.name) {
      if (!obj.metadata.generateName) {
        throw new ApiError(
          422,
          "Invalid",
          `${r.kind} "" is invalid: metadata.name: Required value: name or generateName is required`,
        );
      }
      obj.metadata.name = obj.metadata.generateName + randomUUID().replace(/-/g, "").slice(0, 5);
    }
    const name = obj.metadata.name;
    if (this.bucket(r).has(key(obj.metadata.namespace, name))) {
      throw new ApiError(409, "AlreadyExists", `${qualifiedResource(r)} "${name}" already exists`, {
        name,
        group: r.group,
        kind: r.plural,
      });
    }
    obj.apiVersion = apiVersionOf(r);
    obj.kind = r.kind;
    obj.metadata.uid = randomUUID();
    obj.metadata.creationTimestamp = new Date().toISOString().replace(/\.\d+Z$/, "Z");
    if (r.tracksGeneration) obj.metadata.generation = 1;
    delete obj.metadata.deletionTimestamp;
    return this.commit(r, "ADDED", obj, null);
  }

  /**
   * Replaces an object. A resourceVersion in the new object is a precondition (409 when stale);
   * without one the update is unconditional, as the apiserver allows for these resources.
   */
  update(r: ResourceType, input: KubeObject, options: { keepStatus?: boolean } = {}): KubeObject {
    const name = input.metadata?.name;
    if (!name) throw new ApiError(422, "Invalid", `${r.kind} "" is invalid: metadata.name: Required value`);
    const current = this.bucket(r).get(key(input.metadata.namespace, name));
    if (!current) throw notFound(r, name);
    const precondition = input.metadata.resourceVersion;
    if (precondition !== undefined && precondition !== "" && precondition !== current.metadata.resourceVersion) {
      throw conflict(r, name, STALE);
    }
    const next = structuredClone(input);
    next.apiVersion = apiVersionOf(r);
    next.kind = r.kind;
    next.metadata = {
      ...next.metadata,
      uid: current.metadata.uid,
      creationTimestamp: current.metadata.creationTimestamp,
      namespace: current.metadata.namespace,
    };
    if (current.metadata.generation !== undefined) next.metadata.generation = current.metadata.generation;
    if (current.metadata.deletionTimestamp !== undefined)
      next.metadata.deletionTimestamp = current.metadata.deletionTimestamp;
    if (options.keepStatus && r.hasStatusSubresource) {
      if (current["status"] === undefined) delete next["status"];
      else next["status"] = structuredClone(current["status"]);
    }
    const comparableNext = {
      ...next,
      metadata: { ...next.metadata, resourceVersion: current.metadata.resourceVersion },
    };
    if (jsonEqual(comparableNext, current)) return structuredClone(current);
    if (r.tracksGeneration && !jsonEqual(next["spec"], current["spec"])) {
      next.metadata.generation = (current.metadata.generation ?? 0) + 1;
    }
    return this.commit(r, "MODIFIED", next, current);
  }

  delete(r: ResourceType, namespace: string | undefined, name: string): KubeObject {
    const current = this.bucket(r).get(key(namespace, name));
    if (!current) throw notFound(r, name);
    return this.commit(r, "DELETED", structuredClone(current), current);
  }

  private bucket(r: ResourceType): Map<string, KubeObject> {
    let b = this.objects.get(r);
    if (!b) {
      b = new Map();
      this.objects.set(r, b);
    }
    return b;
  }

  private commit(r: ResourceType, type: WatchEventType, obj: KubeObject, previous: KubeObject | null): KubeObject {
    this.revision += 1;
    obj.metadata.resourceVersion = String(this.revision);
    const k = key(obj.metadata.namespace, obj.metadata.name ?? "");
    if (type === "DELETED") this.bucket(r).delete(k);
    else this.bucket(r).set(k, obj);
    const event: StoredEvent = {
      rv: this.revision,
      resource: r,
      type,
      object: structuredClone(obj),
      previous: previous ? structuredClone(previous) : null,
    };
    this.history.push(event);
    for (const listener of [...this.listeners]) listener(event);
    return structuredClone(obj);
  }
}
