// A standby forwards start and keep POSTs to the leader (issue 34, item 1): the target is the
// leader's own origin with a path rebuilt from the parsed route, never the request's target
// resolved against the leader's URL (`/\HOST:PORT/../../start/NS/NAME` named any host and port,
// and the standby relayed that host's answer), and the leader's answer passes back only as a
// collector's page.
import http from "node:http";
import net from "node:net";
import fc from "fast-check";
import { Registry } from "prom-client";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { FleetCounters, FleetReader } from "../../src/model/vm-view.js";
import { filterLeaderAnswer, leaderTarget } from "../../src/web/leader-forward.js";
import { createWebServer, standbyForwardTarget } from "../../src/serve/router.js";

const LEADER = "http://ws-collector.ws-system.svc:8080";

describe("the forward target (property)", () => {
  // Request targets an attacker would write: slashes of both kinds, dot segments raw and
  // percent-encoded, hosts with ports and userinfo, tabs and newlines, queries and fragments.
  const piece = fc.constantFrom(
    "/",
    "\\",
    "//",
    "/\\",
    "\\\\",
    ".",
    "..",
    "%2e",
    "%2E%2e",
    "%2f",
    "%5c",
    "%00",
    "\t",
    "\n",
    "\r",
    " ",
    "@",
    ":",
    ":6379",
    "evil.example",
    "127.0.0.1",
    "[::1]",
    "user:pw@",
    "start",
    "keep",
    "start/",
    "keep/",
    "lab",
    "gpu-1",
    "?",
    "?t=s1.abc",
    "&t=x",
    "#",
    "http:",
    "https://",
  );
  const target = fc
    .tuple(fc.array(piece, { maxLength: 14 }), fc.string({ maxLength: 6 }))
    .map(([parts, noise]) => `/${parts.join("")}${noise}`);
  const anyTarget = fc.oneof(
    target,
    fc.string({ maxLength: 40 }).map((s) => `/${s}`),
    // The shape of the reported attack, with a generated host, port and route.
    fc
      .tuple(
        fc.domain(),
        fc.integer({ min: 1, max: 65535 }),
        fc.constantFrom("start", "keep"),
        fc.string({ maxLength: 8 }),
      )
      .map(([host, port, action, name]) => `/\\${host}:${port}/../../${action}/ns/${name}`),
  );
  const leaders = fc.constantFrom(LEADER, "https://10.0.0.7:8443", "http://[fd00::1]:8080", "http://leader");

  it("is always the leader's origin, with a path rebuilt from the route and at most the token as query", () => {
    fc.assert(
      fc.property(leaders, anyTarget, (leaderUrl, requestTarget) => {
        const forwarded = standbyForwardTarget(leaderUrl, requestTarget);
        if (!forwarded) return;
        const leader = new URL(leaderUrl);
        expect(forwarded.origin).toBe(leader.origin);
        expect(forwarded.username + forwarded.password).toBe("");
        expect(forwarded.hash).toBe("");
        expect([...forwarded.searchParams.keys()].every((key) => key === "t")).toBe(true);
        // The path is /start|keep/NS/NAME, each part one encoded segment that decodes to the route's.
        const parts = forwarded.pathname.split("/");
        expect(parts).toHaveLength(4);
        expect(["start", "keep"]).toContain(parts[1]);
        const route = new URL(`http://collector${requestTarget}`).pathname.split("/");
        expect(parts.slice(2).map(decodeURIComponent)).toEqual(route.slice(2).map(decodeURIComponent));
        // Serialised and parsed again (what http.request does with it), it is still the same place.
        const again = new URL(forwarded.href);
        expect([again.origin, again.pathname]).toEqual([leader.origin, forwarded.pathname]);
      }),
      { numRuns: 2000 },
    );
  });

  it("the reported target goes to the leader's /start/NS/NAME", () => {
    expect(standbyForwardTarget(LEADER, "/\\127.0.0.1:6379/../../start/lab/gpu-1")?.href).toBe(
      `${LEADER}/start/lab/gpu-1`,
    );
    expect(standbyForwardTarget(LEADER, "/keep/lab/gpu-1?t=k1.x&url=http://evil/")?.href).toBe(
      `${LEADER}/keep/lab/gpu-1?t=k1.x`,
    );
    // A route part the URL parser would fold away is no route of its own.
    expect(leaderTarget(LEADER, { action: "start", vm: { namespace: "..", name: "x" } })).toBeUndefined();
    expect(standbyForwardTarget(LEADER, "/start/%2e%2e/x")).toBeUndefined();
    expect(standbyForwardTarget(LEADER, "/fleet")).toBeUndefined();
  });

  it("passes back only a collector's answer", () => {
    const html = { "content-type": "text/html; charset=utf-8" };
    expect(filterLeaderAnswer(200, html, Buffer.from("<p>ok</p>"))?.status).toBe(200);
    expect(filterLeaderAnswer(303, { location: "?t=s1.abc" }, Buffer.alloc(0))?.headers.location).toBe("?t=s1.abc");
    expect(filterLeaderAnswer(303, { location: "http://evil.example/" }, Buffer.alloc(0))).toBeUndefined();
    expect(filterLeaderAnswer(303, { location: "/\t/evil.example/" }, Buffer.alloc(0))).toBeUndefined();
    expect(filterLeaderAnswer(302, {}, Buffer.alloc(0))).toBeUndefined();
    expect(filterLeaderAnswer(200, { "content-type": "application/octet-stream" }, Buffer.from("x"))).toBeUndefined();
    expect(filterLeaderAnswer(200, {}, Buffer.from("+PONG\r\n"))).toBeUndefined();
    expect(filterLeaderAnswer(200, html, Buffer.alloc(1 << 20))).toBeUndefined();
    expect(filterLeaderAnswer(101, html, Buffer.alloc(0))).toBeUndefined();
  });
});

