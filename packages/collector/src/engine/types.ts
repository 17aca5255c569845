// The vocabulary of the decision engine. Everything here is plain data: the
// engine reads it, returns new values, and never touches a clock, a file, the
// network or the environment. docs/policy.md explains the meaning of each knob
// and state; this file is the shape.

import type { Report } from "@ws/protocol";
import type { EventReason } from "./events.js";
import type { PacketWindow } from "./host-traffic.js";
import type { OTHER_VETOES, SignalName, SignalVeto } from "./signals.js";

// --- policy -------------------------------------------------------------------

export type PolicyMode = "enforce" | "observe";

/** Levels at which a measured quantity counts as work. `Infinity` turns one off. */
export interface Thresholds {
  /** GPU utilization (0..1) at or above which a GPU counts as busy. */
  gpuUtilizationRatio: number;
  /** Whole-machine CPU busy ratio (0..1). */
  cpuBusyRatio: number;
  /** CPU used by non-system users' processes, in cores. */
  userProcessCpuCores: number;
  /** Network receive + transmit, bytes per second, loopback excluded. */
  networkBytesPerSecond: number;
  /** Disk read + write, bytes per second. */
  diskBytesPerSecond: number;
  /** Count output written to a terminal (not only keystrokes) as activity. */
  ttyOutputCounts: boolean;
}

export interface Policy {
  autostopEnabled: boolean;
  mode: PolicyMode;
  /** The named profile the VM selected, "" for none. */
  profile: string;
  idleTimeoutSeconds: number;
  gracePeriodSeconds: number;
  /** Cap on any explicit hold (lease, inhibitor lock). */
  maxKeepRunningSeconds: number;
  /** How long weak evidence may keep a VM after the last strong evidence. */
  weakActivityMaxSeconds: number;
  /** How long background work (CPU, GPU, network, disk, a busy kernel) holds a VM after the last human evidence; null: no bound. */
  unattendedMaxSeconds: number | null;
  agentLostAfterSeconds: number;
  /**
   * With host-side evidence configured: how long a VM must have had no agent (lost, or never
   * connected) before its host-side evidence alone can bring a notice and a stop (engine/host.ts).
   */
  agentLostMaxSeconds: number;
  /** null: a VM whose agent is lost is never stopped. */
  stopWhenAgentLostAfterSeconds: number | null;
  /** The interval the collector asks agents to report at. */
  reportIntervalSeconds: number;
  /** How often a pending notice is sent again (same id) while the stop is pending. */
  noticeRepeatSeconds: number;
  /**
   * Observe mode sends its notices (terminals, desktop, webhooks) too: a dry
   * run with users. Off (unset) by default: observe mode warns nobody.
   */
  observeNotices?: boolean;
  /**
   * Learned warm starts (docs/policy.md "Warm starts learned from returns"): the collector may
   * start the stopped VM ahead of its owner's usual arrival. Off (unset) unless a profile opts in;
   * decide never reads it (the warm-start runner does).
   */
  warmStart?: boolean;
  /** How long a warm-started VM nobody uses runs: its idle-timeout until a person comes (unset: 30m). */
  warmStartWindowSeconds?: number;
  thresholds: Thresholds;
}

/** A partial policy: what a profile, an annotation set or a config section changes. */
export type PolicyOverrides = Partial<Omit<Policy, "thresholds">> & { thresholds?: Partial<Thresholds> };

export interface PolicyError {
  /** The annotation (full name) or config path the error is about. */
  key: string;
  /** The offending value, when there is one. */
  value?: string;
  message: string;
}

export interface ParsedPolicy {
  policy: Policy;
  errors: PolicyError[];
}

/**
 * What a VM runs under when its annotations have errors: nothing different
 * ("none"), its last valid policy, or — with no valid policy ever seen — the
 * defaults in observe mode, so a typo can never cause a stop.
 */
