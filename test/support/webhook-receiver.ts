// A real HTTP receiver on loopback for webhook tests. Each path behaves as
// named: /fail* answers 500, /redirect* answers 302, /hang* never answers (until close), anything else
// answers 200. Every request is recorded with its parsed JSON body.
import http from "node:http";
import type { AddressInfo } from "node:net";

export interface ReceivedHook {
  path: string;
  headers: http.IncomingHttpHeaders;
  body: unknown;
  atMs: number;
}

export interface WebhookReceiver {
  url: string;
  received: ReceivedHook[];
  /** Requests on /hang* still waiting for an answer. */
  hanging(): number;
  on(path: string): ReceivedHook[];
  close(): Promise<void>;
}

export async function webhookReceiver(): Promise<WebhookReceiver> {
  const received: ReceivedHook[] = [];
  const held = new Set<http.ServerResponse>();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const text = Buffer.concat(chunks).toString("utf8");
      let body: unknown = text;
      try {
        body = JSON.parse(text);
      } catch {
        /* kept as text */
      }
      const path = req.url ?? "/";
      received.push({ path, headers: req.headers, body, atMs: Date.now() });
      if (path.startsWith("/hang")) {
        held.add(res);
        res.on("close", () => held.delete(res));
        return;
      }
      if (path.startsWith("/redirect")) {
        res.writeHead(302, { location: "/ok-elsewhere" });
        res.end();
        return;
      }
      res.writeHead(path.startsWith("/fail") ? 500 : 200, { "content-type": "text/plain" });
      res.end(path.startsWith("/fail") ? "boom" : "ok");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    received,
    hanging: () => held.size,
    on: (prefix) => received.filter((hook) => hook.path.startsWith(prefix)),
    close: () =>
      new Promise<void>((resolve) => {
        for (const res of held) res.destroy();
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
