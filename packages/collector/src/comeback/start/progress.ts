// The stages of a start, as the starting page shows them: requested → VMI scheduled (node) →
// VMI running → agent connected → ready (the entry service answers). Pure: the platform's facts,
// the start attempt and the agent's state in, the stages with their times out.
import type { StartFacts } from "./platform.js";
import type { Readiness } from "./readiness.js";

export type StageName = "requested" | "scheduled" | "running" | "agent" | "ready";

export interface Stage {
  name: StageName;
  label: string;
  state: "done" | "current" | "waiting" | "blocked";
  atMs?: number;
  detail?: string;
}

export type StartStatus = "stopped" | "starting" | "unschedulable" | "ready" | "failed";

export interface StartProgress {
  status: StartStatus;
  stages: Stage[];
  /** The scheduler's own words when the VMI cannot be placed, and how long it has waited. */
  unschedulable?: { reason: string; message: string; waitedSeconds: number };
  /** Why the start request itself failed. */
  failure?: string;
}

/** What this collector knows of a start it was asked for. */
export interface AttemptFacts {
  requestedAtMs: number;
  by: string;
  trigger: string;
  /** The platform's answer; undefined while the request is in flight. */
  result?: { ok: boolean; message: string };
  readyAtMs?: number;
}

export interface AgentFacts {
  connectedAtMs?: number;
  /** When the Report that showed the entry service up arrived. */
  latestReportAtMs?: number;
  readiness: Readiness;
  /** The collector's own probe saw the entry service answer (wait/probe.ts): Ready without the agent. */
  probed?: { atMs: number; detail: string };
}

const LABELS: Record<StageName, string> = {
  requested: "Start requested",
  scheduled: "VMI scheduled",
  running: "VMI running",
  agent: "Agent connected",
  ready: "Ready",
};

/** The VM has an instance that has not ended: placed, booting or running. */
export function instanceLive(instance: StartFacts["instance"]): instance is NonNullable<StartFacts["instance"]> {
  return instance !== null && instance.phase !== "Succeeded" && instance.phase !== "Failed";
}

export function startProgress(
  facts: StartFacts,
  attempt: AttemptFacts | undefined,
  agent: AgentFacts,
  nowMs: number,
): StartProgress {
  const instance = facts.instance;
  const live = instanceLive(instance);
  const since = attempt?.requestedAtMs ?? instance?.createdAtMs ?? undefined;
  const failed = attempt?.result && !attempt.result.ok ? attempt.result.message : undefined;
  const requestedAt = attempt?.requestedAtMs;
  const scheduledAt = live
    ? (instance.phaseTimes["Scheduled"] ?? (instance.nodeName ? instance.phaseTimes["Running"] : undefined))
    : undefined;
  const runningAt =
    live && instance.phase === "Running"
      ? (instance.phaseTimes["Running"] ?? instance.createdAtMs ?? undefined)
      : undefined;
  // The agent of this boot: a stream opened after the start (an older one belongs to the previous run).
  const agentAt =
    live && agent.connectedAtMs !== undefined && (since === undefined || agent.connectedAtMs >= since - 1000)
      ? agent.connectedAtMs
      : undefined;
  const agentReady = agentAt !== undefined && agent.readiness.ready;
  // The probe's answer counts for this boot only: a running VMI, seen answering after the start.
  const probed =
    !agentReady && live && instance.phase === "Running" && agent.probed && agent.probed.atMs >= (since ?? 0)
      ? agent.probed
      : undefined;
  const readyAt = agentReady
    ? (attempt?.readyAtMs ?? agent.latestReportAtMs ?? nowMs)
    : probed
      ? (attempt?.readyAtMs ?? probed.atMs)
      : undefined;
  const blocked = live && instance.unschedulable && scheduledAt === undefined ? instance.unschedulable : null;

  const times: Array<[StageName, number | undefined, string | undefined]> = [
    [
      "requested",
      requestedAt,
      attempt ? `by ${attempt.by} (${attempt.trigger})` : live ? "started outside this page" : undefined,
    ],
    ["scheduled", scheduledAt, instance?.nodeName ? `on node ${instance.nodeName}` : undefined],
    ["running", runningAt, undefined],
    ["agent", agentAt, undefined],
    ["ready", readyAt, probed ? probed.detail : agent.readiness.detail],
  ];
  const inMotion = attempt !== undefined || live || facts.wantsToRun;
  let current = false;
  const stages: Stage[] = times.map(([name, atMs, detail], index) => {
    const doneByLater = times.slice(index + 1).some(([, later]) => later !== undefined);
    let state: Stage["state"];
    if (atMs !== undefined || (name === "requested" && doneByLater)) state = "done";
    else if (!inMotion || current || failed) state = "waiting";
    else {
      current = true;
      state = name === "scheduled" && blocked ? "blocked" : "current";
    }
    return {
      name,
      label: facts.stageLabels?.[name] ?? LABELS[name],
      state,
      ...(atMs !== undefined ? { atMs } : {}),
      ...(detail !== undefined && (state !== "waiting" || name === "ready") ? { detail } : {}),
    };
  });
  const status: StartStatus = failed
    ? "failed"
    : readyAt !== undefined
      ? "ready"
      : blocked
        ? "unschedulable"
        : inMotion
          ? "starting"
          : "stopped";
  return {
    status,
    stages,
    ...(blocked
      ? {
          unschedulable: {
            reason: blocked.reason,
            message: blocked.message,
            waitedSeconds: Math.max(0, (nowMs - (since ?? blocked.sinceMs ?? nowMs)) / 1000),
          },
        }
      : {}),
    ...(failed ? { failure: failed } : {}),
  };
}