export type PolicyFallback = "none" | "previous-valid" | "observe-defaults";

export interface ResolvedPolicy {
  policy: Policy;
  errors: PolicyError[];
  fallback: PolicyFallback;
  /** The policy to remember as "last valid": the new one when it parsed cleanly. */
  lastValid: Policy | undefined;
}

// --- states and records ---------------------------------------------------------

export type EngineState = "Unknown" | "Active" | "StoppingPending" | "Stopping" | "Stopped" | "AgentLost";

export const ENGINE_STATES: readonly EngineState[] = [
  "Unknown",
  "Active",
  "StoppingPending",
  "Stopping",
  "Stopped",
  "AgentLost",
];

export interface PendingNotice {
  /** Stable for one pending stop. */
  id: string;
  sentAtMs: number;
  deadlineMs: number;
  /** Last time the notice went out (first send or a repeat). */
  lastSentAtMs: number;
  reason: string;
  /** The idle clock's origin when the notice went out: any activity after it cancels the notice. */
  idleSinceMs: number;
  mode: PolicyMode;
  /** Observe mode: when the stop would have happened. */
  wouldStopAtMs?: number;
  /** "stop-by": sent at the schedule's stop-by time, not for idleness (activity still cancels it). */
  cause?: "stop-by";
}

export type StopTrigger = "idle" | "agent-lost";

export interface StopAttempt {
  decidedAtMs: number;
  trigger: StopTrigger;
  reason: string;
  attempts: number;
  lastAttemptAtMs: number;
  /** The idle clock's origin when the stop was decided: activity after it cancels the stop. */
  idleSinceMs: number | undefined;
  /** The executor reported the last attempt failed (it retries on its own first). */
  lastFailure?: { atMs: number; message: string };
}

/** What the engine remembers about one source family (or one Jupyter server) between reports. */
export interface SourceMemory {
  /** The source held something that could become activity at its last good read (kernels, sessions, a busy GPU...). */
  liveAtLastOk: boolean;
  lastOkAtMs?: number;
  /** Set while the source is failing. */
  blindSinceMs?: number;
  lastMessage?: string;
}

export interface TrackedLease {
  id: string;
  user: string;
  uid: number;
  reason: string;
  requestedSeconds: number;
  takenAtMs: number;
  /** min(takenAt + requested, takenAt + max-keep-running). */
  expiresAtMs: number;
  clamped: boolean;
  accepted: boolean;
  message: string;
}

export interface InhibitorView {
  key: string;
  who: string;
  why: string;
  uid: number;
  firstSeenAtMs: number;
  /** firstSeen + max-keep-running. */
  expiresAtMs: number;
}

/** The memory evidence extraction needs from earlier reports. */
export interface EvidenceMemory {
  sources: Record<string, SourceMemory>;
  /** First time each idle inhibitor lock was seen: locks carry no age, so the cap counts from here. */
  inhibitorsFirstSeenMs: Record<string, number>;
  /** The leases of the last report whose lease source was read successfully. */
  leases: TrackedLease[];
}

/** The one clock type, held as a value (activity.ts moves it, and answers what it says). */
export interface IdleClock {
  lastStrongAtMs?: number;
  lastWeakAtMs?: number;
  /** Origin of the idle clock: the last strong evidence, or weak evidence within its cap. */
  lastActivityAtMs?: number;
  /** What moved the idle clock last, in words. */
  lastActivityDetail?: string;
  /** The idle clock's last mover was weak evidence ("connected"), not use. */
  lastActivityWeak?: boolean;
}

/**
 * Everything the engine knows about one VM. decide() returns a new one; the old one is never
 * changed. `clock` is the idle clock the decision uses; `attended` is the same clock without
 * background work (absent: the same as `clock`).
 */
