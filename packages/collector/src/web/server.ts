// HTTP side: /metrics, /healthz, /readyz, the fleet page, /vm/NS/NAME,
// /api/vms, the keep-running links /keep/NS/NAME and the start links /start/NS/NAME (the only
// POSTs; a standby forwards them to the leader: leader-forward.ts).
import http from "node:http";
import type { Registry } from "prom-client";
import type { ChartPoint, History } from "../history/history.js";
import type { KeepLinks } from "../keeplink/handler.js";
import type { StartLinks } from "../start/handler.js";
import { FORWARDED_HEADER, forwardToLeader } from "./leader-forward.js";
import { page } from "./html.js";
import type { FleetReader } from "../view.js";
import { parseFleetQuery, renderFleetPage } from "./fleet-page.js";
import { renderVmPage } from "./vm-page.js";
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
  startLinks?: StartLinks;
  /**
   * Where a standby forwards the POSTs it must not act on (start.leaderUrl: the collector's
   * Service, which selects the leader); absent or "": the standby answers 503, try again.
   */
  leaderUrl?: string;
  /** This replica's name, sent along with a forwarded POST. */
  replica?: string;
  /** A start link for a VM, valid from now (absent: no links, notifications.publicUrl unset). */
  startUrl?: (vm: { namespace: string; name: string }, nowMs: number) => string | undefined;
}

/** A keep-link form is a few hundred bytes; anything larger is not one. */
const MAX_FORM_BYTES = 4096;

function readForm(req: http.IncomingMessage): Promise<URLSearchParams | undefined> {
  return new Promise((resolve) => {
    let size = 0;
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_FORM_BYTES) {
        resolve(undefined);
        req.destroy();
        return;
      }
      chunks.push(chunk);
    });
    req.on("end", () => resolve(new URLSearchParams(Buffer.concat(chunks).toString("utf8"))));
    req.on("error", () => resolve(undefined));
  });
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

