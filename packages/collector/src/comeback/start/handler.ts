// /start/NAMESPACE/NAME?t=TOKEN: the start link. GET shows the VM, its owner, when and why it
// stopped and what a start allocates, with a Start button; only a POST (the button) starts, so
// link scanners and previews start nothing. After the POST the same address shows each stage
// with its time and refreshes itself (no JavaScript), then a Connect button to the VM's entry
// point. Every refusal is a page that says why and that nothing changed.
import type { Logger, Report } from "@ws/protocol";
import { formatDuration } from "@ws/protocol";
import { linkRefusal } from "../../web/refusal.js";
import { type VmKey, vmId } from "../../model/vm-key.js";
import { at, escapeHtml, page, vmPath, when } from "../../web/html.js";
import { entryFor, type StartConfig } from "./config.js";
import type { LastStopFacts, StartFacts, StartPlatform } from "./platform.js";
import { cleanDisputeText, type Dispute, disputeKnob, disputeOpen } from "./dispute.js";
import { startProgress, type StartProgress } from "./progress.js";
import { entryReadiness } from "./readiness.js";
import { signStartLink, verifyStartLink } from "../../links/start-token.js";
import { runViewOf, type StartTracker, type StartTrigger } from "./tracker.js";
import { type EntryProber, probePortFor } from "../wait/probe.js";
import { waitTriggerOf } from "../wait/stages.js";
import { type PlacementNews, placementNews } from "../wait/placement.js";
import { summarizeWaits, waitSummaryHtml } from "../wait/summary.js";
import type { ReturnRecord } from "../warm/returns.js";

/** What the collector's own loop knows of the VM's agent. */
export interface AgentState {
  connectedAtMs?: number;
  latest?: { report: Report; receivedAtMs: number };
  /** The named profile the VM selected, "" for none. */
  profile: string;
}

export interface StartHandlerOptions {
  platform: StartPlatform;
  tracker: StartTracker;
  /** A start the scheduler cannot place (once per start), and the same start placed at last. */
  placement?: (vm: VmKey, news: PlacementNews) => void;
  /** The collector's own look at a starting VM's entry service; none: the agent's word only. */
  prober?: EntryProber;
  linkKey: Buffer;
  config: StartConfig;
  /** The policy annotation prefix (entry-url, entry-service annotations). */
  prefix: string;
  agentOf: (vm: VmKey) => AgentState | undefined;
  nowMs: () => number;
  log: Logger;
  /** Records a start (Kubernetes: a `Started` Event; standalone: a log line). */
  audit?: (vm: VmKey, message: string) => void;
  /** How often the progress page reloads itself (default 2 s). */
  refreshSeconds?: number;
  /** A user says the last stop was a mistake: count it, audit it, send it (serve.ts wires these). */
  disputed?: (vm: VmKey, dispute: Dispute, stop: LastStopFacts) => void;
}

export interface StartRequest {
  method: string;
  vm: VmKey;
  token: string;
  /** The caller asked for JSON (Accept: application/json): the ssh helper. */
  json?: boolean;
  /** The form's `via`: "ssh" when the ssh helper presses Start. */
  via?: string;
  /** The form's dispute button ("this stop was a mistake") and what the user was doing. */
  dispute?: { what: string };
}

/** What the ssh helper reads: the page's facts as data. */
export interface StartJson {
  vm: { namespace: string; name: string };
  status: StartProgress["status"];
  stages: StartProgress["stages"];
  unschedulable?: StartProgress["unschedulable"];
  failure?: string;
  entryUrl?: string;
}

export interface StartResponse {
  status: number;
  html: string;
  /** Set for JSON callers (the ssh helper) instead of html. */
  json?: StartJson | { error: string };
  /** Set for the redirect after a POST (POST → 303 → GET: a reload never posts twice). */
  location?: string;
}

/** A start asked for through a path that already proved who asks (the fixed address, the ssh helper). */
export interface AuthorizedStart {
  vm: VmKey;
  by: string;
  trigger: StartTrigger;
}

