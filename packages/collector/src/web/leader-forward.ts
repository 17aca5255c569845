// A standby replica does not act: a POST (start, keep running) that reaches it is forwarded to
// the leader through the collector's Service (which selects the leader's pod: platform/kube/leader-label.ts),
// and the leader's answer is passed back. A request that was forwarded once is never forwarded
// again (a Service that has not caught up with a new leader): it gets a 503 page that asks the
// browser to try again in a moment, and nothing changes.
//
// What is forwarded is rebuilt, never relayed (docs/security.md, "A standby's forward to the
// leader"): the target is start.leaderUrl's own origin with a path built from the parsed route
// (/start/NS/NAME or /keep/NS/NAME, each part encoded) and at most the `t` query parameter; the
// request's own target is never resolved against the leader's URL (`/\host:port/../../start/a/b`
// would otherwise name another host). The answer passes back only as a collector's page: a known
// content type, a bounded body, a Location only when it is a path on this site.
import http from "node:http";
import https from "node:https";
import type { VmKey } from "../model/vm-key.js";
import { sameSitePath } from "./same-site.js";

export const FORWARDED_HEADER = "x-ws-forwarded-by";

/** The two POSTs a standby forwards, as parsed from the request (never its raw target). */
export interface ForwardRoute {
  action: "start" | "keep";
  vm: VmKey;
  /** The `t` query parameter, when the token came in the query rather than the form. */
  token?: string;
}

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

/** A collector's page or JSON answer is a few KiB; anything larger is not one of its answers. */
export const MAX_FORWARDED_ANSWER_BYTES = 256 * 1024;

/** The content types a collector answers a start or keep POST with. */
const ANSWER_TYPES = ["text/html", "application/json", "text/plain"];

/** A route part the URL parser would fold away ("." and ".." stay as they are under encodeURIComponent). */
const isDotSegment = (part: string) => part === "." || part === "..";

/**
 * Where a standby sends a route: the leader's origin and a path built from the route alone.
 * Undefined when the leader URL is not http(s) or the route cannot be a path of its own
 * (an empty, "." or ".." part: the URL parser would fold it into another path).
 */
export function leaderTarget(leaderUrl: string, route: ForwardRoute): URL | undefined {
  let leader: URL;
  try {
    leader = new URL(leaderUrl);
  } catch {
    return undefined;
  }
  if (leader.protocol !== "http:" && leader.protocol !== "https:") return undefined;
  const { namespace, name } = route.vm;
  if (!namespace || !name || isDotSegment(namespace) || isDotSegment(name)) return undefined;
  const target = new URL(
    `${leader.origin}/${route.action}/${encodeURIComponent(namespace)}/${encodeURIComponent(name)}`,
  );
  if (route.token !== undefined) target.searchParams.set("t", route.token);
  return target;
}

/** The answer a standby may pass back: a collector's page, or undefined (the caller shows its own). */
export function filterLeaderAnswer(
  status: number | undefined,
  headers: http.IncomingHttpHeaders,
  body: Buffer,
): ForwardAnswer | undefined {
  if (status === undefined || status < 200 || status > 599) return undefined;
  if (body.length > MAX_FORWARDED_ANSWER_BYTES) return undefined;
  const type = typeof headers["content-type"] === "string" ? headers["content-type"] : "";
  const mediaType = type.split(";")[0]?.trim().toLowerCase() ?? "";
  if (body.length > 0 && !ANSWER_TYPES.includes(mediaType)) return undefined;
  const out: Record<string, string> = {};
  if (type) out["content-type"] = type;
  const location = headers.location;
  if (typeof location === "string") {
    // A collector redirects only within its own pages; anything else is not its answer.
    if (sameSitePath(location) !== location) return undefined;
    out.location = location;
  } else if (status >= 300 && status < 400) return undefined;
  if (typeof headers["retry-after"] === "string" && /^\d{1,4}$/.test(headers["retry-after"]))
    out["retry-after"] = headers["retry-after"];
  return { status, headers: out, body };
}

/** Rejects when the leader cannot be reached or its answer is not a collector's (the caller shows "try again"). */
export function forwardToLeader(
  leaderUrl: string,
  route: ForwardRoute,
  req: http.IncomingMessage,
  body: string,
  options: { replica: string; extraHeaders?: readonly string[]; timeoutMs?: number },
): Promise<ForwardAnswer> {
  const target = leaderTarget(leaderUrl, route);
  if (!target) return Promise.reject(new Error("no leader address for this route"));
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
      { method: "POST", headers, timeout: options.timeoutMs ?? 15_000 },
      (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on("data", (chunk: Buffer) => {
          size += chunk.length;
          if (size > MAX_FORWARDED_ANSWER_BYTES) return void res.destroy(new Error("the leader's answer is too large"));
          chunks.push(chunk);
        });
        res.on("end", () => {
          const answer = filterLeaderAnswer(res.statusCode, res.headers, Buffer.concat(chunks));
          if (answer) resolve(answer);
          else reject(new Error("the leader's answer is not a collector's page"));
        });
        res.on("error", reject);
      },
    );
    forwarded.on("timeout", () => forwarded.destroy(new Error("the leader did not answer in time")));
    forwarded.on("error", reject);
    forwarded.end(body);
  });
}
