// HTTP side: /metrics, /healthz, /readyz, the fleet page, /vm/NS/NAME,
// /api/vms, and the keep-running links /keep/NS/NAME (the only POST).
import type { WrongStopRate } from "../outreach/rates/ledger.js";
import type { DormantVm } from "../outreach/dormant/report.js";
import { platformDisputes } from "../comeback/start/disputes.js";
import type { StartPlatform } from "../comeback/start/platform.js";
import http from "node:http";
import type { Registry } from "prom-client";
import type { ChartPoint, History } from "../outreach/history.js";
import type { KeepLinks } from "../comeback/keeplink/handler.js";
import type { StartLinks } from "../comeback/start/handler.js";
import type { SchedulePage } from "../comeback/schedule/page.js";
import type { ScheduleStatus } from "../comeback/schedule/schedules.js";
import type { WarmStatus } from "../comeback/warm/plan.js";
import { MAX_FORM_BYTES, readForm } from "../web/form.js";
import { FORWARDED_HEADER, type ForwardRoute, forwardToLeader, leaderTarget } from "../web/leader-forward.js";
import type { GivenBackRow } from "../outreach/adoption/given-back.js";
import type { FleetReader } from "../model/vm-view.js";
import { type FleetQuery, parseFleetQuery, renderFleetPage } from "../web/fleet-page.js";
import { spendSection, vmSpendBox } from "../web/spend-section.js";
import type { FleetSpend } from "../outreach/money/fleet-spend.js";
import type { VmKey } from "../model/vm-key.js";
import { sendMetrics } from "../web/metrics-response.js";
import { renderVmPage } from "../web/vm-page.js";
import { mayView, viewerFromHeaders, type IdentityConfig, type Viewer } from "../web/identity.js";
import { escapeHtml, PAGE_HEADERS, page } from "../web/html.js";
import { errorMessage } from "@ws/protocol";

export interface WebOptions {
  fleet: FleetReader;
  registry: Registry;
  nowMs: () => number;
  ready: () => boolean;
  info: () => { version: string; mode: string; leader: boolean };
  /** Transitions and chart points for the VM pages. */
  history?: History;
  /** How far back the VM page's chart goes (default 4h). */
  chartSpanMs?: number;
  keepLinks?: KeepLinks;
  /**
   * Which routes this listener answers: "all" (one port, the standalone default), "pages" (the
   * pages, /api/vms, keep links, /healthz and /readyz: behind the site's auth proxy) or "probes"
   * (/metrics, /healthz, /readyz: for Prometheus and the kubelet, never exposed to users).
   */
  routes?: "all" | "pages" | "probes";
  /** The auth proxy's identity header: who sees which VM on the pages (unset: everyone sees all). */
  identity?: IdentityConfig;
  /** A request refused before or outside its route (counted and logged by the caller; never echoes the request). */
  onRefused?: (why: HttpRefusal, detail: string) => void;
  /** Start links and the starting page (docs/coming-back.md). */
  startLinks?: StartLinks;
  /** The platform's stops and their disputes (/api/disputes). */
  startPlatform?: StartPlatform;
  /**
   * Where a standby forwards the POSTs it must not act on (start.leaderUrl: the collector's
   * Service, which selects the leader); absent or "": the standby answers 503, try again.
   */
  leaderUrl?: string;
  /** This replica's name, sent along with a forwarded POST. */
  replica?: string;
  /** A start link for a VM, valid from now (absent: no links, notifications.publicUrl unset). */
  startUrl?: (vm: { namespace: string; name: string }, nowMs: number) => string | undefined;
  /** What ws's own stops gave back, per namespace and owner (the fleet page's "Given back"). */
  givenBack?: (nowMs: number) => GivenBackRow[];
  /** What the fleet holds and costs (docs/cost.md): the pages' money section and /api/spend. */
  spend?: FleetSpend;
  /** The VMs' start schedules: their page (/schedule/NS/NAME) and what /api/vms and the VM page show. */
  schedulePage?: SchedulePage;
  scheduleOf?: (vm: { namespace: string; name: string }) => ScheduleStatus | undefined;
  /** The VMs' learned warm starts: what the rule says now, the last week's outcomes (comeback/warm/plan.ts). */
  warmStartOf?: (vm: { namespace: string; name: string }) => WarmStatus | undefined;
  /** VMs stopped longer than dormant.after, their disks and owner (Kubernetes mode; /api/dormant, the fleet page). */
  dormant?: () => DormantVm[];
  /** How often ws is wrong, per profile over 7 and 30 days (/api/rates, the fleet page). */
  rates?: (nowMs: number) => WrongStopRate[];
}

