// The lease socket's protocol: JSON lines. The server speaks first with a
// challenge (a nonce and a proof-file name, see peer-proof.ts); then each
// request line gets one response line. Parsing is pure and strict: anything
// unexpected is an error answer, and fields the server does not use (a
// claimed uid, a user name) are ignored: the caller's identity comes from the
// kernel, never from the request.

import { isJsonObject } from "@ws/protocol";
import type { ScheduleAsk } from "./schedule.js";

export const PROTOCOL_NAME = "ws-agent-lease";
export const PROTOCOL_VERSION = 1;
/** Longest line either side accepts; a request is a few hundred bytes. */
export const MAX_LINE_BYTES = 16 * 1024;
/** A take may wait this long for the collector to confirm (or clamp) the lease. */
export const MAX_CONFIRM_WAIT_SECONDS = 10;

export interface Challenge {
  protocol: typeof PROTOCOL_NAME;
  version: number;
  nonce: string;
  proof: string;
}

export type Request =
  | { op: "take"; seconds: number; reason: string; waitSeconds: number }
  | { op: "list" }
  | { op: "status" }
  | { op: "cancel"; target: { id: string } | { all: true } }
  | { op: "schedule"; ask: ScheduleAsk };

export type ErrorCode =
  | "bad_request"
  | "bad_duration"
  | "over_cap"
  | "bad_reason"
  | "too_many"
  | "not_found"
  | "forbidden"
  | "unverified"
  | "busy"
  | "not_saved"
  | "internal";

export interface ErrorAnswer {
  ok: false;
  error: { code: ErrorCode; message: string; capSeconds?: number; capSource?: CapSource };
}

export type CapSource = "policy" | "default";

/** A lease as the CLI shows it. Wall times are this machine's, for display only. */
export interface WireLease {
  id: string;
  uid: number;
  user: string;
  reason: string;
  requestedSeconds: number;
  /** How long the lease holds the VM in all (requested, or clamped). */
  holdSeconds: number;
  ageSeconds: number;
  remainingSeconds: number;
  takenAt: string;
  expiresAt: string;
  confirmed: boolean;
  clamped: boolean;
  refused: boolean;
  maxKeepRunningSeconds?: number;
  message?: string;
  /** "link": granted through a keep-running link sent outside the VM. */
  via?: "link";
}

export interface NoticeView {
  id: string;
  stopInSeconds: number;
  stopAt: string;
  reason: string;
  keepRunningHint: string;
  idleSeconds: number;
  mode: ModeName;
}

export type ModeName = "enforce" | "observe" | "unknown";

/** Spelled as the collector's API (/api/vms, the state metric) spells them. */
export type StateName = "Unknown" | "Active" | "StoppingPending" | "Stopping" | "Stopped" | "AgentLost";

export interface VmStatusView {
  state: StateName;
  idleSeconds: number;
  activeSignals: string[];
  stopInSeconds?: number;
  stopAt?: string;
  explanation: string;
  mode: ModeName;
  /** How old this information is: the collector sent it that long ago. */
  ageSeconds: number;
}

export interface PolicyView {
  autostopEnabled: boolean;
  mode: ModeName;
  profile: string;
  idleTimeoutSeconds: number;
  gracePeriodSeconds: number;
  maxKeepRunningSeconds: number;
}

export interface StatusView {
  now: string;
  collector: { connected: boolean; address: string; sinceSeconds?: number };
  vm?: VmStatusView;
  policy?: PolicyView;
  capSeconds: number;
  capSource: CapSource;
  leases: WireLease[];
  notice?: NoticeView;
}

export type Answer =
  | { ok: true; op: "take"; lease: WireLease; capSeconds: number; capSource: CapSource; collectorConnected: boolean }
  | { ok: true; op: "list"; leases: WireLease[] }
  | { ok: true; op: "status"; status: StatusView }
  | { ok: true; op: "cancel"; cancelled: WireLease[] }
  | { ok: true; op: "schedule"; message: string; schedule: Record<string, unknown> | null }
  | ErrorAnswer;

export function errorAnswer(
  code: ErrorCode,
  message: string,
  extra: { capSeconds?: number; capSource?: CapSource } = {},
): ErrorAnswer {
  return { ok: false, error: { code, message, ...extra } };
}

export function parseRequest(line: string): { ok: true; request: Request } | ErrorAnswer {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    return errorAnswer("bad_request", "the request is not JSON");
  }
  if (!isJsonObject(value)) return errorAnswer("bad_request", "the request is not a JSON object");
  switch (value.op) {
    case "take": {
      const { seconds, reason, wait } = value;
      if (typeof seconds !== "number" || !Number.isFinite(seconds) || seconds <= 0) {
        return errorAnswer("bad_duration", `"seconds" must be a positive number`);
      }
      if (reason !== undefined && typeof reason !== "string") return errorAnswer("bad_reason", `"reason" must be text`);
      if (wait !== undefined && (typeof wait !== "number" || !Number.isFinite(wait) || wait < 0)) {
        return errorAnswer("bad_request", `"wait" must be a number of seconds`);
      }
      return {
        ok: true,
        request: {
          op: "take",
          seconds,
          reason: reason ?? "",
          waitSeconds: Math.min(MAX_CONFIRM_WAIT_SECONDS, wait ?? 0),
        },
      };
    }
    case "list":
    case "status":
      return { ok: true, request: { op: value.op } };
    case "cancel": {
      if (value.all === true && value.id === undefined)
        return { ok: true, request: { op: "cancel", target: { all: true } } };
      if (typeof value.id === "string" && value.all === undefined)
        return { ok: true, request: { op: "cancel", target: { id: value.id } } };
      return errorAnswer("bad_request", `cancel needs either "id" or "all": true`);
    }
    case "schedule": {
      const { action, line, tz, date } = value;
      if (action !== "set" && action !== "clear" && action !== "skip" && action !== "status")
        return errorAnswer("bad_request", `schedule needs "action": set, clear, skip or status`);
      for (const [name, field] of [
        ["line", line],
        ["tz", tz],
        ["date", date],
      ] as const)
        if (field !== undefined && (typeof field !== "string" || field.length > 300))
          return errorAnswer("bad_request", `"${name}" must be text of at most 300 characters`);
      return {
        ok: true,
        request: {
          op: "schedule",
          ask: {
            op: action,
            ...(typeof line === "string" ? { line } : {}),
            ...(typeof tz === "string" ? { timeZone: tz } : {}),
            ...(typeof date === "string" ? { date } : {}),
          },
        },
      };
    }
    default:
      return errorAnswer(
        "bad_request",
        `unknown op ${JSON.stringify(value.op)}: expected take, list, status, cancel or schedule`,
      );
  }
}

export function parseChallenge(line: string): Challenge | undefined {
  try {
    const value: unknown = JSON.parse(line);
    if (!isJsonObject(value) || value.protocol !== PROTOCOL_NAME) return undefined;
    const { version, nonce, proof } = value;
    if (typeof version !== "number" || typeof nonce !== "string" || typeof proof !== "string") return undefined;
    return { protocol: PROTOCOL_NAME, version, nonce, proof };
  } catch {
    return undefined;
  }
}

/** Splits a growing buffer into complete lines; what remains is an unfinished line. */
export function takeLines(buffer: string): { lines: string[]; rest: string } {
  const parts = buffer.split("\n");
  const rest = parts.pop() ?? "";
  return { lines: parts.map((line) => line.replace(/\r$/, "")).filter((line) => line.trim() !== ""), rest };
}
