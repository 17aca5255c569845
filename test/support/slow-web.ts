/**
 * A web server that answers as real dashboards do, in 100–300 ms (a seeded random delay per
 * request), for the traffic classifier's captures (bench/capture-traffic.ts) and the e2e test of
 * machine traffic through SSH (test/e2e/forwards.test.ts). Node's http server: an idle keep-alive
 * connection is closed after 5 s, as its default says. Pages, each period in seconds from the query:
 * - /page.html?every=N: <meta http-equiv="refresh" content="N">;
 * - /dashboard.html?every=N: a Grafana-style page whose script fetches four panels every N s;
 * - /heartbeat.html?every=N: a page holding a WebSocket that sends a kernel-status-sized message
 *   every N s (webpack HMR, a Jupyter kernel, VS Code's port-forward keep-alives), answered here;
 * - /stops.html?every=N&left=K: the refreshing page K more times, then a page that does not
 *   refresh (its keep-alive connection left to linger);
 * - anything else: a JSON answer of a few kB (a panel's query, a poller's status).
 */
import { createHash } from "node:crypto";
import http from "node:http";
import type { Duplex } from "node:stream";

export interface SlowWeb {
  port: number;
  close(): void;
}

function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const ROWS = `<p>${"cpu 0.12 mem 0.34 ".repeat(120)}</p>`;

function page(pathname: string, query: URLSearchParams): string | undefined {
  const every = Number(query.get("every") ?? "10");
  switch (pathname) {
    case "/page.html":
      return `<!doctype html><html><head><meta http-equiv="refresh" content="${every}"><title>Runs</title></head><body>${ROWS}</body></html>`;
    case "/dashboard.html":
      return `<!doctype html><html><head><title>Dashboard</title></head><body>${ROWS}<script>
      const refresh = () => { for (const panel of [1, 2, 3, 4]) fetch("/api/query?panel=" + panel).then((r) => r.text()); };
      refresh(); setInterval(refresh, ${every * 1000});
    </script></body></html>`;
    case "/heartbeat.html":
      return `<!doctype html><html><head><title>Notebook</title></head><body><script>
      const socket = new WebSocket("ws://" + location.host + "/ws");
      let n = 0;
      // A kernel's status message is a few hundred bytes of JSON (header, parent header, content).
      const status = () => JSON.stringify({ header: { msg_id: crypto.randomUUID(), msg_type: "status", session: "a1b2c3d4e5f6", username: "", date: new Date().toISOString(), version: "5.3" }, parent_header: {}, metadata: {}, content: { execution_state: "idle" }, channel: "iopub" });
      socket.onopen = () => setInterval(() => socket.send("ping " + (n++) + " " + status()), ${every * 1000});
    </script></body></html>`;
    case "/stops.html":
      return `<!doctype html><html><head><title>Runs</title></head><body>${ROWS}<script>
      const query = new URLSearchParams(location.search);
      const left = Number(query.get("left") ?? "18");
      if (left > 0) setTimeout(() => { query.set("left", String(left - 1)); location.search = "?" + query; }, ${every * 1000});
    </script></body></html>`;
    default:
      return undefined;
  }
}

/** Starts the server on 127.0.0.1:port. */
export async function startSlowWeb(port: number, seed = 39): Promise<SlowWeb> {
  const random = mulberry32(seed);
  const server = http.createServer((request, response) => {
    const delay = 100 + random() * 200;
    setTimeout(() => {
      const url = new URL(request.url ?? "/", "http://x");
      const html = page(url.pathname, url.searchParams);
      response.writeHead(200, {
        "content-type": html ? "text/html" : "application/json",
        "cache-control": "no-store",
      });
      response.end(
        html ?? JSON.stringify({ panel: url.searchParams.get("panel"), points: Array(60).fill([1764800000, 0.42]) }),
      );
    }, delay);
  });
  server.on("upgrade", (request, socket) => answerWebSocket(request.headers["sec-websocket-key"], socket));
  await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve));
  return {
    port,
    close: () => {
      server.closeAllConnections();
      server.close();
    },
  };
}

/**
 * A WebSocket server's side of RFC 6455, as much as a heartbeat needs: the handshake, then every
 * text frame the browser sends (masked, up to 64 KiB) answered with "pong …" (unmasked).
 */
function answerWebSocket(key: string | string[] | undefined, socket: Duplex): void {
  const accept = createHash("sha1")
    .update(`${String(key)}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`)
    .digest("base64");
  socket.write(
    `HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept}\r\n\r\n`,
  );
  let pending = Buffer.alloc(0);
  socket.on("data", (chunk: Buffer) => {
    pending = Buffer.concat([pending, chunk]);
    while (pending.length >= 6) {
      const short = pending[1]! & 0x7f;
      const at = short === 126 ? 4 : 2;
      const length = short === 126 ? pending.readUInt16BE(2) : short;
      if (short === 127 || pending.length < at + 4 + length) return;
      const mask = pending.subarray(at, at + 4);
      const text = Buffer.from(
        pending.subarray(at + 4, at + 4 + length).map((byte, i) => byte ^ mask[i % 4]!),
      ).toString();
      const opcode = pending[0]! & 0x0f;
      pending = pending.subarray(at + 4 + length);
      if (opcode === 8) return void socket.end();
      const reply = Buffer.from(`pong ${text.slice(5)}`);
      const head =
        reply.length < 126
          ? Buffer.from([0x81, reply.length])
          : Buffer.from([0x81, 126, reply.length >> 8, reply.length & 0xff]);
      socket.write(Buffer.concat([head, reply]));
    }
  });
  socket.on("error", () => {});
}
