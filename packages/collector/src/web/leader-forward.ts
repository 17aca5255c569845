// A standby replica does not act: a POST (start, keep running) that reaches it is forwarded to
// the leader through the collector's Service (which selects the leader's pod: kube/leader-label.ts),
// and the leader's answer is passed back as it is. A request that was forwarded once is never
// forwarded again (a Service that has not caught up with a new leader): it gets a 503 page that
// asks the browser to try again in a moment, and nothing changes.
import http from "node:http";
import https from "node:https";

export const FORWARDED_HEADER = "x-ws-forwarded-by";

export interface ForwardAnswer {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
}

/** Headers a forwarded POST keeps: the form, and who the site's auth proxy says is asking. */
const KEPT_HEADERS = [
  "content-type",
  "accept",
  "user-agent",
  "x-forwarded-for",
  "x-forwarded-host",
  "x-forwarded-proto",
];

export function forwardToLeader(
  leaderUrl: string,
  req: http.IncomingMessage,
  body: string,
  options: { replica: string; extraHeaders?: readonly string[]; timeoutMs?: number },
): Promise<ForwardAnswer> {
  const target = new URL(req.url ?? "/", leaderUrl);
  const headers: Record<string, string> = {
    [FORWARDED_HEADER]: options.replica,
    "content-length": String(Buffer.byteLength(body)),
  };
  for (const name of [...KEPT_HEADERS, ...(options.extraHeaders ?? []).map((h) => h.toLowerCase())]) {
    const value = req.headers[name];
    if (typeof value === "string") headers[name] = value;
  }
  const transport = target.protocol === "https:" ? https : http;
  return new Promise((resolve, reject) => {
    const forwarded = transport.request(
      target,
      { method: req.method, headers, timeout: options.timeoutMs ?? 15_000 },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (chunk: Buffer) => chunks.push(chunk));
        res.on("end", () => {
          const out: Record<string, string> = {};
          for (const name of ["content-type", "location", "cache-control"]) {
            const value = res.headers[name];
            if (typeof value === "string") out[name] = value;
          }
          resolve({ status: res.statusCode ?? 502, headers: out, body: Buffer.concat(chunks) });
        });
        res.on("error", reject);
      },
    );
    forwarded.on("timeout", () => forwarded.destroy(new Error("the leader did not answer in time")));
    forwarded.on("error", reject);
    forwarded.end(body);
  });
}
