/**
 * The apiserver validation the collector's writes must pass: events.k8s.io/v1 Events and
 * coordination.k8s.io/v1 Leases. MicroTime fields must carry exactly six fractional digits, as
 * Go's RFC3339Micro parser demands.
 */
import { ApiError, type KubeObject } from "./store.js";

const MICRO_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}(Z|[+-]\d{2}:\d{2})$/;
const QUALIFIED_NAME =
  /^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;
const NOTE_LIMIT_BYTES = 1024;

function invalid(kind: string, name: string, causes: string[]): ApiError {
  return new ApiError(422, "Invalid", `${kind} "${name}" is invalid: ${causes.join(", ")}`, {
    name,
    kind,
    causes: causes.map((message) => ({ message })),
  });
}

function microTimeCause(field: string, value: unknown): string | null {
  if (value === undefined || value === null) return null;
  if (typeof value !== "string" || !MICRO_TIME.test(value)) {
    return `${field}: Invalid value: ${JSON.stringify(value)}: must be RFC3339 with microseconds`;
  }
  return null;
}

export function validateEventsV1Event(obj: KubeObject): void {
  const causes: string[] = [];
  const text = (field: string, max: number, value: unknown) => {
    if (typeof value !== "string" || value.length === 0) causes.push(`${field}: Required value`);
    else if (value.length > max) causes.push(`${field}: Too long: must have at most ${max} characters`);
  };
  if (obj["eventTime"] === undefined || obj["eventTime"] === null) causes.push("eventTime: Required value");
  const timeCause = microTimeCause("eventTime", obj["eventTime"]);
  if (timeCause) causes.push(timeCause);
  const controller = obj["reportingController"];
  text("reportingController", 128, controller);
  if (typeof controller === "string" && controller.length > 0 && !QUALIFIED_NAME.test(controller)) {
    causes.push(`reportingController: Invalid value: ${JSON.stringify(controller)}: must be a qualified name`);
  }
  text("reportingInstance", 128, obj["reportingInstance"]);
  text("action", 128, obj["action"]);
  text("reason", 128, obj["reason"]);
  if (obj["type"] !== "Normal" && obj["type"] !== "Warning") {
    causes.push(`type: Unsupported value: ${JSON.stringify(obj["type"])}: supported values: "Normal", "Warning"`);
  }
  const note = obj["note"];
  if (typeof note === "string" && Buffer.byteLength(note, "utf8") > NOTE_LIMIT_BYTES) {
    causes.push(`note: Too long: must have at most ${NOTE_LIMIT_BYTES} bytes`);
  }
  const regarding = obj["regarding"] as Record<string, unknown> | undefined;
  if (regarding && regarding["namespace"] !== undefined && regarding["namespace"] !== obj.metadata.namespace) {
    causes.push("regarding.namespace: Invalid value: does not match event.namespace");
  }
  const series = obj["series"] as Record<string, unknown> | undefined;
  if (series) {
    if (typeof series["count"] !== "number" || series["count"] < 2)
      causes.push("series.count: Invalid value: should be at least 2");
    const seriesTime = microTimeCause("series.lastObservedTime", series["lastObservedTime"]);
    if (seriesTime) causes.push(seriesTime);
  }
  if (causes.length > 0) throw invalid("Event", obj.metadata.name ?? "", causes);
}

export function validateLease(obj: KubeObject): void {
  const causes: string[] = [];
  const spec = (obj["spec"] ?? {}) as Record<string, unknown>;
  for (const field of ["acquireTime", "renewTime"]) {
    const cause = microTimeCause(`spec.${field}`, spec[field]);
    if (cause) causes.push(cause);
  }
  const duration = spec["leaseDurationSeconds"];
  if (duration !== undefined && (!Number.isInteger(duration) || (duration as number) <= 0)) {
    causes.push("spec.leaseDurationSeconds: Invalid value: must be greater than 0");
  }
  const transitions = spec["leaseTransitions"];
  if (transitions !== undefined && (!Number.isInteger(transitions) || (transitions as number) < 0)) {
    causes.push("spec.leaseTransitions: Invalid value: must be greater than or equal to 0");
  }
  if (causes.length > 0) throw invalid("Lease", obj.metadata.name ?? "", causes);
}