export class StartLinks {
  constructor(private readonly options: StartHandlerOptions) {}

  /** The start link's page (GET) and button (POST). */
  async handle(request: StartRequest): Promise<StartResponse> {
    const now = this.options.nowMs();
    const { vm } = request;
    const verdict = verifyStartLink(this.options.linkKey, request.token, vm, now);
    if (!verdict.ok && request.json)
      return {
        status: verdict.problem === "expired" ? 410 : 400,
        html: "",
        json: { error: `start link ${verdict.problem}` },
      };
    if (!verdict.ok) {
      const refused = linkRefusal(
        verdict.problem,
        verdict.claims,
        vm,
        "This start link",
        ". The next stop message brings a new one; the VM's page has one too.",
      );
      return refusal(refused.status, vm, refused.title, refused.detailHtml);
    }
    const facts = this.options.platform.facts(vm);
    if (!facts) return request.json ? { status: 404, html: "", json: { error: "no such VM" } } : unknownVm(vm);
    if (request.json) {
      if (request.method === "POST") {
        const owner = facts.owner ?? "";
        const trigger = request.via === "ssh" ? "ssh" : "link";
        await this.start({ vm, by: owner ? `the start link sent to ${owner}` : "the start link", trigger });
      } else if (request.method !== "GET") return { status: 405, html: "", json: { error: "GET or POST" } };
      const { progress, entryUrl } = this.compute(vm, this.options.platform.facts(vm) ?? facts, this.options.nowMs());
      return {
        status: request.method === "POST" ? 202 : 200,
        html: "",
        json: {
          vm: { namespace: vm.namespace, name: vm.name },
          status: progress.status,
          stages: progress.stages,
          ...(progress.unschedulable ? { unschedulable: progress.unschedulable } : {}),
          ...(progress.failure ? { failure: progress.failure } : {}),
          ...(entryUrl ? { entryUrl } : {}),
        },
      };
    }
    if (request.method === "GET" || request.method === "HEAD")
      return { status: 200, html: this.render(vm, facts, request.token, now) };
    if (request.method !== "POST")
      return refusal(405, vm, "Use the button", "This address answers GET (the page) and POST (the Start button).");
    const owner = facts.owner ?? "";
    if (request.dispute)
      return this.dispute(
        vm,
        facts,
        request.dispute.what,
        owner ? `the start link sent to ${owner}` : "the start link",
      );
    await this.start({ vm, by: owner ? `the start link sent to ${owner}` : "the start link", trigger: "link" });
    return { status: 303, html: "", location: `?t=${encodeURIComponent(request.token)}` };
  }

  /** "This stop was a mistake": kept with the stop's record, counted, audited, sent; once per stop. */
  dispute(vm: VmKey, facts: StartFacts, text: string, by: string): Promise<StartResponse> {
    // One at a time per VM on this replica: the second of two parallel reports reads what the
    // first wrote. Across replicas the platform's write is conditional (kube: resourceVersion).
    const id = vmId(vm);
    const previous = this.disputesInFlight.get(id) ?? Promise.resolve();
    const next = previous.then(() => this.disputeOnce(vm, facts, text, by));
    const settled = next.then(
      () => undefined,
      () => undefined,
    );
    this.disputesInFlight.set(id, settled);
    void settled.then(() => {
      if (this.disputesInFlight.get(id) === settled) this.disputesInFlight.delete(id);
    });
    return next;
  }

  private readonly disputesInFlight = new Map<string, Promise<void>>();