export interface VmRecord {
  state: EngineState;
  /** The idle clock: its origin is what the idle timeout counts from. */
  clock: IdleClock;
  sinceMs: number;
  /** When the engine first saw this VM (or was restored). */
  firstSeenMs: number;
  /** The schedule's stop-by instant the running VM waits for; at or past it, it is due (absent: no stop-by). */
  stopByAtMs?: number;
  /** receivedAt of the last Report processed. */
  lastReportAtMs?: number;
  /** The last human evidence (a keystroke, a click, an execution request): unattended-max counts from here. */
  lastHumanAtMs?: number;
  /** The idle clock without background work: what the idle clock becomes once unattended-max is over. */
  attended?: IdleClock;
  notice?: PendingNotice;
  /** The last notice sent, kept after it clears so the terminal echo of the notice is not taken for activity. */
  lastNoticeSentAtMs?: number;
  stop?: StopAttempt;
  /** AgentLost: the observe-mode "would stop" for the lost agent was recorded. */
  agentLostWouldStopRecorded?: boolean;
  agentConnected: boolean;
  /** Restored after a collector restart: no stop is decided before a fresh Report has been seen. */
  awaitingFreshReport?: boolean;
  /** What the host-side readings showed so far (engine/host.ts); absent: none seen. */
  host?: HostClock;
  /**
   * The agent said goodbye (stopped on purpose: systemctl stop, package removal) when its stream
   * last closed; absent while it is connected, or when it vanished without one (crash, SIGKILL, network).
   */
  goodbye?: AgentGoodbye;
  memory: EvidenceMemory;
  /** Lease decisions last sent to the agent, as a comparable key. */
  leaseDecisionsKey: string;
  /** Policy errors last reported, as a comparable key ("" when none). */
  policyErrorsKey: string;
  /** Active signal names at the last decision (for status). */
  activeSignals: string[];
  /** The one-line summary of the last decision (for status). */
  summary: string;
  /** When the VM would be stopped if nothing changes, as of the last decision. */
  scheduledStopAtMs?: number;
}

/** An agent's goodbye: when its stream closed after it, and the reason it gave. */
export interface AgentGoodbye {
  atMs: number;
  reason: string;
}

// --- observation -----------------------------------------------------------------

export interface ReceivedReport {
  report: Report;
  /** The collector's clock when the Report arrived (ms since the epoch). */
  receivedAtMs: number;
}

export type StopOutcome = "accepted" | "refused" | "failed";

export interface StopResult {
  outcome: StopOutcome;
  /** Why (the API error, the safety check that refused). */
  message: string;
}

/** What the caller knows about a VM at `now`. */
export interface Observation {
  /** The latest Report received for this VM, if any. Passing the same one again is harmless. */
  latestReport?: ReceivedReport;
  /** The agent's stream is open now. */
  agentConnected: boolean;
  /** Not connected, and the agent said goodbye when its stream closed (its reason); absent: it vanished, or is connected. */
  agentGoodbye?: string;
  /** The VM is running (true), stopped (false) or the caller cannot tell (undefined: standalone). */
  vmRunning?: boolean;
  /** The outcome of the stop the engine asked for, passed once after it is known. */
  stopResult?: StopResult;
  /**
   * extractEvidence(latestReport, policy, previous.memory), computed once by the caller when the
   * Report arrived and kept for later decisions on the same Report; absent: decide() extracts it.
   */
  evidence?: Evidence;
  /** Errors of the VM's current policy annotations (the policy passed in is then the fallback). Absent: no errors. */
  policyStatus?: { errors: readonly PolicyError[]; fallback: PolicyFallback };
  /**
   * The latest host-side reading of the VM (KubeVirt's metrics read through Prometheus,
   * collector/src/hostside/). Absent: host-side evidence is not configured, and a VM whose
   * agent is gone is judged as it always was.
   */
  host?: HostReading;
  /**
   * The next instant strictly after now by which the VM's schedule says it stops ("stop by 20:00",
   * protocol's nextStopBy with the same clock). Absent: the VM has no stop-by, and nothing changes.
   */
  nextStopByMs?: number;
}

