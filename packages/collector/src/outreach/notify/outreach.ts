// Reaching people: turns each decision of the per-VM loop into history,
// webhooks and keep-running links. The loop calls the FleetObserver methods
// (see the hook points in fleet.ts, marked "outreach hook"); everything runs
// without waiting on the network, so no receiver can delay a decision.
import { dormantRequest } from "../dormant/payloads.js";
import { type DormantVm, dormantText } from "../dormant/report.js";
import type { Logger } from "@ws/protocol";
import { type VmKey, vmId } from "../../model/vm-key.js";
import { idleSecondsAt } from "../../engine/activity.js";
import type { Decision, EngineState, Policy, StopResult, StopTrigger, VmRecord } from "../../engine/types.js";
import type { QuietMinutePoint } from "../../model/quiet-minutes.js";
import { History } from "../history.js";
import { keepLinkUrl } from "../../links/keep-token.js";
import type { VmMetadata } from "../../model/policy-source.js";
import { ownerOf, redactUrl, targetsFor, type NotificationsConfig } from "./config.js";
import { stopTransition, transitionsOf, warnsPeople, type VmTransition } from "./events.js";
import { requestFor, type NotificationContent } from "./payloads.js";
import { WebhookSender } from "./sender.js";
import type { StopEnds } from "../../loop/stop-ends.js";
import type { FleetObserver } from "../../loop/fleet-observer.js";

export interface OutreachOptions {
  config: NotificationsConfig;
  log: Logger;
  /** The VM's labels and annotations (Kubernetes objects, or the standalone config). */
  metadataFor: (vm: VmKey) => VmMetadata;
  /** The policy annotation prefix, for the per-VM notify-url annotation. */
  prefix: string;
  /** Key for keep-running links (deriveLinkKey of the token key). */
  linkKey: Buffer;
  /** The VM's start link valid from now (links/start-token.ts), or undefined without a public URL. */
  startUrl?: (vm: VmKey, nowMs: number) => string | undefined;
  /** What a stop of the VM would end now (loop/stop-ends.ts, from its latest Report). */
  stopEndsOf?: (vm: VmKey) => StopEnds | undefined;
  history?: History;
  sender?: WebhookSender;
}

export class Outreach implements FleetObserver {
  readonly history: History;
  readonly sender: WebhookSender;
  /** Annotation problems already logged, so a bad annotation is logged once, not per notice. */
  private readonly reportedProblems = new Map<string, string>();

  constructor(private readonly options: OutreachOptions) {
    this.history = options.history ?? new History();
    this.sender =
      options.sender ??
      new WebhookSender({
        log: options.log,
        timeoutMs: options.config.timeoutMs,
        retries: options.config.retries,
        queueSize: options.config.queueSize,
      });
  }

  get config(): NotificationsConfig {
    return this.options.config;
  }

  decided(vm: VmKey, decision: Decision, previous: VmRecord | undefined, policy: Policy, nowMs: number): void {
    const next = decision.next;
    this.history.point(vm, {
      atMs: nowMs,
      // A Stopped VM's idle clock does not run: its chart shows no idle time, not an ever-growing one.
      idleSeconds: idleSecondsAt(next, nowMs) ?? Number.NaN,
      activeSignals: next.activeSignals.length,
      state: next.state,
    });
    if (previous?.state !== next.state)
      this.history.transition(vm, {
        atMs: nowMs,
        what: `${previous?.state ?? "new"} → ${next.state}`,
        reason: decision.summary,
      });
    for (const transition of transitionsOf(vm, decision, nowMs, previous)) this.announce(transition, policy);
  }

  quietMinutes(vm: VmKey, minutes: readonly QuietMinutePoint[], state: EngineState): void {
    for (const minute of minutes)
      this.history.point(vm, {
        atMs: minute.atMs,
        idleSeconds: minute.idleSeconds,
        activeSignals: minute.active ? 1 : 0,
        state,
      });
  }

  stopped(
    vm: VmKey,
    result: StopResult,
    stop: { reason: string; trigger: StopTrigger },
    policy: Policy,
    nowMs: number,
  ): void {
    this.announce(stopTransition(vm, result, stop, nowMs), policy);
  }

  deliversNotice(mode: Policy["mode"], policy: Policy): boolean {
    return warnsPeople({ mode }, policy);
  }

  noticeLink(vm: VmKey, noticeId: string, deadlineMs: number, nowMs = deadlineMs): string | undefined {
    if (!this.options.config.publicUrl) return undefined;
    const keep = keepLinkUrl(this.options.config.publicUrl, this.options.linkKey, {
      namespace: vm.namespace,
      name: vm.name,
      noticeId,
      expiresAtMs: deadlineMs,
    });
    // The notice in the VM also says how to come back after the stop.
    const start = this.options.startUrl?.(vm, nowMs);
    return start ? `${keep} — to come back later: ${start}` : keep;
  }

