// The agent side of the Fleet: what each VM's agent stream is sent. The hello Directive when a
// stream opens (the policy, and the welcome back after a start), and after each decision the
// Directive its actions carry, with the ReportWhen of a "report-on-change" agent
// (loop/report-when.ts). Only sends: the decisions are made in loop/step.ts.
import { create } from "@bufbuild/protobuf";
import { DirectiveSchema, REPORT_ON_CHANGE_CAPABILITY } from "@ws/protocol";
import type { AgentSession } from "../agents/server.js";
import type { Decision } from "../engine/types.js";
import type { VmKey } from "../model/vm-key.js";
import { type DirectiveFields, directiveWithStatus, hasAgentContent, helloDirective } from "./directive.js";
import type { VmEntry } from "./fleet-entries.js";
import { type ReportPlan, reportPlan, reportWhenFields, tighterThan } from "./report-when.js";

/** What the first Directive of a new stream adds to the policy (FleetOptions.greeting). */
export type Greeting = (vm: VmKey, bootId: string) => DirectiveFields["welcome"] | undefined;

/** A new stream for the entry's VM: it becomes the entry's session and is sent the hello Directive. */
export function greetAgent(entry: VmEntry, session: AgentSession, greeting: Greeting | undefined): void {
  entry.session = session;
  entry.reportPlan = undefined;
  entry.agentVersion = session.hello.agentVersion;
  entry.peer = session.peer;
  const hello = helloDirective(entry.loop.policy);
  const welcome = greeting?.(entry.key, session.hello.bootId);
  if (welcome) hello.welcome = welcome;
  session.send(create(DirectiveSchema, hello));
}

/**
 * After a decision: the agent is sent a Directive when it answers a Report, when the decision
 * has something for the agent, or when a report-on-change agent must report sooner than it was
 * told. `heartbeatMs` 0: no agent is sent a ReportWhen; `everySample`: why it must send every
 * sample whatever the decision (a start waiting for the entry service).
 */
export function tellAgent(
  entry: VmEntry,
  decision: Decision,
  fields: DirectiveFields,
  how: { now: number; fromReport: boolean; heartbeatMs: number; everySample?: string | undefined },
): void {
  const { now, fromReport, heartbeatMs, everySample } = how;
  const session = entry.session;
  if (!session) return;
  const plan: ReportPlan | undefined = !reportsOnChange(session, heartbeatMs)
    ? undefined
    : everySample
      ? { kind: "every-sample", why: everySample }
      : reportPlan(decision, entry.loop.policy, now, heartbeatMs);
  if (fromReport || hasAgentContent(fields) || (plan && tighterThan(plan, entry.reportPlan))) {
    const directive = directiveWithStatus(fields, decision.next, entry.loop.policy, now);
    if (plan) {
      directive.reportWhen = reportWhenFields(plan, now);
      entry.reportPlan = plan;
    }
    session.send(create(DirectiveSchema, directive));
  }
}

/** An agent that announced "report-on-change", while the heartbeat is on, is sent a ReportWhen after each decision. */
function reportsOnChange(session: AgentSession, heartbeatMs: number): boolean {
  return heartbeatMs !== 0 && session.hello.capabilities.includes(REPORT_ON_CHANGE_CAPABILITY);
}