// --- host-side evidence -------------------------------------------------------------

export type HostSourceState = "ok" | "absent" | "failed";

/** One VM's host-side reading: rates over the window that ends at atMs, and the most connections open in it. */
export interface HostReading {
  /** When the queries were evaluated (the collector's clock). */
  atMs: number;
  /** The span the rates and the connection maxima cover, ending at atMs. */
  windowSeconds: number;
  /** ok: every series was there; absent: the VM has none (not scraped, not running); failed: Prometheus could not answer. */
  state: HostSourceState;
  /** Why absent or failed. */
  message?: string;
  /** vCPU time over wall time, averaged over the VM's vCPUs (0..1). */
  vcpuBusyRatio?: number;
  vcpus?: number;
  networkBytesPerSecond?: number;
  /** Packets per second over the window (KubeVirt's packet counters); absent: not exported (engine/host-traffic.ts). */
  receivePacketsPerSecond?: number;
  transmitPacketsPerSecond?: number;
  diskBytesPerSecond?: number;
  vncConnections?: number;
  consoleConnections?: number;
  portForwardTunnels?: number;
  /**
   * GPUs passed through to the VM (the `gpus` devices of its domain, from the platform): the
   * host's vCPU and network figures say nothing of the work they do.
   */
  passthroughGpus?: number;
  /** The busiest passthrough GPU's utilization (0..1), from a GPU metric source; absent: none is read. */
  gpuBusyRatio?: number;
}

/** What the engine remembers of the host-side readings between them. */
export interface HostClock {
  /** atMs of the last reading taken in (a reading is taken in once). */
  lastReadingAtMs: number;
  /** Start of the unbroken run of ok readings up to the last one; unset while the source fails or has nothing. */
  coveredSinceMs?: number;
  /** End of the last ok reading's window. */
  lastOkAtMs?: number;
  /** The last reading showing background work (vCPU, network, disk at or above the policy's thresholds). */
  lastBackgroundAtMs?: number;
  lastBackgroundDetail?: string;
  /**
   * The last reading showing a person: an open VNC, console or port-forward connection, or
   * interactive traffic (engine/host-traffic.ts).
   */
  lastConnectionAtMs?: number;
  lastConnectionDetail?: string;
  /** The packet counts of the last ok readings that had them, newest last (engine/host-traffic.ts). */
  packetWindows?: PacketWindow[];
}

/** The host-side source as one decision saw it. */
export interface HostExplanation {
  state: HostSourceState;
  atMs: number;
  /** "vCPU 0.3 %, network 2 kB/s, disk 0 B/s, no VNC connection", or why there is none. */
  summary: string;
  /** The host-side idle clock's origin, when the readings are unbroken long enough to have one. */
  idleSinceMs?: number;
  /** What the host readings did to this decision, in a sentence (absent: nothing, the agent decides). */
  role?: string;
}

// --- evidence and explanations -----------------------------------------------------

/** The signals are the keys of engine/signals.ts's descriptors. */
export type { SignalName } from "./signals.js";

export type Strength = "strong" | "weak";

/** One piece of evidence: a signal showed use at a time (the collector's clock). */
export interface SignalReading {
  signal: SignalName;
  strength: Strength;
  atMs: number;
  detail: string;
}

/** A signal whose descriptor says it vetoes, or one of the vetoes that are not a signal's. */
export type VetoKind = SignalVeto | (typeof OTHER_VETOES)[number];

/** Something that forbids a stop now, whatever the idle clock says. */
export interface Veto {
  kind: VetoKind;
  detail: string;
  /** When the veto ends by itself (lease expiry, cap); unset while it lasts as long as the condition. */
  untilMs?: number;
}

export interface BlindSource {
  source: string;
  message: string;
  sinceMs: number;
  /** The blind source holds the VM (it had live content when last read) until this time. */
  holdsUntilMs?: number;
}

