// GET /metrics, streamed: each family is written as it is built (metrics.ts metricsChunks), and
// the next one waits while the client's socket is full, so a slow scraper holds back the
// collector's memory by one family, never by the whole 10k-VM answer.
import { once } from "node:events";
import type http from "node:http";
import type { Registry } from "prom-client";
import { metricsChunks } from "../metrics.js";

export async function sendMetrics(req: http.IncomingMessage, res: http.ServerResponse, registry: Registry) {
  res.writeHead(200, {
    "content-type": registry.contentType,
    "cache-control": "no-store",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
  });
  if (req.method === "HEAD") {
    res.end();
    return;
  }
  try {
    for await (const chunk of metricsChunks(registry)) {
      if (res.destroyed) return;
      if (!res.write(chunk)) await Promise.race([once(res, "drain"), once(res, "close")]);
    }
    res.end();
  } catch (error) {
    // The status line is gone already: a cut answer is the only way to say the scrape failed.
    res.destroy(error instanceof Error ? error : new Error(String(error)));
  }
}
