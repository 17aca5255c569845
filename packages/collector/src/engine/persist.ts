// The restart-safe part of a VM's record, as annotations on the VM. Written on
// transitions only (a `persist` action), read once when a collector starts.
//
//   <prefix>state          Active | StoppingPending | Stopping | Stopped | AgentLost
//   <prefix>last-active    RFC 3339: the origin of the idle clock at the transition
//   <prefix>notice-id      the pending notice (StoppingPending only; "o-…" when sent in observe mode)
//   <prefix>stop-deadline  RFC 3339: when the pending stop is due (StoppingPending only)
//
// Restoring follows "missing data is never idleness": the time the collector
// was down never counts as idle time, except that a stop already announced
// keeps its deadline (the users were warned) — and still needs a fresh Report
// showing no activity before it goes ahead.

import { clockStartedAt } from "./activity.js";
import { EMPTY_MEMORY } from "./evidence.js";
import { initialRecord } from "./decide.js";
import { ENGINE_STATES, type EngineState, type PersistedState, type VmRecord } from "./types.js";
import { DEFAULT_ANNOTATION_PREFIX } from "./policy.js";

export const PERSISTED_NAMES = {
  state: "state",
  lastActive: "last-active",
  noticeId: "notice-id",
  stopDeadline: "stop-deadline",
} as const;

/** The merge-patch body for the VM's annotations: null removes an annotation. */
export function persistedAnnotations(
  values: PersistedState,
  prefix: string = DEFAULT_ANNOTATION_PREFIX,
): Record<string, string | null> {
  const iso = (ms: number | undefined) =>
    ms === undefined || !Number.isFinite(ms) ? null : new Date(ms).toISOString();
  return {
    [`${prefix}${PERSISTED_NAMES.state}`]: values.state,
    [`${prefix}${PERSISTED_NAMES.lastActive}`]: iso(values.lastActiveMs),
    [`${prefix}${PERSISTED_NAMES.noticeId}`]: values.noticeId ?? null,
    [`${prefix}${PERSISTED_NAMES.stopDeadline}`]: iso(values.stopDeadlineMs),
  };
}

export interface RestoreResult {
  /** undefined: nothing usable was stored; start from a fresh record. */
  record: VmRecord | undefined;
  /** What could not be read (logged by the caller; never fatal). */
  problems: string[];
}

function parseTime(text: string | undefined, name: string, problems: string[]): number | undefined {
  if (text === undefined || text === "") return undefined;
  // RFC 3339 only: Date.parse accepts many shapes that would hide a corrupted value.
  if (!/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/.test(text)) {
    problems.push(`${name}: ${JSON.stringify(text)} is not an RFC 3339 time`);
    return undefined;
  }
  return Date.parse(text);
}

/**
 * Rebuilds a record from the VM's annotations after a collector restart.
 *
 * - StoppingPending / Stopping: the notice and its deadline are kept and the
 *   idle clock is not restarted; the stop waits for a fresh Report, and any
 *   activity it shows after last-active cancels the stop.
 * - Active / AgentLost: the idle clock resumes no earlier than the restart
 *   (the collector could not see the VM while it was down).
 * - Stopped: stays Stopped until the VM runs again.
 */
export function restoreRecord(
  annotations: Readonly<Record<string, string>>,
  restoredAtMs: number,
  prefix: string = DEFAULT_ANNOTATION_PREFIX,
): RestoreResult {
  const problems: string[] = [];
  const get = (name: string) => annotations[`${prefix}${name}`];
  const stateText = get(PERSISTED_NAMES.state);
  if (stateText === undefined) return { record: undefined, problems };
  if (!ENGINE_STATES.includes(stateText as EngineState)) {
    problems.push(`${prefix}${PERSISTED_NAMES.state}: unknown state ${JSON.stringify(stateText)}`);
    return { record: undefined, problems };
  }
  const state = stateText as EngineState;
  const lastActiveMs = parseTime(get(PERSISTED_NAMES.lastActive), `${prefix}${PERSISTED_NAMES.lastActive}`, problems);
  const deadlineMs = parseTime(get(PERSISTED_NAMES.stopDeadline), `${prefix}${PERSISTED_NAMES.stopDeadline}`, problems);
  const noticeId = get(PERSISTED_NAMES.noticeId);

  const base: VmRecord = {
    ...initialRecord(restoredAtMs),
    memory: EMPTY_MEMORY,
    // The agent gets agent-lost-after from the restart to reconnect and report.
    lastReportAtMs: restoredAtMs,
    summary: `restored from annotations (${state}) after a collector restart`,
  };
  const resumed = lastActiveMs === undefined ? restoredAtMs : Math.max(lastActiveMs, restoredAtMs);

  switch (state) {
    case "StoppingPending":
    case "Stopping": {
      if (lastActiveMs === undefined || deadlineMs === undefined || !noticeId) {
        problems.push(
          `${state} without last-active, stop-deadline and notice-id: restored as Active with the idle clock at the restart`,
        );
        return { record: activeAt(base, restoredAtMs), problems };
      }
      return {
        record: {
          ...base,
          state: "StoppingPending",
          clock: clockStartedAt(lastActiveMs, "restored last-active"),
          notice: {
            id: noticeId,
            sentAtMs: Math.min(restoredAtMs, deadlineMs),
            lastSentAtMs: Math.min(restoredAtMs, deadlineMs),
            deadlineMs,
            idleSinceMs: lastActiveMs,
            mode: noticeId.startsWith("o-") ? "observe" : "enforce",
            reason: `idle since ${new Date(lastActiveMs).toISOString()} (restored after a collector restart)`,
          },
          awaitingFreshReport: true,
        },
        problems,
      };
    }
    case "Stopped":
      return { record: { ...base, state: "Stopped", lastReportAtMs: undefined }, problems };
    case "AgentLost":
      return { record: { ...activeAt(base, resumed), state: "AgentLost" }, problems };
    case "Active":
      return { record: activeAt(base, resumed), problems };
    case "Unknown":
      return { record: undefined, problems };
  }
}

function activeAt(base: VmRecord, atMs: number): VmRecord {
  return {
    ...base,
    state: "Active",
    clock: clockStartedAt(atMs, "restored after a collector restart"),
  };
}
