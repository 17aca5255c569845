// What a decision tells the agent: the Directive fields its actions carry. Pure:
// the Fleet sends the result and executes the other actions (stop, events, persist).
import type { MessageInitShape } from "@bufbuild/protobuf";
import { type DirectiveSchema, PolicyMode } from "@ws/protocol";
import { toEffectivePolicy } from "../engine/policy.js";
import { statusFor } from "../engine/status.js";
import type { Action, Policy, VmRecord } from "../engine/types.js";

export type DirectiveFields = MessageInitShape<typeof DirectiveSchema>;

/** The Directive fields of a decision's actions (empty when none of them is for the agent). */
export function directiveFields(actions: readonly Action[]): DirectiveFields {
  const directive: DirectiveFields = {};
  for (const action of actions) {
    switch (action.kind) {
      case "notice":
        directive.notice = {
          id: action.id,
          stopInSeconds: action.stopInSeconds,
          reason: action.reason,
          keepRunningHint: action.hint,
          idleSeconds: action.idleSeconds,
          mode: action.mode === "observe" ? PolicyMode.OBSERVE : PolicyMode.ENFORCE,
        };
        break;
      case "notice-cleared":
        directive.noticeCleared = { id: action.id, reason: action.reason };
        break;
      case "lease-decisions":
        directive.leaseDecisions = action.decisions.map((d) => ({
          id: d.id,
          accepted: d.accepted,
          clamped: d.clamped,
          effectiveRemainingSeconds: d.effectiveRemainingSeconds,
          maxKeepRunningSeconds: d.maxKeepRunningSeconds,
          message: d.message,
        }));
        break;
      default:
        break;
    }
  }
  return directive;
}

/** Whether the decision has something for the agent beyond the status line. */
export function hasAgentContent(fields: DirectiveFields): boolean {
  return fields.notice !== undefined || fields.noticeCleared !== undefined || fields.leaseDecisions !== undefined;
}

/** The Directive answering a Report (or carrying a notice): the fields plus the VM's status line. */
export function directiveWithStatus(
  fields: DirectiveFields,
  record: VmRecord,
  policy: Policy,
  nowMs: number,
): DirectiveFields {
  const directive: DirectiveFields = { ...fields };
  directive.status = statusFor(record, policy, nowMs);
  return directive;
}

/** The first Directive of a stream: the interval and the effective policy. */
export function helloDirective(policy: Policy): DirectiveFields {
  return { reportIntervalSeconds: policy.reportIntervalSeconds, policy: toEffectivePolicy(policy) };
}