/**
 * The request target as a URL under this server, or undefined when it is not an origin-form
 * target ("/path?query"). Absolute-form and authority-form targets ("http://[::1", "a:99999")
 * are not for this server; they get a 400 instead of reaching new URL() with a host to parse.
 */
export function parseRequestTarget(target: string | undefined): URL | undefined {
  if (!target?.startsWith("/")) return undefined;
  try {
    // The base's host is fixed and the target is appended as a path, so "//[" is a path, not a host.
    return new URL(`http://collector${target}`);
  } catch {
    return undefined;
  }
}

/** /PREFIX/NAMESPACE/NAME → the VM, or undefined. */
function vmFromPath(pathname: string, prefix: string): { namespace: string; name: string } | undefined {
  const parts = pathname.slice(prefix.length).split("/");
  if (parts.length !== 2 || !parts[0] || !parts[1]) return undefined;
  try {
    return { namespace: decodeURIComponent(parts[0]), name: decodeURIComponent(parts[1]) };
  } catch {
    return undefined;
  }
}

/** A start or keep POST's route, parsed from the request (what a standby forwards, rebuilt). */
export function forwardRouteOf(url: URL): ForwardRoute | undefined {
  const action = url.pathname.startsWith("/start/") ? "start" : url.pathname.startsWith("/keep/") ? "keep" : undefined;
  const vm = action ? vmFromPath(url.pathname, `/${action}/`) : undefined;
  if (!action || !vm) return undefined;
  const token = url.searchParams.get("t");
  return { action, vm, ...(token !== null ? { token } : {}) };
}

/** Where a standby sends a request target (undefined: nowhere): the leader's origin, the path rebuilt from the route. */
export function standbyForwardTarget(leaderUrl: string, requestTarget: string | undefined): URL | undefined {
  const url = parseRequestTarget(requestTarget);
  const route = url ? forwardRouteOf(url) : undefined;
  return route ? leaderTarget(leaderUrl, route) : undefined;
}

/** Why the HTTP side refused a request before any route saw it (workstation_http_requests_refused_total). */
export type HttpRefusal = "malformed-request" | "malformed-target" | "form-too-large" | "handler-error";

export function createWebServer(options: WebOptions): http.Server {
  const server = http.createServer(
    { headersTimeout: HEADERS_TIMEOUT_MS, requestTimeout: REQUEST_TIMEOUT_MS },
    (req, res) => {
      // Nothing a request carries may end the process: every failure of a route is answered here.
      handle(options, req, res).catch((error: unknown) => {
        options.onRefused?.("handler-error", errorMessage(error));
        if (!res.headersSent) {
          res.writeHead(500, { "content-type": "text/plain", "cache-control": "no-store", connection: "close" });
          res.end("internal error (logged)\n");
        } else res.destroy();
      });
    },
  );
  // Requests Node's parser rejects (a bad request line or header, headers too large, a timeout)
  // never reach the handler: answer them here with the status Node would, count them, close.
  server.on("clientError", (error: NodeJS.ErrnoException, socket) => {
    if (error.code === "ECONNRESET" || !socket.writable) return void socket.destroy();
    options.onRefused?.("malformed-request", error.code ?? "parse error");
    const status =
      error.code === "HPE_HEADER_OVERFLOW"
        ? "431 Request Header Fields Too Large"
        : error.code === "ERR_HTTP_REQUEST_TIMEOUT"
          ? "408 Request Timeout"
          : "400 Bad Request";
    socket.end(`HTTP/1.1 ${status}\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\nmalformed request\n`);
  });
  return server;
}

/** A request's headers must arrive within this; the whole request (a small form) within REQUEST_TIMEOUT_MS. */
const HEADERS_TIMEOUT_MS = 15_000;
const REQUEST_TIMEOUT_MS = 30_000;