  /** The keep-running link alone, for webhook buttons. */
  private keepLink(vm: VmKey, noticeId: string, deadlineMs: number): string | undefined {
    if (!this.options.config.publicUrl) return undefined;
    return keepLinkUrl(this.options.config.publicUrl, this.options.linkKey, {
      namespace: vm.namespace,
      name: vm.name,
      noticeId,
      expiresAtMs: deadlineMs,
    });
  }

  vmUrl(vm: VmKey): string | undefined {
    const base = this.options.config.publicUrl;
    return base ? `${base}/vm/${encodeURIComponent(vm.namespace)}/${encodeURIComponent(vm.name)}` : undefined;
  }

  owner(vm: VmKey): string {
    const { labels, annotations } = this.options.metadataFor(vm);
    return ownerOf(this.options.config, labels, annotations);
  }

  forget(vm: VmKey): void {
    this.history.forget(vm);
    this.reportedProblems.delete(vmId(vm));
  }

  /** A user's report that the VM's last stop was a mistake (comeback/start/dispute.ts): history and webhooks. */
  disputed(transition: VmTransition & { kind: "dispute" }, policy: Policy): void {
    this.announce(transition, policy);
  }

  /** The VM's scheduled start could not be made or placed (comeback/schedule/runner.ts): history and webhooks. */
  scheduled(transition: VmTransition & { kind: "schedule" }, policy: Policy): void {
    this.announce(transition, policy);
  }

  /** A dormant VM's reminder (dormant/payloads.ts): the webhooks its other messages go to. */
  remindDormant(
    vm: DormantVm,
    metadata: { labels: Record<string, string>; annotations: Record<string, string> },
    nowMs: number,
  ): void {
    const { targets, problems } = targetsFor(this.options.config, {
      profile: vm.profile,
      ...metadata,
      prefix: this.options.prefix,
    });
    this.reportProblems(vm, problems);
    this.history.transition(vm, { atMs: nowMs, what: "dormant reminder", reason: dormantText(vm) });
    const startUrl = this.options.startUrl?.(vm, nowMs);
    for (const target of targets) {
      const request = dormantRequest(target, vm, nowMs, startUrl);
      this.sender.enqueue({
        name: target.name,
        format: target.format,
        url: request.url,
        body: request.body,
        about: `dormant reminder for ${vmId(vm)}`,
      });
    }
  }

  /** A start that cannot be placed, or placed at last (comeback/wait/placement.ts): history and webhooks. */
  startPlacement(transition: VmTransition & { kind: "unplaced" | "placed" }, policy: Policy): void {
    this.announce(transition, policy);
  }

  private announce(transition: VmTransition, policy: Policy): void {
    const warns = warnsPeople(transition, policy);
    const what = `${transition.kind === "reminder" ? "notice (reminder)" : transition.kind}${!warns && transition.kind !== "would-stop" ? " (observe mode: nobody warned)" : ""}`;
    this.history.transition(transition.vm, { atMs: transition.atMs, what, reason: transition.reason });
    if (!warns) return;
    if (!this.options.config.send.includes(transition.kind)) return;
    const { labels, annotations } = this.options.metadataFor(transition.vm);
    const { targets, problems } = targetsFor(this.options.config, {
      profile: policy.profile,
      labels,
      annotations,
      prefix: this.options.prefix,
    });
    this.reportProblems(transition.vm, problems);
    if (targets.length === 0) return;
    const keepUrl =
      (transition.kind === "notice" || transition.kind === "reminder") &&
      transition.noticeId &&
      transition.deadlineMs !== undefined
        ? this.keepLink(transition.vm, transition.noticeId, transition.deadlineMs)
        : undefined;
    const vmUrl = this.vmUrl(transition.vm);
    const ends =
      transition.kind === "notice" || transition.kind === "reminder"
        ? this.options.stopEndsOf?.(transition.vm)
        : undefined;
    const startUrl =
      transition.kind === "notice" || transition.kind === "reminder" || transition.kind === "stop"
        ? this.options.startUrl?.(transition.vm, transition.atMs)
        : undefined;
    const content: NotificationContent = {
      transition,
      owner: ownerOf(this.options.config, labels, annotations),
      ...(keepUrl ? { keepUrl } : {}),
      ...(vmUrl ? { vmUrl } : {}),
      ...(startUrl ? { startUrl } : {}),
      ...(ends ? { ends } : {}),
    };
    for (const target of targets) {
      const request = requestFor(target, content);
      this.sender.enqueue({
        name: target.name,
        format: target.format,
        url: request.url,
        body: request.body,
        about: `${transition.kind} for ${vmId(transition.vm)}`,
      });
    }
  }

  private reportProblems(vm: VmKey, problems: string[]): void {
    const key = problems.join("; ");
    if (this.reportedProblems.get(vmId(vm)) === key) return;
    this.reportedProblems.set(vmId(vm), key);
    if (problems.length)
      this.options.log("warn", `${vmId(vm)}: notification annotations ignored: ${key}`, { vm: vmId(vm) });
  }
}

export { redactUrl };
