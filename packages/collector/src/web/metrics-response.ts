// GET /metrics, streamed: each family is written as it is built (metrics.ts metricsChunks), and
// the next one waits while the client's socket is full, so a slow scraper holds back the
// collector's memory by one family, never by the whole 10k-VM answer.
import type http from "node:http";
import type { Registry } from "prom-client";
import { metricsChunks } from "../metrics/metrics.js";

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
      if (!res.write(chunk)) await drainedOrClosed(res);
    }
    res.end();
  } catch (error) {
    // The status line is gone already: a cut answer is the only way to say the scrape failed.
    res.destroy(error instanceof Error ? error : new Error(String(error)));
  }
}

/** The socket took the last chunk, or went away; the listeners go with the wait (a 10 MiB answer waits many times). */
function drainedOrClosed(res: http.ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      res.off("drain", done);
      res.off("close", done);
      resolve();
    };
    res.on("drain", done);
    res.on("close", done);
  });
}