/** One request as the routes see it: the server's options, the request, its URL and how to answer. */
interface Exchange {
  options: WebOptions;
  req: http.IncomingMessage;
  res: http.ServerResponse;
  url: URL;
  send: (status: number, type: string, body: string) => void;
}

const HTML = "text/html; charset=utf-8";

async function handle(options: WebOptions, req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
  const send = (status: number, type: string, body: string) => {
    res.writeHead(status, {
      "content-type": type,
      "cache-control": "no-store",
      ...PAGE_HEADERS,
      ...(status === 413 || status === 400 ? { connection: "close" } : {}),
    });
    res.end(req.method === "HEAD" ? undefined : body);
  };
  const url = parseRequestTarget(req.url);
  if (!url) {
    options.onRefused?.("malformed-target", "not an origin-form target");
    return send(400, "text/plain", "malformed request target: expected a path such as /vm/NAMESPACE/NAME\n");
  }
  const exchange: Exchange = { options, req, res, url, send };
  const routes = options.routes ?? "all";
  try {
    if (url.pathname === "/healthz" || url.pathname === "/readyz" || url.pathname === "/metrics")
      return await probeRoute(exchange);
    if (routes === "probes")
      return send(
        404,
        "text/plain",
        "not found: this is the metrics port (/metrics, /healthz, /readyz); the pages are on http.listen\n",
      );
    const isAction = url.pathname.startsWith("/keep/") || url.pathname.startsWith("/start/");
    if (isAction && req.method === "POST" && !options.info().leader) return await standbyAction(exchange);
    if (url.pathname.startsWith("/start/")) return await startRoute(exchange);
    if (url.pathname.startsWith("/keep/")) return await keepRoute(exchange);
    if (url.pathname.startsWith("/schedule/")) return await scheduleRoute(exchange);
    if (req.method !== "GET" && req.method !== "HEAD") return send(405, "text/plain", "method not allowed\n");
    // Behind the site's login: who is asking decides which VMs they see (keep links above carry their own proof).
    let viewer: Viewer | undefined;
    if (options.identity) {
      viewer = viewerFromHeaders(req.headers, options.identity, req.socket.remoteAddress);
      if (!viewer) return send(401, HTML, signInPage(options.identity));
    }
    if (url.pathname.startsWith("/api/vms/")) return vmJsonRoute(exchange, viewer);
    if (url.pathname.startsWith("/vm/")) return vmPageRoute(exchange, viewer);
    return fleetRoute(exchange, viewer);
  } catch (error) {
    options.onRefused?.("handler-error", errorMessage(error));
    send(500, "text/plain", "internal error (logged)\n");
  }
}

/** Whether `viewer` (undefined: no identity configured, everyone) may see a VM of `owner`. */
function visibleTo(viewer: Viewer | undefined): (owner: string | undefined) => boolean {
  return (owner) => !viewer || mayView(viewer, owner);
}

/** /healthz, /readyz and /metrics (the last not on the pages' listener). */
async function probeRoute({ options, req, res, url, send }: Exchange): Promise<void> {
  if (req.method !== "GET" && req.method !== "HEAD") return send(405, "text/plain", "method not allowed\n");
  if (url.pathname === "/healthz") return send(200, "text/plain", "ok\n");
  if (url.pathname === "/readyz") {
    if (!options.ready()) return send(503, "text/plain", "not ready\n");
    return send(200, "text/plain", options.info().leader ? "ready (leader)\n" : "ready (standby)\n");
  }
  if ((options.routes ?? "all") === "pages")
    return send(404, "text/plain", "not found: /metrics is served on the metrics port (http.metricsListen)\n");
  return await sendMetrics(req, res, options.registry);
}

/** The request's form, or undefined once a refusal (too large, unreadable) has been answered. */
async function readFormOrRefuse({ options, req, send }: Exchange): Promise<URLSearchParams | undefined> {
  const read = await readForm(req);
  if (read.ok) return read.form;
  if (read.status === 413) options.onRefused?.("form-too-large", `more than ${MAX_FORM_BYTES} bytes`);
  send(
    read.status,
    "text/plain",
    read.status === 413 ? `form too large (at most ${MAX_FORM_BYTES} bytes)\n` : "the request body could not be read\n",
  );
  return undefined;
}

