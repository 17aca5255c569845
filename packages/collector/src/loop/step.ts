// One VM's loop: the state the collector keeps about a VM between inputs, and
// step(), the only caller of decide(). The live Fleet, `replay` and `whatif`
// all drive a VM through step(), so the three cannot drift apart: the same
// inputs at the same times give the same decisions.
//
// Evidence is extracted once per Report (here) and handed to decide(); a wake
// with no new Report reuses it. Per-VM memory is bounded after every decision.
import { nextStopBy, type Schedule } from "@ws/protocol";
import { decide } from "../engine/decide.js";
import { extractEvidence } from "../engine/evidence.js";
import { compactReport } from "../model/compact-report.js";
import type {
  Decision,
  Evidence,
  EvidenceMemory,
  HostReading,
  Observation,
  Policy,
  PolicyError,
  PolicyFallback,
  ReceivedReport,
  StopResult,
  VmRecord,
} from "../engine/types.js";

export interface PolicyStatus {
  errors: readonly PolicyError[];
  fallback: PolicyFallback;
}

/** What the loop knows about one VM. Plain data: replay and whatif keep one per VM too. */
export interface VmLoopState {
  record: VmRecord | undefined;
  policy: Policy;
  /** Errors of the VM's policy annotations (absent: none). */
  policyStatus: PolicyStatus | undefined;
  latest: ReceivedReport | undefined;
  connected: boolean;
  /** The reason the agent gave in its Goodbye when its stream last closed; undefined: connected, or it vanished. */
  goodbye?: string | undefined;
  /** The platform's view (Kubernetes: is a VMI running); undefined where nothing can tell (standalone). */
  running: boolean | undefined;
  /** The latest host-side reading (hostside/); undefined while host-side evidence is not configured. */
  host?: HostReading | undefined;
  /** The evidence of `latest` under `policy`, extracted when the Report arrived. */
  evidence: KeptEvidence | undefined;
  lastDecision: Decision | undefined;
  /** The VM's schedule when it has a "stop by" (issue 36): its next stop-by goes to the engine with the clock. */
  stopBy?: Schedule;
}

interface KeptEvidence {
  evidence: Evidence;
  of: ReceivedReport;
  policy: Policy;
}

/** What happened to the VM since its last step. */
export type StepInput =
  | { kind: "report"; received: ReceivedReport }
  | { kind: "connected" }
  /** `goodbye`: the agent said it stops on purpose, and why; absent: the stream just ended. */
  | { kind: "disconnected"; goodbye?: string }
  | { kind: "policy"; policy: Policy; status: PolicyStatus | undefined }
  | { kind: "platform"; running: boolean | undefined }
  | { kind: "stop-result"; result: StopResult }
  /** A host-side reading of the VM (KubeVirt's metrics through Prometheus). */
  | { kind: "host"; reading: HostReading }
  /** A deadline the last decision named (wakeAtMs), or a re-evaluation with nothing new. */
  | { kind: "wake" };

export function newVmLoopState(policy: Policy, policyStatus?: PolicyStatus): VmLoopState {
  return {
    record: undefined,
    policy,
    policyStatus,
    latest: undefined,
    connected: false,
    running: undefined,
    evidence: undefined,
    lastDecision: undefined,
  };
}

/** Sources remembered between Reports beyond the ones the latest Report names (a failing agent's churn of names must not grow memory). */
export const MAX_REMEMBERED_SOURCES = 64;
/** Idle inhibitor locks whose first sighting is remembered. */
export const MAX_REMEMBERED_INHIBITORS = 64;

/**
 * Lands `input` in the VM's state without deciding; returns the stop result it carries. With
 * `extract` (step() does) a Report's evidence is extracted here, once; without it (a standby
 * replica that decides nothing) the evidence is left to be extracted when a decision needs it.
 */
export function applyInput(vm: VmLoopState, input: StepInput, extract = true): StopResult | undefined {
  switch (input.kind) {
    case "report":
      vm.latest = input.received;
      vm.connected = true;
      vm.evidence = extract
        ? {
            evidence: extractEvidence(input.received, vm.policy, vm.record?.memory),
            of: input.received,
            policy: vm.policy,
          }
        : undefined;
      return undefined;
    case "connected":
      vm.connected = true;
      vm.goodbye = undefined;
      return undefined;
    case "disconnected":
      vm.connected = false;
      vm.goodbye = input.goodbye;
      return undefined;
    case "policy":
      vm.policy = input.policy;
      vm.policyStatus = input.status && input.status.errors.length > 0 ? input.status : undefined;
      return undefined;
    case "platform":
      vm.running = input.running;
      return undefined;
    case "stop-result":
      return input.result;
    case "host":
      vm.host = input.reading;
      return undefined;
    case "wake":
      return undefined;
  }
}

