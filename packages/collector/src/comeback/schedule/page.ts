// /schedule/NAMESPACE/NAME: the VM's start schedule on a page of its own (linked from the VM page
// and the starting page; the VM page reloads itself, which would wipe what someone types). GET
// shows it and a form; POST changes it. Behind the site's login: only the VM's owner or an admin,
// only with http.identity set, only with the form's own signed token (a page elsewhere cannot post
// it), and never from another site (Sec-Fetch-Site, Origin). Every refusal changes nothing.
import type http from "node:http";
import { escapeHtml, page, vmPath } from "../../web/html.js";
import { type IdentityConfig, mayView, viewerFromHeaders } from "../../web/identity.js";
import { type VmKey, vmId } from "../../model/vm-key.js";
import type { StartPlatform } from "../start/platform.js";
import type { ScheduleChange, ScheduleEditor } from "./editor.js";
import type { ScheduleStatus } from "./schedules.js";

export interface SchedulePageOptions {
  editor: ScheduleEditor;
  platform: StartPlatform;
  identity?: IdentityConfig;
  /** A short-lived token for this VM's form, and its check (the start link key signs both). */
  formToken: (vm: VmKey) => string;
  validToken: (vm: VmKey, token: string) => boolean;
}

export interface SchedulePageAnswer {
  status: number;
  html: string;
  location?: string;
}

/** Whether a browser says the request came from another site (a form posted from elsewhere). */
export function crossSite(headers: http.IncomingHttpHeaders): boolean {
  const fetchSite = headers["sec-fetch-site"];
  if (typeof fetchSite === "string" && fetchSite !== "same-origin" && fetchSite !== "none") return true;
  const origin = headers.origin;
  if (typeof origin !== "string" || origin === "null") return origin === "null";
  try {
    const host = headers["x-forwarded-host"] ?? headers.host;
    return new URL(origin).host !== (Array.isArray(host) ? host[0] : host);
  } catch {
    return true;
  }
}

/** The form's fields as a change, or why not (pure). */
export function changeFromForm(form: URLSearchParams): ScheduleChange | { error: string } {
  const action = form.get("action") ?? "set";
  if (action === "clear") return { kind: "clear" };
  if (action === "skip") return { kind: "skip", date: (form.get("date") ?? "").trim() || "tomorrow" };
  if (action !== "set") return { error: `unknown action "${action.slice(0, 20)}"` };
  const line = (form.get("schedule") ?? "").trim();
  if (!line) return { error: 'write a schedule, e.g. "weekdays 08:45 stop by 20:00"' };
  const stopBy = (form.get("stopBy") ?? "").trim();
  const zone = (form.get("tz") ?? "").trim();
  return {
    kind: "set",
    line: stopBy ? `${line} stop-by ${stopBy}` : line,
    ...(zone ? { timeZone: zone } : {}),
  };
}

export class SchedulePage {
  constructor(private readonly options: SchedulePageOptions) {}

  async handle(
    method: string,
    vm: VmKey,
    headers: http.IncomingHttpHeaders,
    peer: string | undefined,
    form: URLSearchParams | undefined,
  ): Promise<SchedulePageAnswer> {
    const facts = this.options.platform.facts(vm);
    if (!facts) return refused(404, vm, "This VM is not known here", "The collector does not know this VM.");
    const viewer = viewerFromHeaders(headers, this.options.identity, peer);
    if (this.options.identity && !viewer)
      return refused(401, vm, "Sign in", "Sign in through the site's login to see or change this schedule.");
    if (viewer && !mayView(viewer, facts.owner ?? undefined))
      return refused(
        403,
        vm,
        "Not your workstation",
        `You are signed in as <strong>${escapeHtml(viewer.user)}</strong>; only its owner (${escapeHtml(facts.owner ?? "nobody")}) or an admin can see or change its schedule.`,
      );
    if (method === "GET" || method === "HEAD")
      return { status: 200, html: this.render(vm, this.options.editor.status(vm)) };
    if (method !== "POST")
      return refused(405, vm, "Use the form", "This address answers GET (the page) and POST (the form).");
    if (!viewer)
      return refused(
        403,
        vm,
        "Sign-in required",
        "Changing a schedule on this page needs the site's login (http.identity). From inside the VM: <code>ws-lease schedule weekdays 08:45</code>.",
      );
    if (crossSite(headers)) return refused(403, vm, "Not from this site", "The form was posted from another site.");
    if (!this.options.validToken(vm, form?.get("t") ?? ""))
      return refused(403, vm, "The form expired", "Reload the page and send the form again.");
    const change = changeFromForm(form ?? new URLSearchParams());
    if ("error" in change) return { status: 400, html: this.render(vm, this.options.editor.status(vm), change.error) };
    const outcome = await this.options.editor.change(
      vm,
      change,
      `${viewer.user} on the schedule page${viewer.admin ? " (admin)" : ""}`,
    );
    if (!outcome.ok)
      return { status: outcome.status, html: this.render(vm, this.options.editor.status(vm), outcome.error) };
    return { status: 200, html: this.render(vm, outcome.status, undefined, outcome.message) };
  }