/** A start or keep POST on a standby: forwarded to the leader, or a "try again" page. */
async function standbyAction(exchange: Exchange): Promise<void> {
  const { options, req, res, url, send } = exchange;
  // A standby acts on nothing: the leader has the agents' streams and the start in flight.
  const form = await readFormOrRefuse(exchange);
  if (!form) return;
  const route = forwardRouteOf(url);
  if (!route) return send(404, "text/plain", "not found\n");
  if (options.leaderUrl && req.headers[FORWARDED_HEADER] === undefined) {
    try {
      const answer = await forwardToLeader(options.leaderUrl, route, req, form.toString(), {
        replica: options.replica ?? "standby",
      });
      res.writeHead(answer.status, { ...answer.headers, "cache-control": "no-store", ...PAGE_HEADERS });
      return void res.end(answer.body);
    } catch {
      // Fall through to the retry page: nothing was done here.
    }
  }
  res.setHeader("retry-after", "2");
  return send(
    503,
    HTML,
    page(
      "Try again in a moment",
      `<h1>Try again in a moment</h1><div class="box warn" id="standby"><p>This collector replica is a standby and could not reach the leader just now (a leader change takes a few seconds).</p><p><strong>Nothing was changed.</strong> Go back and press the button again.</p></div>`,
    ),
  );
}

/** A link's VM, its form (a POST's) and its token (the form's, else the query's); undefined once a 404 or a refusal is answered. */
async function linkRequest(
  exchange: Exchange,
  prefix: "/start/" | "/keep/",
): Promise<{ vm: { namespace: string; name: string }; form: URLSearchParams | undefined; token: string } | undefined> {
  const { req, url, send } = exchange;
  const vm = vmFromPath(url.pathname, prefix);
  if (!vm) {
    send(404, "text/plain", "not found\n");
    return undefined;
  }
  const form = req.method === "POST" ? await readFormOrRefuse(exchange) : undefined;
  if (req.method === "POST" && !form) return undefined;
  return { vm, form, token: form?.get("t") ?? url.searchParams.get("t") ?? "" };
}

/** /start/NS/NAME: the start link's page and its POSTs (docs/coming-back.md). */
async function startRoute(exchange: Exchange): Promise<void> {
  const { options, req, res, send } = exchange;
  if (!options.startLinks) return send(404, "text/plain", "start links are not configured on this collector\n");
  const link = await linkRequest(exchange, "/start/");
  if (!link) return;
  const { vm, form, token } = link;
  const json = /application\/json/.test(req.headers.accept ?? "");
  const via = form?.get("via");
  const dispute = form?.get("dispute") ? { what: form.get("what") ?? "" } : undefined;
  const answer = await options.startLinks.handle({
    method: req.method ?? "GET",
    vm,
    token,
    ...(json ? { json } : {}),
    ...(via ? { via } : {}),
    ...(dispute ? { dispute } : {}),
  });
  if (answer.json) return send(answer.status, "application/json", `${JSON.stringify(answer.json)}\n`);
  if (answer.location) {
    res.writeHead(answer.status, { location: answer.location, "cache-control": "no-store", ...PAGE_HEADERS });
    return void res.end();
  }
  return send(answer.status, HTML, answer.html);
}

/** /schedule/NS/NAME: a VM's start schedule and its form (behind the site's login; comeback/schedule/page.ts). */
async function scheduleRoute(exchange: Exchange): Promise<void> {
  const { options, req, url, send } = exchange;
  const vm = vmFromPath(url.pathname, "/schedule/");
  if (!options.schedulePage) return send(404, "text/plain", "schedules are not configured on this collector\n");
  if (!vm) return send(404, "text/plain", "not found\n");
  const form = req.method === "POST" ? await readFormOrRefuse(exchange) : undefined;
  if (req.method === "POST" && !form) return;
  const answer = await options.schedulePage.handle(
    req.method ?? "GET",
    vm,
    req.headers,
    req.socket.remoteAddress,
    form,
  );
  return send(answer.status, HTML, answer.html);
}

