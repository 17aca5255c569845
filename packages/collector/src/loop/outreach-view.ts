// What the people around a VM see of it, apart from the loop: the notice as its users get it
// (what a stop frees, the keep-running link, or no notice where outreach warns nobody), the
// owner, the VM page's detail, and the keep-running link's context and grant. Fleet looks the VM
// up and routes here; nothing here decides or counts.
import { randomBytes } from "node:crypto";
import { create } from "@bufbuild/protobuf";
import { DirectiveSchema, type Logger, SourceState } from "@ws/protocol";
import type { AgentSession } from "../agents/server.js";
import type { Action } from "../engine/types.js";
import type { GrantOutcome, KeepContext, LinkGrant } from "./keep-grant.js";
import type { VmKey } from "../model/vm-key.js";
import type { FleetObserver } from "./fleet-observer.js";
import type { VmDetail, VmPlatformDetails, VmView } from "../model/vm-view.js";
import type { directiveFields } from "./directive.js";
import type { VmLoopState } from "./step.js";
import { stopEnds } from "./stop-ends.js";

/** One VM as outreach reads it. */
export interface OutreachVm {
  id: string;
  key: VmKey;
  loop: VmLoopState;
  session: AgentSession | undefined;
  view(nowMs: number): VmView;
}

export interface OutreachViewOptions {
  log: Logger;
  observer?: FleetObserver;
  vmDetails?: (vm: VmKey) => VmPlatformDetails | undefined;
}

export class OutreachView {
  constructor(private readonly options: OutreachViewOptions) {}

  /**
   * The notice as the VM's users get it: what a stop frees (Kubernetes), the keep-running link,
   * or no notice at all where outreach says nobody is warned (observe mode by default).
   */
  addressNotice(vm: OutreachVm, actions: readonly Action[], fields: ReturnType<typeof directiveFields>): void {
    const notice = actions.find((a): a is Extract<Action, { kind: "notice" }> => a.kind === "notice");
    if (!notice || !fields.notice) return;
    const observer = this.options.observer;
    if (observer && !observer.deliversNotice(notice.mode, vm.loop.policy)) {
      delete fields.notice;
      return;
    }
    const frees = this.options.vmDetails?.(vm.key)?.frees;
    if (frees) fields.notice.reason = `${fields.notice.reason}; ${frees}`;
    // What the stop will end, from the VM's latest Report (loop/stop-ends.ts): sessions, kernels, processes by name.
    const ends = stopEnds(vm.loop.latest?.report);
    if (ends) fields.notice.reason = `${fields.notice.reason}; the stop ends ${ends.text}`;
    const link = observer?.noticeLink(vm.key, notice.id, notice.deadlineMs);
    if (link) fields.notice.keepRunningHint = keepHintWithLink(fields.notice.keepRunningHint, link);
  }

  /** What the platform knows of the VM, with the owner outreach reads where the platform names none (standalone). */
  platformOf(vm: VmKey): VmPlatformDetails | undefined {
    const details = this.options.vmDetails?.(vm);
    const owner = details?.owner ?? this.options.observer?.owner(vm);
    return owner === undefined || owner === "" ? details : { ...details, owner };
  }

  detail(vm: OutreachVm, nowMs: number): VmDetail {
    const notice = vm.loop.record?.notice;
    return {
      view: vm.view(nowMs),
      explanation: vm.loop.lastDecision?.explanation,
      policy: vm.loop.policy,
      sources: (vm.loop.latest?.report.sources ?? []).map((source) => ({
        source: source.source,
        state: SourceState[source.state]?.toLowerCase() ?? "unknown",
        message: source.message,
      })),
      ...(notice
        ? {
            notice: {
              id: notice.id,
              reason: notice.reason,
              deadlineMs: notice.deadlineMs,
              mode: notice.mode,
              ...(notice.wouldStopAtMs !== undefined ? { wouldStopAtMs: notice.wouldStopAtMs } : {}),
            },
          }
        : {}),
    };
  }

  keepContext(vm: OutreachVm): KeepContext {
    const notice = vm.loop.record?.notice;
    return {
      state: vm.loop.record?.state ?? "Unknown",
      mode: vm.loop.policy.mode,
      connected: vm.session !== undefined,
      owner: this.platformOf(vm.key)?.owner ?? "",
      maxKeepRunningSeconds: vm.loop.policy.maxKeepRunningSeconds,
      ...(notice ? { notice: { id: notice.id, reason: notice.reason, deadlineMs: notice.deadlineMs } } : {}),
    };
  }

  grantViaLink(vm: OutreachVm | undefined, grant: LinkGrant): GrantOutcome {
    if (!vm?.session)
      return {
        ok: false,
        message: "the VM's agent is not connected right now, so it cannot be told; nothing was changed",
      };
    if (vm.loop.record?.notice?.id !== grant.noticeId)
      return {
        ok: false,
        message: "this notice is no longer pending (the stop was cancelled or has happened); nothing was changed",
      };
    const leaseId = randomBytes(4).toString("hex");
    const seconds = Math.min(grant.seconds, vm.loop.policy.maxKeepRunningSeconds);
    vm.session.send(
      create(DirectiveSchema, {
        leaseGrants: [
          { id: leaseId, seconds, user: grant.user, reason: grant.reason, via: "link", noticeId: grant.noticeId },
        ],
      }),
    );
    this.options.log("info", `${vm.id}: keep-running link used: lease ${leaseId} for ${seconds}s sent to the agent`, {
      vm: vm.id,
      notice: grant.noticeId,
    });
    return { ok: true, leaseId };
  }
}

/** The notice's keep-running hint with its links (the keep link, then the start link): they end the hint, bare. */
export function keepHintWithLink(hint: string | undefined, link: string): string {
  return `${hint ?? ""} Or open ${link}`.trim();
}
