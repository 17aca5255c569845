// What `ws-lease status` shows: the record as the agent receives it in a Directive.

import type { MessageInitShape } from "@bufbuild/protobuf";
import { PolicyMode, VmState, type VmStatusSchema } from "@ws/protocol";
import { idleSecondsAt } from "./activity.js";
import type { EngineState, Policy, VmRecord } from "./types.js";

export const PROTO_STATE: Readonly<Record<EngineState, VmState>> = {
  Unknown: VmState.UNKNOWN,
  Active: VmState.ACTIVE,
  StoppingPending: VmState.STOPPING_PENDING,
  Stopping: VmState.STOPPING,
  Stopped: VmState.STOPPED,
  AgentLost: VmState.AGENT_LOST,
};

/** Seconds until the stop if nothing changes, as the last decision scheduled it; undefined when none is. */
export function stopInSeconds(record: VmRecord, policy: Policy, nowMs: number): number | undefined {
  if (!policy.autostopEnabled || record.scheduledStopAtMs === undefined) return undefined;
  return Math.max(0, (record.scheduledStopAtMs - nowMs) / 1000);
}

export function statusFor(record: VmRecord, policy: Policy, nowMs: number): MessageInitShape<typeof VmStatusSchema> {
  const idle = idleSecondsAt(record, nowMs) ?? 0;
  const stopIn = stopInSeconds(record, policy, nowMs);
  return {
    state: PROTO_STATE[record.state],
    idleSeconds: idle,
    activeSignals: [...record.activeSignals],
    ...(stopIn !== undefined ? { stopInSeconds: stopIn } : {}),
    explanation: record.summary,
    mode: policy.mode === "observe" ? PolicyMode.OBSERVE : PolicyMode.ENFORCE,
  };
}
