// The trace format: JSON lines, one event per line (docs/replay.md).
//
//   {"t": 0,  "vm": "ns/name", "report": { …a Report in the protobuf JSON mapping… }}
//   {"t": 15, "vm": "ns/name", "event": "agent-connected" | "agent-disconnected"}
//   {"t": 15, "vm": "ns/name", "event": "agent-disconnected", "goodbye": "SIGTERM: stopped on purpose"}
//   {"t": 0,  "vm": "ns/name", "policy": { "idle-timeout": "5m", … }}
//   {"t": 60, "vm": "ns/name", "host": { "state": "ok", "windowSeconds": 120, "vcpuBusyRatio": 0.003, … }}
//
// `t` is seconds from the start of the trace. An optional "at" (RFC 3339)
// records the wall time the collector saw the event; replay uses it only to
// print real times. Blank lines and lines starting with # are skipped.

import { fromJson, toJson, type JsonValue } from "@bufbuild/protobuf";
import { ReportSchema, type Report, errorMessage } from "@ws/protocol";
import type { HostReading } from "../engine/types.js";

/** A host-side reading as a trace line carries it: its time is the line's. */
export type TraceHostReading = Omit<HostReading, "atMs">;

export type TraceEvent =
  | { line: number; t: number; at?: string; vm: string; kind: "report"; report: Report }
  | {
      line: number;
      t: number;
      at?: string;
      vm: string;
      kind: "agent-connected" | "agent-disconnected";
      goodbye?: string;
    }
  | { line: number; t: number; at?: string; vm: string; kind: "policy"; annotations: Record<string, string> }
  | { line: number; t: number; at?: string; vm: string; kind: "host"; host: TraceHostReading };

export class TraceError extends Error {
  override name = "TraceError";
  constructor(readonly problems: string[]) {
    super(
      problems.length === 1 ? problems[0]! : `${problems.length} problems in the trace:\n  ${problems.join("\n  ")}`,
    );
  }
}

const VM_NAME = /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?\/[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/;
const KNOWN_KEYS = new Set(["t", "at", "vm", "report", "event", "goodbye", "policy", "host"]);
const HOST_NUMBERS = [
  "windowSeconds",
  "vcpuBusyRatio",
  "vcpus",
  "networkBytesPerSecond",
  "receivePacketsPerSecond",
  "transmitPacketsPerSecond",
  "diskBytesPerSecond",
  "vncConnections",
  "consoleConnections",
  "portForwardTunnels",
] as const;

/** A host-side reading of a trace line, or what is wrong with it. */
function parseHostReading(value: unknown): TraceHostReading | string {
  if (typeof value !== "object" || value === null || Array.isArray(value))
    return `"host" must be an object, got ${describeType(value)}`;
  const object = value as Record<string, unknown>;
  const known = new Set<string>(["state", "message", ...HOST_NUMBERS]);
  const unknown = Object.keys(object).filter((key) => !known.has(key));
  if (unknown.length > 0)
    return `"host": unknown field ${JSON.stringify(unknown[0])} (known: ${[...known].join(", ")})`;
  const state = object.state;
  if (state !== "ok" && state !== "absent" && state !== "failed")
    return `"host.state" must be "ok", "absent" or "failed", got ${JSON.stringify(state)}`;
  if (object.message !== undefined && typeof object.message !== "string") return `"host.message" must be a string`;
  const reading: TraceHostReading = { state, windowSeconds: 0 };
  if (typeof object.message === "string") reading.message = object.message;
  for (const key of HOST_NUMBERS) {
    const number = object[key];
    if (number === undefined) continue;
    if (typeof number !== "number" || !Number.isFinite(number) || number < 0)
      return `"host.${key}" must be a number ≥ 0, got ${JSON.stringify(number)}`;
    reading[key] = number;
  }
  if (!(reading.windowSeconds > 0)) return `"host.windowSeconds" must be a number > 0`;
  return reading;
}
/** Stop listing after this many: the rest are usually the same mistake. */
const MAX_PROBLEMS = 20;

function describeType(value: unknown): string {
  return value === null ? "null" : Array.isArray(value) ? "an array" : typeof value;
}

/** Parses one line; returns the event or a problem (without the line number). */
export function parseTraceLine(text: string, line: number): TraceEvent | string {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    return `not valid JSON (${errorMessage(error)})`;
  }
  if (typeof value !== "object" || value === null || Array.isArray(value))
    return `expected a JSON object, got ${describeType(value)}`;
  const object = value as Record<string, unknown>;
  const unknown = Object.keys(object).filter((key) => !KNOWN_KEYS.has(key));
  if (unknown.length > 0)
    return `unknown field${unknown.length > 1 ? "s" : ""} ${unknown.map((key) => JSON.stringify(key)).join(", ")} (known: t, vm, report, event, goodbye, policy, host, at)`;
  const { t, vm, at } = object;
  if (typeof t !== "number" || !Number.isFinite(t) || t < 0)
    return `"t" must be a number of seconds from the start (≥ 0), got ${JSON.stringify(t)}`;
  if (typeof vm !== "string" || !VM_NAME.test(vm)) return `"vm" must be "namespace/name", got ${JSON.stringify(vm)}`;
  if (at !== undefined && (typeof at !== "string" || Number.isNaN(Date.parse(at))))
    return `"at" must be an RFC 3339 time, got ${JSON.stringify(at)}`;
  const payloads = ["report", "event", "policy", "host"].filter((key) => key in object);
  if (payloads.length !== 1)
    return `a line has exactly one of "report", "event", "policy" or "host"${payloads.length ? `, not ${payloads.join(" and ")}` : ""}`;
  const base = { line, t, vm, ...(typeof at === "string" ? { at } : {}) };

  if ("report" in object) {
    try {
      return { ...base, kind: "report", report: fromJson(ReportSchema, object.report as JsonValue) };
    } catch (error) {
      return `"report" is not a Report in the protobuf JSON mapping: ${errorMessage(error)}`;
    }
  }
  if ("host" in object) {
    const host = parseHostReading(object.host);
    return typeof host === "string" ? host : { ...base, kind: "host", host };
  }
  if ("event" in object) {
    const event = object.event;
    if (event !== "agent-connected" && event !== "agent-disconnected")
      return `"event" must be "agent-connected" or "agent-disconnected", got ${JSON.stringify(event)}`;
    const goodbye = object.goodbye;
    if (goodbye !== undefined && (event !== "agent-disconnected" || typeof goodbye !== "string"))
      return `"goodbye" is a string on an "agent-disconnected" line only, got ${describeType(goodbye)}`;
    return { ...base, kind: event, ...(goodbye === undefined ? {} : { goodbye }) };
  }
  const policy = object.policy;
  if (typeof policy !== "object" || policy === null || Array.isArray(policy))
    return `"policy" must be an object of annotations, got ${describeType(policy)}`;
  const annotations: Record<string, string> = {};
  for (const [key, entry] of Object.entries(policy)) {
    if (typeof entry !== "string")
      return `"policy": the value of ${JSON.stringify(key)} must be a string, as annotations are (write ${JSON.stringify(String(entry))})`;
    annotations[key] = entry;
  }
  return { ...base, kind: "policy", annotations };
}