  private async disputeOnce(vm: VmKey, facts: StartFacts, text: string, by: string): Promise<StartResponse> {
    const stop = facts.lastStop;
    if (!stop) return refusal(409, vm, "No stop to dispute", "ws has no record of stopping this VM.");
    const already = (atMs: number): StartResponse => ({
      status: 200,
      html: disputedPage(vm, `Already reported at ${at(atMs)}: thank you.`),
    });
    if (stop.disputedAtMs !== undefined) return already(stop.disputedAtMs);
    const dispute: Dispute = { atMs: this.options.nowMs(), by, what: cleanDisputeText(text), knob: disputeKnob(stop) };
    const kept = await this.options.platform.recordDispute?.(
      vm,
      { at: new Date(dispute.atMs).toISOString(), by: dispute.by, what: dispute.what, knob: dispute.knob },
      stop.atMs,
    );
    if (kept?.kept === "already") return already(kept.atMs);
    if (kept?.kept === "failed") {
      this.options.log("warn", `${vmId(vm)}: the dispute could not be kept with the stop: ${kept.message}`);
      return refusal(
        503,
        vm,
        "Your report could not be kept",
        `It could not be written beside the stop's record (${escapeHtml(kept.message)}). Reload the page and report it again.`,
      );
    }
    this.options.disputed?.(vm, dispute, stop);
    return {
      status: 200,
      html: disputedPage(
        vm,
        `Recorded with the stop of ${at(stop.atMs)} (${escapeHtml(stop.reason)}), for whoever tunes the policy: ${escapeHtml(dispute.knob)}.`,
      ),
    };
  }

  /** Starts the VM (once, however many ask at the same time), recording who asked and how. */
  async start(request: AuthorizedStart): Promise<{ ok: boolean; message: string }> {
    const { vm } = request;
    const now = this.options.nowMs();
    const facts = this.options.platform.facts(vm);
    const view = facts ? runViewOf(facts) : { running: false };
    // A return to a VM already up (its entry service answers) is a return with no wait.
    const foundReady = facts !== undefined && this.compute(vm, facts, now).progress.status === "ready";
    const outcome = await this.options.tracker.request(
      vm,
      request,
      now,
      view,
      () => this.options.platform.start(vm),
      foundReady,
    );
    if (outcome.started && foundReady && outcome.result.ok)
      this.keepReturn(vm, { atMs: now, trigger: waitTriggerOf(request.trigger), waitSeconds: 0 });
    if (outcome.started) {
      const message = `start requested by ${request.by} via ${request.trigger}: ${outcome.result.message}`;
      this.options.log(outcome.result.ok ? "info" : "warn", `${vmId(vm)}: ${message}`, { vm: vmId(vm) });
      if (outcome.result.ok) this.options.audit?.(vm, message);
    }
    return outcome.result;
  }

  /** The VM's own entry point (Connect button, the fixed address), or undefined. */
  entryUrlOf(vm: VmKey, facts: StartFacts): string | undefined {
    return this.compute(vm, facts, this.options.nowMs()).entryUrl;
  }

  /** A start token for a page's form (the fixed address): valid for `seconds`, for this VM only. */
  formToken(vm: VmKey, seconds = 15 * 60): string {
    return signStartLink(this.options.linkKey, { ...vm, expiresAtMs: this.options.nowMs() + seconds * 1000 });
  }

  /** Whether `token` is a valid, unexpired start token of this VM. */
  validToken(vm: VmKey, token: string): boolean {
    return verifyStartLink(this.options.linkKey, token, vm, this.options.nowMs()).ok;
  }

  /** The fleet page's "Waiting to come back" table: p50/p95 per stage of the last 7 days' returns. */
  returnWaitsHtml(): string {
    return waitSummaryHtml(summarizeWaits(this.options.tracker.recent(), this.options.nowMs()));
  }

  /** Where the start stands now (the page's stages; the ssh helper's lines). */
  progress(vm: VmKey): { facts: StartFacts; progress: StartProgress; entryUrl?: string } | undefined {
    const facts = this.options.platform.facts(vm);
    if (!facts) return undefined;
    const now = this.options.nowMs();
    const { progress, entryUrl } = this.compute(vm, facts, now);
    return { facts, progress, ...(entryUrl ? { entryUrl } : {}) };
  }