describe("a standby's forward, over HTTP", () => {
  const seen: { leader: string[]; elsewhere: string[] } = { leader: [], elsewhere: [] };
  let leaderAnswer: { status: number; headers: Record<string, string>; body: string } = {
    status: 200,
    headers: { "content-type": "text/html; charset=utf-8" },
    body: "<p>the leader's page</p>",
  };
  const servers: http.Server[] = [];
  let leaderPort = 0;
  let otherPort = 0;
  let standbyPort = 0;

  const listen = async (server: http.Server): Promise<number> => {
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    return (server.address() as net.AddressInfo).port;
  };

  beforeAll(async () => {
    leaderPort = await listen(
      http.createServer((req, res) => {
        seen.leader.push(req.url ?? "");
        req.resume();
        res.writeHead(leaderAnswer.status, leaderAnswer.headers);
        res.end(leaderAnswer.body);
      }),
    );
    // Another service in the cluster: what the attack reached and read.
    otherPort = await listen(
      http.createServer((req, res) => {
        seen.elsewhere.push(req.url ?? "");
        req.resume();
        res.writeHead(200, { "content-type": "text/plain" });
        res.end("internal secret of another service\n");
      }),
    );
    const fleet: FleetReader = { views: () => [], counters: () => ({}) as FleetCounters };
    standbyPort = await listen(
      createWebServer({
        fleet,
        registry: new Registry(),
        nowMs: () => Date.now(),
        ready: () => true,
        info: () => ({ version: "test", mode: "kubernetes", leader: false }),
        leaderUrl: `http://127.0.0.1:${leaderPort}`,
        replica: "collector-1",
      }),
    );
  });
  afterAll(async () => {
    await Promise.all(servers.map((server) => new Promise((resolve) => server.close(resolve))));
  });
  afterEach(() => {
    seen.leader.length = 0;
    seen.elsewhere.length = 0;
  });

  /** A raw request line: what a client can send that http.request would not. */
  const rawPost = (target: string, body = "t=s1.abc"): Promise<string> =>
    new Promise((resolve, reject) => {
      const socket = net.connect(standbyPort, "127.0.0.1", () => {
        socket.write(
          `POST ${target} HTTP/1.1\r\nHost: ws.example.com\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`,
        );
      });
      let answer = "";
      socket.setEncoding("utf8");
      socket.on("data", (chunk: string) => (answer += chunk));
      socket.on("end", () => resolve(answer));
      socket.on("error", reject);
    });

  it("sends `/\\HOST:PORT/../../start/NS/NAME` to the leader's /start/NS/NAME, never to HOST:PORT", async () => {
    const answer = await rawPost(`/\\127.0.0.1:${otherPort}/../../start/lab/gpu-1`);
    expect(seen.elsewhere).toEqual([]);
    expect(answer).not.toContain("internal secret");
    expect(seen.leader).toEqual(["/start/lab/gpu-1"]);
    expect(answer).toMatch(/^HTTP\/1\.1 200 /);
    expect(answer).toContain("<p>the leader's page</p>");
    expect(answer.toLowerCase()).toContain("x-frame-options: deny");
  });

  it("keeps the token of the query and nothing else of it", async () => {
    await rawPost(`/keep/lab/gpu-1?t=k1.abc&next=//127.0.0.1:${otherPort}/`);
    expect(seen.leader).toEqual(["/keep/lab/gpu-1?t=k1.abc"]);
    expect(seen.elsewhere).toEqual([]);
  });

  it("an answer that is not a collector's page is not relayed: the standby's own 503", async () => {
    leaderAnswer = { status: 200, headers: { "content-type": "application/octet-stream" }, body: "raw bytes" };
    try {
      const answer = await rawPost("/start/lab/gpu-1");
      expect(answer).toMatch(/^HTTP\/1\.1 503 /);
      expect(answer).not.toContain("raw bytes");
      expect(answer).toContain("Nothing was changed.");
      leaderAnswer = { status: 302, headers: { location: "https://evil.example/" }, body: "" };
      const redirect = await rawPost("/start/lab/gpu-1");
      expect(redirect).toMatch(/^HTTP\/1\.1 503 /);
      expect(redirect).not.toContain("evil.example");
    } finally {
      leaderAnswer = {
        status: 200,
        headers: { "content-type": "text/html; charset=utf-8" },
        body: "<p>the leader's page</p>",
      };
    }
  });
});