/** /keep/NS/NAME: the keep-running link's page and its POST. */
async function keepRoute(exchange: Exchange): Promise<void> {
  const { options, req, send } = exchange;
  if (!options.keepLinks) return send(404, "text/plain", "keep-running links are not configured on this collector\n");
  const link = await linkRequest(exchange, "/keep/");
  if (!link) return;
  const { vm, form, token } = link;
  const keepSeconds = form?.get("keep");
  const answer = options.keepLinks.handle({
    method: req.method ?? "GET",
    vm,
    token,
    ...(keepSeconds != null ? { keepSeconds } : {}),
  });
  return send(answer.status, HTML, answer.html);
}

/** /api/vms/NS/NAME: one VM as JSON, what its page shows (explanation, policy, sources, transitions, chart points). */
function vmJsonRoute({ options, url, send }: Exchange, viewer: Viewer | undefined) {
  const vm = vmFromPath(url.pathname, "/api/vms/");
  const now = options.nowMs();
  const detail = vm ? options.fleet.detail?.(vm.namespace, vm.name, now) : undefined;
  if (!vm || !detail) return send(404, "application/json", `${JSON.stringify({ error: "no such VM" })}\n`);
  if (!visibleTo(viewer)(detail.view.owner))
    return send(403, "application/json", `${JSON.stringify({ error: `this VM is not ${viewer!.user}'s` })}\n`);
  const spanMs = options.chartSpanMs ?? 4 * 3600_000;
  return send(
    200,
    "application/json",
    JSON.stringify(
      {
        ...detail,
        ...withSchedule(options, vm),
        transitions: options.history?.transitions(vm) ?? [],
        points: options.history?.points(vm, now - spanMs) ?? [],
      },
      null,
      2,
    ),
  );
}

/** /vm/NS/NAME: one VM's page. */
function vmPageRoute({ options, url, send }: Exchange, viewer: Viewer | undefined) {
  const vm = vmFromPath(url.pathname, "/vm/");
  const now = options.nowMs();
  const detail = vm ? options.fleet.detail?.(vm.namespace, vm.name, now) : undefined;
  if (!vm || !detail)
    return send(
      404,
      HTML,
      `<!doctype html><title>not found</title><p>No VM ${vm ? `${escapeText(vm.namespace)}/${escapeText(vm.name)}` : ""} is known to this collector. <a href="../../">All workstations</a></p>`,
    );
  if (!visibleTo(viewer)(detail.view.owner)) return send(403, HTML, notYoursPage(viewer!));
  // The chart spans what history there is, from 10 minutes up to chartSpanMs (4h).
  const maxSpanMs = options.chartSpanMs ?? 4 * 3600_000;
  const oldest = options.history?.points(vm, now - maxSpanMs)[0]?.atMs ?? now;
  const spanMs = Math.min(maxSpanMs, Math.max(10 * 60_000, now - oldest));
  return send(
    200,
    HTML,
    renderVmPage({
      detail,
      transitions: options.history?.transitions(vm) ?? [],
      // The recorded points, and where the VM is now (points are recorded on change and every spacing).
      points: [
        ...(options.history?.points(vm, now - spanMs) ?? []),
        {
          atMs: now,
          idleSeconds: detail.view.idleSeconds ?? Number.NaN,
          activeSignals: detail.view.activeSignals.length,
          state: detail.view.state as ChartPoint["state"],
        },
      ],
      chartSpanMs: spanMs,
      nowMs: now,
      ...(options.startUrl?.(vm, now) ? { startUrl: options.startUrl(vm, now)! } : {}),
      ...vmSpend(options.spend, vm, now),
      ...withSchedule(options, vm),
    }),
  );
}

/** The fleet: /api/vms, /api/disputes and the fleet page (/). */
function fleetRoute({ options, url, send }: Exchange, viewer: Viewer | undefined) {
  const visible = visibleTo(viewer);
  const views = () => options.fleet.views(options.nowMs()).filter((view) => visible(view.owner));
  switch (url.pathname) {
    case "/api/vms":
      return send(
        200,
        "application/json",
        JSON.stringify({ vms: views().map((view) => ({ ...view, ...withSchedule(options, view) })) }, null, 2),
      );
    case "/api/spend": {
      // The fleet page's money as JSON: a signed-in user gets their own VMs' groups; an admin, all.
      const report = options.spend?.report(options.nowMs());
      const body = report
        ? {
            ...report,
            rows: report.rows.filter((row) => visible(row.owner)),
            vms: report.vms.filter((vm) => visible(vm.owner)),
          }
        : { rows: [], vms: [] };
      return send(200, "application/json", JSON.stringify(body, null, 2));
    }
    case "/api/dormant":
      // Stopped for weeks: how long, their disks, their owner (outreach/dormant/report.ts). ws deletes nothing.
      return send(
        200,
        "application/json",
        JSON.stringify(
          { dormant: (options.dormant?.() ?? []).filter((vm) => visible(vm.owner ?? undefined)) },
          null,
          2,
        ),
      );
    case "/api/rates":
      // Fleet-wide figures: per profile, no VM or owner in them.
      return send(200, "application/json", JSON.stringify({ rates: options.rates?.(options.nowMs()) ?? [] }, null, 2));
    case "/api/disputes":
      // "This stop was a mistake" reports, for `ws-collector whatif --disputes` (comeback/start/disputes.ts).
      return send(
        200,
        "application/json",
        JSON.stringify(
          {
            disputes: options.startPlatform
              ? platformDisputes(options.startPlatform, (owner) => visible(owner ?? undefined))
              : [],
          },
          null,
          2,
        ),
      );
    case "/":
      return send(
        200,
        HTML,
        renderFleetPage(
          views(),
          options.nowMs(),
          options.info(),
          parseFleetQuery(url.searchParams),
          viewer,
          // A signed-in user sees what their own VMs gave back; an admin, everyone's.
          options.givenBack?.(options.nowMs()).filter((row) => visible(row.owner)),
          fleetSpendHtml(options.spend, options.nowMs(), parseFleetQuery(url.searchParams), visible) +
            (options.startLinks?.returnWaitsHtml() ?? ""),
          options.dormant?.().filter((vm) => visible(vm.owner ?? undefined)),
          options.rates?.(options.nowMs()),
        ),
      );
    default:
      return send(404, "text/plain", "not found\n");
  }
}

/**
 * The way back ahead of time: `{ schedule }` when the VM has one (valid or not), `{ warmStart }`
 * when it opted in to learned warm starts or has a record of them; /api/vms and the VM page.
 */
function withSchedule(
  options: WebOptions,
  vm: { namespace: string; name: string },
): { schedule?: ScheduleStatus; warmStart?: WarmStatus } {
  const key = { namespace: vm.namespace, name: vm.name };
  const schedule = options.scheduleOf?.(key);
  const warmStart = options.warmStartOf?.(key);
  return { ...(schedule ? { schedule } : {}), ...(warmStart ? { warmStart } : {}) };
}

const escapeText = (text: string) => text.replace(/[^\w.-]/g, "?").slice(0, 253);

function signInPage(identity: IdentityConfig): string {
  return page(
    "Sign in",
    `<h1>Sign in first</h1>
<div class="box bad" id="refusal" data-status="401"><p>These pages show workstations to their owners, behind the site's login.
This request came without a signed-in user (no <code>${escapeHtml(identity.userHeader)}</code> header from the site's auth proxy).</p>
<p>Open the collector through the site's address (the one your platform gave you), not its port directly.</p></div>`,
  );
}

function notYoursPage(viewer: Viewer): string {
  return page(
    "Not your workstation",
    `<h1>Not your workstation</h1>
<div class="box bad" id="refusal" data-status="403"><p>You are signed in as <strong>${escapeHtml(viewer.user)}</strong>; this workstation belongs to someone else.
Only its owner and the site's admins see it. <a href="../../">Your workstations</a></p></div>`,
  );
}

/** The fleet page's money section under the page's filters and what the viewer may see. */
function fleetSpendHtml(
  spend: FleetSpend | undefined,
  nowMs: number,
  query: FleetQuery,
  visible: (owner: string | undefined) => boolean,
): string {
  if (!spend) return "";
  return spendSection(
    spend.report(nowMs),
    (row) =>
      visible(row.owner) &&
      (!query.namespace || row.namespace === query.namespace) &&
      (query.owner === undefined || row.owner === query.owner),
  );
}

function vmSpend(spend: FleetSpend | undefined, vm: VmKey, nowMs: number): { spend?: { html: string } } {
  const figures = spend?.vm(vm, nowMs);
  return figures ? { spend: { html: vmSpendBox(figures, spend!.currency) } } : {};
}