/** Applies `input` to the VM's state and decides. The returned decision's record is already the VM's record. */
export function step(vm: VmLoopState, nowMs: number, input: StepInput): Decision {
  const stopResult = applyInput(vm, input);
  const kept =
    vm.evidence && vm.evidence.of === vm.latest && vm.evidence.policy === vm.policy ? vm.evidence.evidence : undefined;
  const observation: Observation = {
    agentConnected: vm.connected,
    ...(vm.latest ? { latestReport: vm.latest } : {}),
    ...(kept ? { evidence: kept } : {}),
    ...(vm.running !== undefined ? { vmRunning: vm.running } : {}),
    ...(stopResult ? { stopResult } : {}),
    ...(vm.policyStatus ? { policyStatus: vm.policyStatus } : {}),
    ...(vm.host ? { host: vm.host } : {}),
    ...(vm.goodbye !== undefined && !vm.connected ? { agentGoodbye: vm.goodbye } : {}),
  };
  const stopByMs = vm.stopBy ? nextStopBy(vm.stopBy, nowMs) : undefined;
  if (stopByMs !== undefined) observation.nextStopByMs = stopByMs;
  const decision = decide(nowMs, vm.policy, observation, vm.record);
  decision.next = boundedRecord(decision.next, vm.latest);
  vm.record = decision.next;
  vm.lastDecision = decision;
  if (input.kind === "report") keepCompact(vm);
  return decision;
}

/**
 * Decided on: from here the VM keeps its Report as bytes and a summary (compact-report.ts), with
 * the evidence extracted from it still tied to it.
 */
function keepCompact(vm: VmLoopState): void {
  if (!vm.latest) return;
  const compact = compactReport(vm.latest);
  if (compact === vm.latest) return;
  if (vm.evidence?.of === vm.latest) vm.evidence.of = compact;
  vm.latest = compact;
}

/**
 * The record with its evidence memory pruned: the sources the latest Report names are kept,
 * others only up to MAX_REMEMBERED_SOURCES (the most recently seen first). The record is
 * returned unchanged (same object) when nothing is over the bound.
 */
export function boundedRecord(record: VmRecord, latest: ReceivedReport | undefined): VmRecord {
  const memory = record.memory;
  const sourceKeys = Object.keys(memory.sources);
  const inhibitorKeys = Object.keys(memory.inhibitorsFirstSeenMs);
  if (sourceKeys.length <= MAX_REMEMBERED_SOURCES && inhibitorKeys.length <= MAX_REMEMBERED_INHIBITORS) return record;
  return { ...record, memory: boundedMemory(memory, latest) };
}

function boundedMemory(memory: EvidenceMemory, latest: ReceivedReport | undefined): EvidenceMemory {
  const named = new Set<string>();
  for (const status of latest?.report.sources ?? []) named.add(status.source);
  for (const server of latest?.report.jupyter?.servers ?? []) named.add(`jupyter ${server.url}`);
  const seenAt = (key: string) => {
    const source = memory.sources[key]!;
    return Math.max(source.lastOkAtMs ?? -Infinity, source.blindSinceMs ?? -Infinity);
  };
  const kept = new Set(
    Object.keys(memory.sources)
      .filter((key) => !named.has(key))
      .sort((a, b) => seenAt(b) - seenAt(a))
      .slice(0, MAX_REMEMBERED_SOURCES),
  );
  // The kept keys in their existing order: objects built in a stable key order share V8's hidden
  // classes; an order that changed with each Report's recency made new ones per VM (62 per VM,
  // 6.6 KB of heap each VM at 2k VMs, bench/.. heap snapshot).
  const sources: EvidenceMemory["sources"] = {};
  for (const key of Object.keys(memory.sources))
    if (named.has(key) || kept.has(key)) sources[key] = memory.sources[key]!;
  const newest = new Set(
    Object.entries(memory.inhibitorsFirstSeenMs)
      .sort((a, b) => b[1] - a[1])
      .slice(0, MAX_REMEMBERED_INHIBITORS)
      .map(([lock]) => lock),
  );
  const inhibitorsFirstSeenMs: EvidenceMemory["inhibitorsFirstSeenMs"] = {};
  for (const [lock, atMs] of Object.entries(memory.inhibitorsFirstSeenMs))
    if (newest.has(lock)) inhibitorsFirstSeenMs[lock] = atMs;
  return { ...memory, sources, inhibitorsFirstSeenMs };
}