  /** Called every second while starts are pending: marks the ready ones (the start-to-ready histogram). */
  watch(): void {
    const now = this.options.nowMs();
    for (const vm of this.options.tracker.pending(now)) {
      const facts = this.options.platform.facts(vm);
      if (!facts) {
        this.options.tracker.forget(vm);
        continue;
      }
      const { progress, probePort } = this.compute(vm, facts, now);
      const attempt = this.options.tracker.get(vm, now, runViewOf(facts));
      const news = attempt ? placementNews(attempt, progress, attempt.requestedAtMs, now) : undefined;
      if (news) this.options.placement?.(vm, news);
      if (progress.status !== "ready") {
        // Look at the entry service ourselves once the VMI runs: Ready need not wait for the agent.
        if (attempt && probePort !== undefined && facts.entryAddresses && facts.instance?.phase === "Running")
          this.options.prober?.probe(vmId(vm), attempt.requestedAtMs, facts.entryAddresses, probePort);
        continue;
      }
      const readyAtMs = progress.stages.find((stage) => stage.name === "ready")?.atMs ?? now;
      this.options.prober?.forget(vmId(vm));
      const marked = this.options.tracker.markReady(vm, readyAtMs, progress.stages);
      // A learned warm start's own boot is no return: nobody asked (its person's arrival is kept when they come).
      if (marked?.readyAtMs !== undefined && marked.trigger !== "warm")
        this.keepReturn(vm, {
          atMs: marked.requestedAtMs,
          trigger: waitTriggerOf(marked.trigger),
          waitSeconds: (marked.readyAtMs - marked.requestedAtMs) / 1000,
        });
      if (marked?.readyAtMs !== undefined)
        this.options.log(
          "info",
          `${vmId(vm)}: ready ${formatDuration((marked.readyAtMs - marked.requestedAtMs) / 1000)} after the start was requested`,
          { vm: vmId(vm) },
        );
    }
  }

  /** Keeps the return on the VM (the learned warm start's history); a failure is logged, never in the way. */
  private keepReturn(vm: VmKey, record: ReturnRecord): void {
    const write = this.options.platform.recordReturn;
    if (!write) return;
    void write(vm, record, this.options.nowMs()).then((problem) => {
      if (problem)
        this.options.log("warn", `${vmId(vm)}: the return could not be recorded: ${problem}`, { vm: vmId(vm) });
    });
  }

  private compute(
    vm: VmKey,
    facts: StartFacts,
    now: number,
  ): { progress: StartProgress; entryUrl?: string; probePort?: number } {
    const agent = this.options.agentOf(vm);
    const entry = entryFor(
      this.options.config,
      vm,
      { annotations: facts.annotations, profile: agent?.profile ?? "", owner: facts.owner ?? "" },
      this.options.prefix,
    );
    // Only a Report of the stream open now counts: the one before may be the previous boot's.
    const current =
      agent?.connectedAtMs !== undefined && agent.latest && agent.latest.receivedAtMs >= agent.connectedAtMs
        ? agent.latest
        : undefined;
    const readiness = entryReadiness(current?.report, entry.service);
    const attempt = this.options.tracker.get(vm, now, runViewOf(facts));
    const probePort = probePortFor(entry.service, this.options.config.probePort);
    const probed =
      attempt && probePort !== undefined
        ? this.options.prober?.answeredFor(vmId(vm), attempt.requestedAtMs)
        : undefined;
    const progress = startProgress(
      facts,
      attempt,
      {
        ...(agent?.connectedAtMs !== undefined ? { connectedAtMs: agent.connectedAtMs } : {}),
        ...(current ? { latestReportAtMs: current.receivedAtMs } : {}),
        readiness,
        ...(probed ? { probed } : {}),
      },
      now,
    );
    return {
      progress,
      ...(entry.url ? { entryUrl: entry.url } : {}),
      ...(probePort !== undefined ? { probePort } : {}),
    };
  }