export function createWebServer(options: WebOptions): http.Server {
  return http.createServer(async (req, res) => {
    const url = new URL(req.url ?? "/", "http://collector");
    const send = (status: number, type: string, body: string) => {
      res.writeHead(status, {
        "content-type": type,
        "cache-control": "no-store",
        "x-content-type-options": "nosniff",
        "referrer-policy": "no-referrer",
      });
      res.end(req.method === "HEAD" ? undefined : body);
    };
    const html = "text/html; charset=utf-8";
    try {
      const isAction = url.pathname.startsWith("/keep/") || url.pathname.startsWith("/start/");
      if (isAction && req.method === "POST" && !options.info().leader) {
        // A standby acts on nothing: the leader has the agents' streams and the start in flight.
        const form = await readForm(req);
        if (!form) return send(413, "text/plain", "form too large\n");
        if (options.leaderUrl && req.headers[FORWARDED_HEADER] === undefined) {
          try {
            const answer = await forwardToLeader(options.leaderUrl, req, form.toString(), {
              replica: options.replica ?? "standby",
            });
            res.writeHead(answer.status, { ...answer.headers, "x-content-type-options": "nosniff" });
            return res.end(answer.body);
          } catch {
            // Fall through to the retry page: nothing was done here.
          }
        }
        res.setHeader("retry-after", "2");
        return send(
          503,
          html,
          page(
            "Try again in a moment",
            `<h1>Try again in a moment</h1><div class="box warn" id="standby"><p>This collector replica is a standby and could not reach the leader just now (a leader change takes a few seconds).</p><p><strong>Nothing was changed.</strong> Go back and press the button again.</p></div>`,
          ),
        );
      }
      if (url.pathname.startsWith("/start/")) {
        const vm = vmFromPath(url.pathname, "/start/");
        if (!options.startLinks) return send(404, "text/plain", "start links are not configured on this collector\n");
        if (!vm) return send(404, "text/plain", "not found\n");
        const form = req.method === "POST" ? await readForm(req) : undefined;
        if (req.method === "POST" && !form) return send(413, "text/plain", "form too large\n");
        const token = form?.get("t") ?? url.searchParams.get("t") ?? "";
        const json = /application\/json/.test(req.headers.accept ?? "");
        const via = form?.get("via");
        const answer = await options.startLinks.handle({
          method: req.method ?? "GET",
          vm,
          token,
          ...(json ? { json } : {}),
          ...(via ? { via } : {}),
        });
        if (answer.json) return send(answer.status, "application/json", `${JSON.stringify(answer.json)}\n`);
        if (answer.location) {
          res.writeHead(answer.status, { location: answer.location, "cache-control": "no-store" });
          return res.end();
        }
        return send(answer.status, html, answer.html);
      }
      if (url.pathname.startsWith("/keep/")) {
        const vm = vmFromPath(url.pathname, "/keep/");
        if (!options.keepLinks)
          return send(404, "text/plain", "keep-running links are not configured on this collector\n");
        if (!vm) return send(404, "text/plain", "not found\n");
        const form = req.method === "POST" ? await readForm(req) : undefined;
        if (req.method === "POST" && !form) return send(413, "text/plain", "form too large\n");
        const token = form?.get("t") ?? url.searchParams.get("t") ?? "";
        const keepSeconds = form?.get("keep");
        const answer = options.keepLinks.handle({
          method: req.method ?? "GET",
          vm,
          token,
          ...(keepSeconds != null ? { keepSeconds } : {}),
        });
        return send(answer.status, html, answer.html);
      }
      if (req.method !== "GET" && req.method !== "HEAD") return send(405, "text/plain", "method not allowed\n");
      if (url.pathname.startsWith("/api/vms/")) {
        // One VM as JSON: what its page shows (explanation, policy, sources, transitions, chart points).
        const vm = vmFromPath(url.pathname, "/api/vms/");
        const now = options.nowMs();
        const detail = vm ? options.fleet.detail?.(vm.namespace, vm.name, now) : undefined;
        if (!vm || !detail) return send(404, "application/json", `${JSON.stringify({ error: "no such VM" })}\n`);
        const spanMs = options.chartSpanMs ?? 4 * 3600_000;
        return send(
          200,
          "application/json",
          JSON.stringify(
            {
              ...detail,
              transitions: options.history?.transitions(vm) ?? [],
              points: options.history?.points(vm, now - spanMs) ?? [],
            },
            null,
            2,
          ),
        );
      }
      if (url.pathname.startsWith("/vm/")) {
        const vm = vmFromPath(url.pathname, "/vm/");
        const now = options.nowMs();
        const detail = vm ? options.fleet.detail?.(vm.namespace, vm.name, now) : undefined;
        if (!vm || !detail)
          return send(
            404,
            html,
            `<!doctype html><title>not found</title><p>No VM ${vm ? `${escapeText(vm.namespace)}/${escapeText(vm.name)}` : ""} is known to this collector. <a href="../../">All workstations</a></p>`,
          );
        // The chart spans what history there is, from 10 minutes up to chartSpanMs (4h).
        const maxSpanMs = options.chartSpanMs ?? 4 * 3600_000;
        const oldest = options.history?.points(vm, now - maxSpanMs)[0]?.atMs ?? now;
        const spanMs = Math.min(maxSpanMs, Math.max(10 * 60_000, now - oldest));
        return send(
          200,
          html,
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
          }),
        );
      }
      switch (url.pathname) {
        case "/metrics":
          return send(200, options.registry.contentType, await options.registry.metrics());
        case "/healthz":
          return send(200, "text/plain", "ok\n");
        case "/readyz":
          if (!options.ready()) return send(503, "text/plain", "not ready\n");
          return send(200, "text/plain", options.info().leader ? "ready (leader)\n" : "ready (standby)\n");
        case "/api/vms":
          return send(200, "application/json", JSON.stringify({ vms: options.fleet.views(options.nowMs()) }, null, 2));
        case "/":
          return send(
            200,
            html,
            renderFleetPage(
              options.fleet.views(options.nowMs()),
              options.nowMs(),
              options.info(),
              parseFleetQuery(url.searchParams),
            ),
          );
        default:
          return send(404, "text/plain", "not found\n");
      }
    } catch (error) {
      send(500, "text/plain", `error: ${errorMessage(error)}\n`);
    }
  });
}

const escapeText = (text: string) => text.replace(/[^\w.-]/g, "?").slice(0, 253);