  render(vm: VmKey, status: ScheduleStatus | undefined, error?: string, done?: string): string {
    const token = this.options.formToken(vm);
    const hidden = `<input type="hidden" name="t" value="${escapeHtml(token)}">`;
    return page(
      `Schedule of ${vmId(vm)}`,
      `<p class="muted">Workstation <a href="../..${vmPath(vm.namespace, vm.name)}">${escapeHtml(vmId(vm))}</a></p>
<h1>Start schedule of ${escapeHtml(vmId(vm))}</h1>
${done ? `<div class="box ok" id="done"><p>${escapeHtml(done)}.</p></div>` : ""}
${error ? `<div class="box bad" id="error"><p>${escapeHtml(error)}</p><p><strong>Nothing was changed.</strong></p></div>` : ""}
${scheduleBox(status)}
<form method="post" id="set">${hidden}<input type="hidden" name="action" value="set">
<label>Start <input name="schedule" maxlength="200" placeholder="weekdays 08:45" value="${escapeHtml(status?.valid ? "" : (status?.line ?? ""))}"></label>
<label>stop by <input name="stopBy" maxlength="5" placeholder="20:00 (optional)"></label>
<label>time zone <input name="tz" maxlength="64" placeholder="${escapeHtml(status?.timeZone ?? "Europe/Berlin")}"></label>
<button type="submit">Set</button></form>
<p class="muted">Days: weekdays, weekends, daily, mon…sun, ranges like mon-thu. Times are 24-hour in the time zone. "Stop by": at that time a running VM gets a notice and the grace like any stop; activity or a lease keeps it running (docs/coming-back.md).</p>
${
  status?.valid
    ? `<form method="post" id="skip">${hidden}<input type="hidden" name="action" value="skip"><label>Do not start on <input name="date" maxlength="10" placeholder="tomorrow or YYYY-MM-DD"></label> <button type="submit">Skip</button></form>`
    : ""
}
${status ? `<form method="post" id="clear">${hidden}<input type="hidden" name="action" value="clear"><button type="submit">Clear the schedule</button></form>` : ""}`,
    );
  }
}

/** The schedule in a box: next start and stop as the owner reads them, or why it is not applied. */
export function scheduleBox(status: ScheduleStatus | undefined): string {
  if (!status)
    return `<div class="box" id="schedule" data-valid="none"><p>No start schedule: the VM starts when someone starts it.</p></div>`;
  if (!status.valid)
    return `<div class="box bad" id="schedule" data-valid="false"><p><strong>Invalid schedule, not applied</strong> (nothing is started or stopped for it): <code>${escapeHtml(status.line)}</code></p><p id="schedule-error">${escapeHtml(status.error ?? "")}</p></div>`;
  return `<div class="box" id="schedule" data-valid="true"><p>Schedule: ${escapeHtml(status.description ?? status.line)}.</p>
${status.nextStart ? `<p>next start: <strong id="next-start">${escapeHtml(status.nextStart)}</strong></p>` : ""}
${status.nextStopBy ? `<p>next stop by: <span id="next-stop-by">${escapeHtml(status.nextStopBy)}</span> (notice and grace; activity or a lease keeps it running)</p>` : ""}</div>`;
}

function refused(status: number, vm: VmKey, title: string, detailHtml: string): SchedulePageAnswer {
  return {
    status,
    html: page(
      title,
      `<p class="muted">Workstation <a href="../..${vmPath(vm.namespace, vm.name)}">${escapeHtml(vmId(vm))}</a></p><h1>${escapeHtml(title)}</h1>
<div class="box bad" id="refusal" data-status="${status}"><p>${detailHtml}</p><p><strong>Nothing was changed.</strong></p></div>`,
    ),
  };
}
