// The workstation's fixed address (issue 34, item 5): where the browser is sent back after Start
// is decided the way a browser resolves it (the WHATWG URL parser is the oracle: "/\t/evil.example/"
// starts with one slash, yet a browser strips the tab and goes to https://evil.example/), the
// X-Forwarded-Host is believed only from the configured proxies, and no page may be framed.
import http from "node:http";
import type net from "node:net";
import fc from "fast-check";
import { afterAll, describe, expect, it } from "vitest";
import { AddressStart, createAddressServer, requestedHost, safeNext } from "../../../src/comeback/start/address.js";
import type { StartLinks } from "../../../src/comeback/start/handler.js";
import type { StartFacts, StartPlatform } from "../../../src/comeback/start/platform.js";
import type { IdentityConfig } from "../../../src/web/identity.js";

const SITE = "https://alice-gpu.ws.example.com";

/** Where a browser on `page` goes with `reference` as a Location or link. */
const resolved = (reference: string, page = `${SITE}/lab/tree/notebook.ipynb?x=1`) => new URL(reference, page);

describe("safeNext (property: never off-site for a browser)", () => {
  const piece = fc.constantFrom(
    "/",
    "//",
    "\\",
    "/\\",
    "\t",
    "\n",
    "\r",
    " ",
    "\u000b",
    "\u0000",
    "\u00a0",
    "\u3000",
    "%09",
    "%0a",
    "%2f",
    "%2F%2F",
    "%5c",
    "%2e%2e",
    ".",
    "..",
    "evil.example",
    "evil.example:443",
    "@",
    "user:pw@",
    ":",
    "http:",
    "https:",
    "javascript:",
    "?",
    "#",
    "tree",
    "lab",
    "ａ",
  );
  const references = fc.oneof(
    fc.array(piece, { maxLength: 12 }).map((parts) => parts.join("")),
    fc.array(piece, { maxLength: 12 }).map((parts) => `/${parts.join("")}`),
    fc.string({ maxLength: 30 }).map((s) => `/${s}`),
    fc.webUrl(),
  );

  it("yields a path that every page of the site resolves on the site", () => {
    fc.assert(
      fc.property(references, (reference) => {
        const next = safeNext(reference);
        for (const page of [`${SITE}/`, `${SITE}/lab/tree/notebook.ipynb?x=1`, `${SITE}/.ws/start?next=%2F`])
          expect(resolved(next, page).origin).toBe(SITE);
        expect(next === "/" || next === reference).toBe(true);
        // Sent as a Location header: Node refuses control characters there; none get through.
        // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what is checked
        expect(next).not.toMatch(/[\u0000-\u0020\u007f-\uffff\\]/);
      }),
      { numRuns: 5000 },
    );
  });

  it("refuses what the reported prefix check let through, and keeps what a person opened", () => {
    for (const evil of [
      "/\t/evil.example/",
      "/\n/evil.example/",
      "/\r\n/evil.example",
      "/\\evil.example",
      "//evil.example",
      "https://evil.example/",
    ]) {
      expect(resolved(evil).hostname).toBe("evil.example");
      expect(safeNext(evil)).toBe("/");
    }
    // A space is no part of a Location a browser reads as written: refused too.
    expect(safeNext("/ /evil.example")).toBe("/");
    expect(safeNext("/tree?from=bookmark")).toBe("/tree?from=bookmark");
    expect(safeNext("/lab/tree/%2F%2Fevil.example")).toBe("/lab/tree/%2F%2Fevil.example");
    expect(safeNext("/x".repeat(2000))).toBe("/");
    expect(safeNext(undefined)).toBe("/");
  });
});

describe("requestedHost: X-Forwarded-Host only from a configured proxy", () => {
  const identity: IdentityConfig = {
    userHeader: "X-Auth-Request-User",
    adminGroups: [],
    trustedProxies: ["127.0.0.2/32"],
  };
  const headers = { host: "alice-gpu.ws.example.com:443", "x-forwarded-host": "bob-gpu.ws.example.com" };

  it("a direct client's header is not believed; the trusted proxy's is", () => {
    expect(requestedHost(headers)).toBe("alice-gpu.ws.example.com");
    expect(requestedHost(headers, identity, "10.1.2.3")).toBe("alice-gpu.ws.example.com");
    expect(requestedHost(headers, { ...identity, trustedProxies: [] }, "10.1.2.3")).toBe("alice-gpu.ws.example.com");
    expect(requestedHost(headers, identity, "127.0.0.2")).toBe("bob-gpu.ws.example.com");
    expect(requestedHost(headers, identity, "::ffff:127.0.0.2")).toBe("bob-gpu.ws.example.com");
  });
});

describe("the address's Start and its answers", () => {
  const vm = { namespace: "users", name: "alice-gpu" };
  const facts: StartFacts = {
    owner: "alice",
    runStrategy: "Halted",
    status: "Stopped",
    allocates: [],
    wantsToRun: false,
    instance: null,
    lastStop: null,
    labels: {},
    annotations: {},
  };
  const platform: StartPlatform = {
    list: () => [vm],
    facts: () => facts,
    start: async () => ({ ok: true, already: false, message: "started" }),
  };
  const starts: string[] = [];
  const links = {
    entryUrlOf: () => `${SITE}/`,
    validToken: () => true,
    formToken: () => "s1.token",
    render: () => '<form><input type="hidden" name="t" value="s1.token"></form>',
    start: async (request: { by: string }) => {
      starts.push(request.by);
      return { ok: true, message: "started" };
    },
  } as unknown as StartLinks;
  const identity: IdentityConfig = { userHeader: "X-Auth-Request-User", adminGroups: [], trustedProxies: [] };
  const address = new AddressStart({ platform, links, identity, nowMs: () => 0, leader: () => true });
  const request = (form: string): Promise<{ status: number; location?: string }> =>
    address
      .handle(
        {
          method: "POST",
          headers: { host: "alice-gpu.ws.example.com", "x-auth-request-user": "alice" },
          socket: { remoteAddress: "127.0.0.1" },
        } as unknown as http.IncomingMessage,
        new URLSearchParams(form),
        "/.ws/start",
      )
      .then((answer) => ({
        status: answer.status,
        ...(answer.headers?.location ? { location: answer.headers.location } : {}),
      }));

  it("sends the browser back only to a path on the same site", async () => {
    expect(await request(`t=s1.token&next=${encodeURIComponent("/\t/evil.example/")}`)).toEqual({
      status: 303,
      location: "/",
    });
    expect(await request(`t=s1.token&next=${encodeURIComponent("/tree?from=bookmark")}`)).toEqual({
      status: 303,
      location: "/tree?from=bookmark",
    });
    expect(starts).toEqual(["alice (signed in)", "alice (signed in)"]);
  });

  const server = createAddressServer(address, () => {});
  afterAll(() => new Promise((resolve) => server.close(resolve)));

  it("no page of the wake listener may be framed by another site", async () => {
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const port = (server.address() as net.AddressInfo).port;
    const answer = await new Promise<http.IncomingMessage>((resolve, reject) =>
      http
        .get(
          {
            host: "127.0.0.1",
            port,
            path: "/tree",
            headers: { host: "alice-gpu.ws.example.com", accept: "text/html", "x-auth-request-user": "alice" },
          },
          (res) => resolve(res.resume()),
        )
        .on("error", reject),
    );
    expect(answer.statusCode).toBe(503);
    expect(answer.headers["x-frame-options"]).toBe("DENY");
    expect(answer.headers["content-security-policy"]).toBe("frame-ancestors 'none'");
  });
});