/** Parses a whole trace. Throws a TraceError naming every bad line (up to a limit). Events come back sorted by t (stable). */
export function parseTrace(text: string): TraceEvent[] {
  const events: TraceEvent[] = [];
  const problems: string[] = [];
  const lines = text.split("\n");
  for (let index = 0; index < lines.length; index++) {
    const raw = lines[index]!.trim();
    if (raw === "" || raw.startsWith("#")) continue;
    const parsed = parseTraceLine(raw, index + 1);
    if (typeof parsed === "string") {
      problems.push(`line ${index + 1}: ${parsed}`);
      if (problems.length >= MAX_PROBLEMS) {
        problems.push("(stopped after 20 problems)");
        break;
      }
    } else {
      events.push(parsed);
    }
  }
  if (problems.length > 0) throw new TraceError(problems);
  // A live recording is in order; a hand-written or merged one may not be.
  return events
    .map((event, order) => ({ event, order }))
    .sort((a, b) => a.event.t - b.event.t || a.order - b.order)
    .map(({ event }) => event);
}

export type TracePayload =
  | { report: Report }
  | { event: "agent-connected" | "agent-disconnected"; goodbye?: string }
  | { policy: Record<string, string> }
  | { host: TraceHostReading };

/** One trace line (without the newline) for an event at `t` seconds. */
export function formatTraceLine(t: number, vm: string, payload: TracePayload, atMs?: number): string {
  const head: Record<string, unknown> = { t: Math.round(t * 1000) / 1000 };
  if (atMs !== undefined) head.at = new Date(atMs).toISOString();
  head.vm = vm;
  if ("report" in payload) return JSON.stringify({ ...head, report: toJson(ReportSchema, payload.report) });
  if ("event" in payload)
    return JSON.stringify({
      ...head,
      event: payload.event,
      ...(payload.goodbye === undefined ? {} : { goodbye: payload.goodbye }),
    });
  if ("host" in payload) return JSON.stringify({ ...head, host: payload.host });
  return JSON.stringify({ ...head, policy: payload.policy });
}
