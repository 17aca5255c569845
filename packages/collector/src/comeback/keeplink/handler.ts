// /keep/NAMESPACE/NAME?t=TOKEN: the keep-running link. GET shows the VM, why
// it is about to stop and the choices; only a POST (a button press) grants a
// lease, so link scanners and previews extend nothing. Every refusal is a
// page that says why and that nothing changed.
import type { Logger } from "@ws/protocol";
import { formatDuration } from "@ws/protocol";
import { linkRefusal } from "../../web/refusal.js";
import { type VmKey, vmId } from "../../model/vm-key.js";
import { at, escapeHtml, page, vmPath, when } from "../../web/html.js";
import type { KeepContext, KeepGranter } from "../../loop/keep-grant.js";
import { UsedLinks, verifyKeepLink, type KeepClaims } from "../../links/keep-token.js";

export interface KeepHandlerOptions {
  granter: KeepGranter;
  linkKey: Buffer;
  /** The choices offered, in hours (each capped by the VM's max-keep-running). */
  choicesHours: number[];
  nowMs: () => number;
  log: Logger;
  /** Records a used link on the VM (Kubernetes Event; standalone: a log line). */
  audit?: (vm: VmKey, message: string) => void;
  used?: UsedLinks;
}

export interface KeepRequest {
  method: string;
  vm: VmKey;
  token: string;
  /** POST: the chosen duration in seconds, as the form sends it. */
  keepSeconds?: string;
}

export interface KeepResponse {
  status: number;
  html: string;
}

/** The durations offered: the configured ones capped by max-keep-running, without duplicates. */
export function keepChoices(choicesHours: number[], maxKeepRunningSeconds: number): number[] {
  const seconds = choicesHours.map((hours) => Math.min(Math.round(hours * 3600), maxKeepRunningSeconds));
  return [...new Set(seconds)].sort((a, b) => a - b);
}

export class KeepLinks {
  private readonly used: UsedLinks;

  constructor(private readonly options: KeepHandlerOptions) {
    this.used = options.used ?? new UsedLinks();
  }

  handle(request: KeepRequest): KeepResponse {
    const now = this.options.nowMs();
    const { vm } = request;
    const verdict = verifyKeepLink(this.options.linkKey, request.token, vm, now);
    if (!verdict.ok) {
      const refused = linkRefusal(verdict.problem, verdict.claims, vm, "This link", ", the end of the warning period.");
      return refusal(refused.status, vm, refused.title, refused.detailHtml);
    }
    const claims = verdict.claims;
    const previous = this.used.usedAt(claims);
    if (previous) {
      return refusal(
        409,
        vm,
        "This link was already used",
        `It kept the VM running for ${formatDuration(previous.seconds)} at ${at(previous.atMs)}. A link works once; the next warning brings a new one.`,
      );
    }
    const context = this.options.granter.keepContext(vm, now);
    if (!context)
      return refusal(
        404,
        vm,
        "This VM is not known here",
        "The collector does not track this VM (it may have been deleted).",
      );
    if (context.notice?.id !== claims.noticeId) {
      return refusal(
        409,
        vm,
        "This warning is over",
        "The stop it warned about is no longer pending: it was cancelled (activity, a lease) or it has happened.",
      );
    }
    const choices = keepChoices(this.options.choicesHours, context.maxKeepRunningSeconds);
    if (request.method === "GET" || request.method === "HEAD")
      return { status: 200, html: confirmPage(vm, context, choices, request.token, now) };
    if (request.method !== "POST")
      return refusal(405, vm, "Use the buttons", "This address answers GET (the page) and POST (a button).");

    const seconds = Number(request.keepSeconds);
    if (!choices.includes(seconds))
      return refusal(
        400,
        vm,
        "Choose one of the buttons",
        `Offered: ${choices.map((s) => formatDuration(s)).join(", ")}.`,
      );
    const outcome = this.options.granter.grantViaLink(
      vm,
      {
        noticeId: claims.noticeId,
        seconds,
        user: context.owner,
        reason: `kept running via link${context.owner ? ` by ${context.owner}` : ""}`,
      },
      now,
    );
    if (!outcome.ok) return refusal(409, vm, "The VM could not be kept running", escapeHtml(outcome.message));
    this.used.markUsed(claims, now, seconds);
    const message = `keep-running link used: lease ${outcome.leaseId} for ${formatDuration(seconds)}${context.owner ? ` (sent to ${context.owner})` : ""}, notice ${claims.noticeId}`;
    this.options.log("info", `${vmId(vm)}: ${message}`, { vm: vmId(vm) });
    this.options.audit?.(vm, message);
    return { status: 200, html: grantedPage(vm, seconds, outcome.leaseId, now) };
  }
}

function header(vm: VmKey): string {
  return `<p class="muted">Workstation <a href="../..${vmPath(vm.namespace, vm.name)}">${escapeHtml(vmId(vm))}</a></p>`;
}

function refusal(status: number, vm: VmKey, title: string, detailHtml: string): KeepResponse {
  return {
    status,
    html: page(
      title,
      `${header(vm)}<h1>${escapeHtml(title)}</h1>
<div class="box bad" id="refusal" data-status="${status}"><p>${detailHtml}</p><p><strong>Nothing was changed.</strong></p></div>
<p>To keep the VM running from inside it: <code>ws-lease 4h --reason "what you are running"</code>.</p>`,
    ),
  };
}

function confirmPage(vm: VmKey, context: KeepContext, choices: number[], token: string, nowMs: number): string {
  const notice = context.notice!;
  const buttons = choices
    .map(
      (seconds) =>
        `<button type="submit" name="keep" value="${seconds}">Keep ${escapeHtml(formatDuration(seconds))}</button>`,
    )
    .join("");
  return page(
    `Keep ${vmId(vm)} running?`,
    `${header(vm)}<h1>Keep ${escapeHtml(vmId(vm))} running?</h1>
<div class="box warn"><dl>
<dt>VM</dt><dd>${escapeHtml(vmId(vm))}${context.owner ? ` (${escapeHtml(context.owner)})` : ""}</dd>
<dt>Why it would stop</dt><dd id="reason">${escapeHtml(notice.reason)}</dd>
<dt>Stops</dt><dd>${when(notice.deadlineMs, nowMs)} (${at(notice.deadlineMs)})${context.mode === "observe" ? " — observe mode: it would stop, nothing is stopped" : ""}</dd>
</dl></div>
<form method="post">
<input type="hidden" name="t" value="${escapeHtml(token)}">
${buttons}
</form>
<p class="muted">A keep-running lease holds the VM even while it looks idle, at most ${escapeHtml(formatDuration(context.maxKeepRunningSeconds))} (max-keep-running). It shows in <code>ws-lease list</code> as "via link". The link works once.</p>`,
  );
}

function grantedPage(vm: VmKey, seconds: number, leaseId: string, nowMs: number): string {
  return page(
    `${vmId(vm)} keeps running`,
    `${header(vm)}<h1>${escapeHtml(vmId(vm))} keeps running</h1>
<div class="box ok" id="granted"><p>A lease of <strong>${escapeHtml(formatDuration(seconds))}</strong> (until about ${at(nowMs + seconds * 1000)}) was sent to the VM: lease <code>${escapeHtml(leaseId)}</code>, via link.</p>
<p>The pending stop is cancelled as soon as the VM's agent reports the lease (seconds). <a href="../..${vmPath(vm.namespace, vm.name)}">See the VM's page</a>.</p></div>`,
  );
}

export type { KeepClaims };