  /** The page for a VM: the Start button when it is stopped, its progress otherwise. */
  render(vm: VmKey, facts: StartFacts, token: string | undefined, now: number, action = ""): string {
    const { progress, entryUrl } = this.compute(vm, facts, now);
    const about = aboutVm(vm, facts, now);
    if (progress.status === "stopped") {
      return page(
        `Start ${vmId(vm)}?`,
        `${header(vm)}<h1>Start ${escapeHtml(vmId(vm))}?</h1>
<div class="box" id="status" data-status="stopped">${about}</div>
${
  facts.startHint
    ? `<div class="box warn" id="start-hint"><p>${escapeHtml(facts.startHint)}</p></div>`
    : `<form method="post" action="${escapeHtml(action)}">
${token ? `<input type="hidden" name="t" value="${escapeHtml(token)}">` : ""}
<button type="submit" id="start">Start the workstation</button>
</form>
<p class="muted">Nothing starts until you press the button. Starting takes as long as the VM needs to be placed and to boot; this page then shows each step.</p>`
}
<p class="muted" id="schedule-link">Every morning the same? <a href="../../schedule/${encodeURIComponent(vm.namespace)}/${encodeURIComponent(vm.name)}">Set a start schedule</a> and it is ready when you come.</p>
${disputeForm(facts, token, action, now)}`,
      );
    }
    const refresh =
      progress.status === "starting" || progress.status === "unschedulable"
        ? (this.options.refreshSeconds ?? 2)
        : undefined;
    const title =
      progress.status === "ready"
        ? `${vmId(vm)} is ready`
        : progress.status === "failed"
          ? `${vmId(vm)} could not be started`
          : progress.status === "unschedulable"
            ? `${vmId(vm)} is waiting for room`
            : `${vmId(vm)} is starting`;
    const stages = progress.stages
      .map(
        (stage) =>
          `<li data-stage="${stage.name}" data-state="${stage.state}"><strong>${escapeHtml(stage.label)}</strong> ${
            stage.atMs !== undefined
              ? `<span class="muted">${at(stage.atMs)}</span>`
              : stage.state === "current"
                ? "…"
                : stage.state === "blocked"
                  ? "— cannot be placed"
                  : ""
          }${stage.detail ? ` <small>${escapeHtml(stage.detail)}</small>` : ""}</li>`,
      )
      .join("\n");
    const blocked = progress.unschedulable
      ? `<div class="box bad" id="unschedulable"><p><strong>The scheduler cannot place this VM</strong> (${escapeHtml(progress.unschedulable.reason || "Unschedulable")}), waiting ${escapeHtml(formatDuration(progress.unschedulable.waitedSeconds))} so far:</p>
<p><code id="scheduler-message">${escapeHtml(progress.unschedulable.message)}</code></p>
<p>It starts by itself as soon as there is room (another workstation stops, a node is added). Nothing needs to be pressed again.</p></div>`
      : "";
    const failed = progress.failure
      ? `<div class="box bad" id="failure"><p>The start request failed: ${escapeHtml(progress.failure)}</p>
<form method="post" action="${escapeHtml(action)}">${token ? `<input type="hidden" name="t" value="${escapeHtml(token)}">` : ""}<button type="submit" id="start">Try again</button></form></div>`
      : "";
    const connect =
      progress.status === "ready"
        ? entryUrl
          ? `<p><a id="connect" class="button" href="${escapeHtml(entryUrl)}"><button type="button">Connect</button></a> <small>${escapeHtml(entryUrl)}</small></p>`
          : `<p id="connect-none" class="muted">The workstation is ready; connect the way you usually do (ssh, your IDE).</p>`
        : "";
    return page(
      title,
      `${header(vm)}<h1>${escapeHtml(title)}</h1>
<div class="box ${progress.status === "ready" ? "ok" : progress.status === "failed" || progress.status === "unschedulable" ? "bad" : "warn"}" id="status" data-status="${progress.status}">
<ol id="stages">
${stages}
</ol></div>
${blocked}${failed}${connect}
${
  // A page that reloads itself would wipe what someone types: the form waits for the VM to be up.
  refresh
    ? disputeOpen(facts.lastStop, now)
      ? `<p class="muted" id="dispute-later">Was the last stop a mistake? The form to say so is here once the VM is ready.</p>`
      : ""
    : disputeForm(facts, token, action, now)
}
<details><summary>About this workstation</summary>${about}</details>
${refresh ? `<p class="muted">This page refreshes itself every ${refresh} s.</p>` : ""}`,
      refresh ? { refreshSeconds: refresh } : {},
    );
  }
}

