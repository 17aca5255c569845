// HTTP side: /metrics, /healthz, /readyz, the status page and /api/vms.
import http from "node:http";
import type { Registry } from "prom-client";
import type { FleetReader } from "../view.js";
import { renderStatusPage } from "./status-page.js";

export interface WebOptions {
  fleet: FleetReader;
  registry: Registry;
  nowMs: () => number;
  ready: () => boolean;
  info: () => { version: string; mode: string; leader: boolean };
}

export function createWebServer(options: WebOptions): http.Server {
  return http.createServer(async (req, res) => {
    const url = new URL(req.url ?? "/", "http://collector");
    const send = (status: number, type: string, body: string) => {
      res.writeHead(status, { "content-type": type, "cache-control": "no-store" });
      res.end(body);
    };
    if (req.method !== "GET" && req.method !== "HEAD") return send(405, "text/plain", "method not allowed\n");
    try {
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
          return send(200, "text/html; charset=utf-8", renderStatusPage(options.fleet.views(options.nowMs()), options.nowMs(), options.info()));
        default:
          return send(404, "text/plain", "not found\n");
      }
    } catch (error) {
      send(500, "text/plain", `error: ${(error as Error).message}\n`);
    }
  });
}