export interface Evidence {
  /** When the snapshot was taken, on the collector's clock: receivedAt − sample age. */
  sampledAtMs: number;
  receivedAtMs: number;
  readings: SignalReading[];
  vetoes: Veto[];
  blind: BlindSource[];
  leases: TrackedLease[];
  inhibitors: InhibitorView[];
  /** Memory to carry to the next report. */
  memory: EvidenceMemory;
}

export interface Explanation {
  atMs: number;
  from: EngineState;
  to: EngineState;
  idleSeconds: number | undefined;
  idleTimeoutSeconds: number;
  lastActivityAtMs: number | undefined;
  lastActivity: string | undefined;
  /** The last human evidence; with unattended-max, background work holds the VM until this + unattended-max. */
  lastHumanAtMs?: number | undefined;
  /** unattended-max is over: background work no longer holds the VM. */
  unattended?: boolean;
  /** Every reading of the latest report, with whether it moved the clock. */
  readings: Array<SignalReading & { counted: boolean; note?: string }>;
  vetoes: Veto[];
  blind: BlindSource[];
  /** When a stop happens if nothing changes (unset: none scheduled). */
  stopAtMs: number | undefined;
  /** Why this decision, in a sentence. */
  reason: string;
  /** The host-side source, when it is configured. */
  host?: HostExplanation;
}

// --- actions ------------------------------------------------------------------------

export type EventType = "Normal" | "Warning";

export interface NoticeAction {
  kind: "notice";
  id: string;
  deadlineMs: number;
  stopInSeconds: number;
  idleSeconds: number;
  reason: string;
  hint: string;
  mode: PolicyMode;
  /** A repeat of a notice already sent (same id). */
  repeat: boolean;
}

export interface NoticeClearedAction {
  kind: "notice-cleared";
  id: string;
  reason: string;
}

export interface StopAction {
  kind: "stop";
  trigger: StopTrigger;
  reason: string;
  idleSeconds: number | undefined;
  attempt: number;
}

export interface WouldStopAction {
  kind: "would-stop";
  trigger: StopTrigger;
  reason: string;
  idleSeconds: number | undefined;
}

/** Drop a stop that was asked for but not yet carried out: the VM became active meanwhile. */
export interface CancelStopAction {
  kind: "cancel-stop";
  reason: string;
}

export interface EventAction {
  kind: "event";
  type: EventType;
  /** One of engine/events.ts's EVENT_REASONS. */
  reason: EventReason;
  message: string;
}

/** The restart-safe part of the record; write it on the VM (see persist.ts for the annotations). */
export interface PersistedState {
  state: EngineState;
  lastActiveMs: number | undefined;
  noticeId: string | undefined;
  stopDeadlineMs: number | undefined;
}

export interface PersistAction {
  kind: "persist";
  values: PersistedState;
}

export interface LeaseDecisionView {
  id: string;
  accepted: boolean;
  clamped: boolean;
  effectiveExpiryMs: number;
  effectiveRemainingSeconds: number;
  maxKeepRunningSeconds: number;
  message: string;
}

export interface LeaseDecisionsAction {
  kind: "lease-decisions";
  decisions: LeaseDecisionView[];
}

export interface PolicyErrorAction {
  kind: "policy-error";
  errors: PolicyError[];
  /** What the VM runs under meanwhile. */
  fallback: PolicyFallback;
}

export type Action =
  | NoticeAction
  | NoticeClearedAction
  | StopAction
  | WouldStopAction
  | CancelStopAction
  | EventAction
  | PersistAction
  | LeaseDecisionsAction
  | PolicyErrorAction;

export interface Decision {
  next: VmRecord;
  actions: Action[];
  explanation: Explanation;
  /** One line for logs and `ws-lease status`. */
  summary: string;
  /** The next time the decision can change without new input (notice deadline, idle timeout...). */
  wakeAtMs: number | undefined;
}