function disputedPage(vm: VmKey, detail: string): string {
  return page(
    "Thank you",
    `${header(vm)}<h1>Thank you</h1><div class="box ok" id="disputed"><p>Your report that this stop was a mistake is kept. ${detail}</p>
<p>To keep it running next time: <code>ws-lease 4h --reason "what you are running"</code> in a terminal of the VM, or the keep-running link of the notice.</p></div>`,
  );
}

/**
 * The dispute form, for ws's last stop of the VM while it can be disputed: on the page of the
 * stopped VM and on the page of the VM started again (the welcome back links here, and by the
 * time someone reads it the VM runs).
 */
function disputeForm(facts: StartFacts, token: string | undefined, action: string, now: number): string {
  const stop = facts.lastStop;
  if (!disputeOpen(stop, now)) return "";
  return `<form method="post" action="${escapeHtml(action)}" id="dispute">
${token ? `<input type="hidden" name="t" value="${escapeHtml(token)}">` : ""}<input type="hidden" name="dispute" value="1">
<p class="muted">ws stopped this VM ${when(stop.atMs, now)} (${at(stop.atMs)}): ${escapeHtml(stop.reason)}</p>
<label>This stop was a mistake, I was working: <input name="what" maxlength="500" placeholder="what you were doing (optional)"></label>
<button type="submit">Report it</button></form>`;
}

function aboutVm(vm: VmKey, facts: StartFacts, now: number): string {
  const stop = facts.lastStop;
  return `<dl>
<dt>VM</dt><dd id="vm">${escapeHtml(vmId(vm))}</dd>
<dt>Owner</dt><dd id="owner">${escapeHtml(facts.owner ?? "—")}</dd>
<dt>Stopped</dt><dd id="stopped">${stop ? `${when(stop.atMs, now)} (${at(stop.atMs)})` : "—"}</dd>
<dt>Why</dt><dd id="why">${stop ? escapeHtml(stop.reason) : "—"}</dd>
${stop?.idleSeconds !== undefined ? `<dt>Idle before the stop</dt><dd id="idle">${escapeHtml(formatDuration(stop.idleSeconds))}</dd>` : ""}
${stop?.lastActivity ? `<dt>Last activity seen</dt><dd id="last-activity">${escapeHtml(stop.lastActivity.what)} (${at(stop.lastActivity.atMs)})</dd>` : ""}
<dt>A start allocates</dt><dd id="allocates">${facts.allocates.length ? escapeHtml(facts.allocates.join(", ")) : "what the VM's template asks for"}</dd>
${facts.runStrategy ? `<dt>Run strategy</dt><dd id="run-strategy">${escapeHtml(facts.runStrategy)}</dd>` : ""}
</dl>`;
}

function header(vm: VmKey): string {
  return `<p class="muted">Workstation <a href="../..${vmPath(vm.namespace, vm.name)}">${escapeHtml(vmId(vm))}</a></p>`;
}

export function unknownVm(vm: VmKey): StartResponse {
  return refusal(
    404,
    vm,
    "This VM is not known here",
    "The collector does not know this VM (it may have been deleted).",
  );
}

export function refusal(status: number, vm: VmKey, title: string, detailHtml: string): StartResponse {
  return {
    status,
    html: page(
      title,
      `${header(vm)}<h1>${escapeHtml(title)}</h1>
<div class="box bad" id="refusal" data-status="${status}"><p>${detailHtml}</p><p><strong>Nothing was changed.</strong></p></div>`,
    ),
  };
}
