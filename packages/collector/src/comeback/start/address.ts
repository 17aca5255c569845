// The workstation's fixed address (docs/coming-back.md): the gateway in front of a workstation
// (nginx, ingress-nginx, a Gateway) sends the 502/503 of a stopped VM here instead of showing it,
// with the Host the person opened. The collector finds the VM whose entry URL has that host (and
// the longest matching path), and answers with the starting page; only the page's POST to
// `/.ws/start` on the same address starts the VM, and only for the person the site's auth proxy
// names in its identity header when that person owns the VM (or is an admin). A request without
// a browser behind it gets a short 503 and starts nothing.
import type http from "node:http";
import { createServer } from "node:http";
import { errorMessage } from "@ws/protocol";
import { readForm } from "../../web/form.js";
import { type VmKey, vmId } from "../../model/vm-key.js";
import { escapeHtml, PAGE_HEADERS, page } from "../../web/html.js";
import { fromTrustedProxy, mayView, viewerFromHeaders, type IdentityConfig } from "../../web/identity.js";
import { sameSitePath } from "../../web/same-site.js";
import type { StartLinks } from "./handler.js";
import type { StartPlatform } from "./platform.js";

/** Where the page's Start button posts, on the workstation's own host. */
export const ADDRESS_START_PATH = "/.ws/start";

export interface AddressOptions {
  platform: StartPlatform;
  links: StartLinks;
  /** The auth proxy's identity header (http.identity); without it, the address starts nothing. */
  identity?: IdentityConfig;
  nowMs: () => number;
  /** False on a standby: a Start is then refused with "try again" (the leader acts). */
  leader: () => boolean;
}

export interface AddressAnswer {
  status: number;
  type: string;
  body: string;
  headers?: Record<string, string>;
}

const firstHeader = (headers: http.IncomingHttpHeaders, name: string): string | undefined => {
  const value = headers[name];
  return (Array.isArray(value) ? value[0] : value)?.split(",")[0]?.trim();
};

/**
 * The host the person opened, without the port, lower case: X-Forwarded-Host when the request
 * comes from one of the configured trusted proxies (http.identity.trustedProxies, the same rule
 * as the identity header), else Host. Anyone who reaches the port directly could send the header.
 */
export function requestedHost(
  headers: http.IncomingHttpHeaders,
  identity?: IdentityConfig,
  peerAddress?: string,
): string {
  const forwarded = fromTrustedProxy(identity, peerAddress) ? firstHeader(headers, "x-forwarded-host") : undefined;
  const host = forwarded ?? firstHeader(headers, "host") ?? "";
  return host.replace(/:\d+$/, "").toLowerCase();
}

/** The original path: X-Original-URI (nginx, ingress-nginx custom errors), else the request's own. */
export function requestedUri(headers: http.IncomingHttpHeaders, own: string): string {
  const uri = firstHeader(headers, "x-original-uri") ?? own;
  return safeNext(uri);
}

/**
 * A same-site path to send the browser back to: "/…" that a browser resolves on this site (the
 * URL parser decides, web/same-site.ts), else "/".
 */
export function safeNext(uri: string | null | undefined): string {
  return (uri?.startsWith("/") ? sameSitePath(uri) : undefined) ?? "/";
}

/** The VM at host + path: the entry URL with this host and the longest path prefix of `uri`. Pure. */
export function vmAtAddress(
  candidates: Iterable<{ vm: VmKey; entryUrl: string }>,
  host: string,
  uri: string,
): VmKey | undefined {
  let best: { vm: VmKey; length: number } | undefined;
  const path = uri.split("?")[0] ?? "/";
  for (const { vm, entryUrl } of candidates) {
    let url: URL;
    try {
      url = new URL(entryUrl);
    } catch {
      continue;
    }
    if (url.hostname.toLowerCase() !== host) continue;
    const prefix = url.pathname.replace(/\/+$/, "");
    if (prefix && path !== prefix && !path.startsWith(`${prefix}/`)) continue;
    if (!best || prefix.length > best.length) best = { vm, length: prefix.length };
  }
  return best?.vm;
}

export class AddressStart {
  constructor(private readonly options: AddressOptions) {}

  async handle(req: http.IncomingMessage, form: URLSearchParams | undefined, path: string): Promise<AddressAnswer> {
    const host = requestedHost(req.headers, this.options.identity, req.socket.remoteAddress);
    const vm = this.find(host, requestedUri(req.headers, path));
    if (!vm) return text(404, `no workstation is known at ${host || "this address"}\n`);
    const facts = this.options.platform.facts(vm)!;
    const browser = /text\/html/.test(firstHeader(req.headers, "accept") ?? "");
    const viewer = viewerFromHeaders(req.headers, this.options.identity, req.socket.remoteAddress);
    const allowed = viewer !== undefined && mayView(viewer, facts.owner ?? undefined);
    const isStart = req.method === "POST" && path.split("?")[0] === ADDRESS_START_PATH;

    if (isStart) {
      if (!this.options.leader())
        return {
          ...refusal(
            503,
            vm,
            "Try again in a moment",
            "This collector replica is a standby (a leader change takes a few seconds). Go back and press Start again.",
          ),
          headers: { "retry-after": "2" },
        };
      if (!this.options.identity)
        return refusal(
          403,
          vm,
          "This address cannot start workstations",
          "The collector has no <code>http.identity</code> configured, so it cannot tell who you are. Use the start link from the stop message.",
        );
      if (!viewer)
        return refusal(401, vm, "Sign in first", "This request came without a signed-in user from the site's login.");
      if (!allowed)
        return refusal(
          403,
          vm,
          "Not your workstation",
          `You are signed in as <strong>${escapeHtml(viewer.user)}</strong>; this workstation belongs to ${escapeHtml(facts.owner ?? "nobody")}. Only its owner (or an admin) can start it.`,
        );
      if (!this.options.links.validToken(vm, form?.get("t") ?? ""))
        return refusal(
          400,
          vm,
          "This page is out of date",
          "Its Start button has expired or was not made for this workstation. Reload the page and press Start again.",
        );
      await this.options.links.start({
        vm,
        by: `${viewer.user} (signed in${viewer.admin ? ", admin" : ""})`,
        trigger: "address",
      });
      return { status: 303, type: "text/plain", body: "", headers: { location: safeNext(form?.get("next")) } };
    }

    // Anything else is the wake page: it shows, and starts nothing.
    if (!browser)
      return text(
        503,
        `workstation ${vmId(vm)} is not running; open ${host} in a browser to start it (nothing was started)\n`,
        { "retry-after": "10" },
      );
    const next = requestedUri(req.headers, path);
    const now = this.options.nowMs();
    if (!allowed) {
      const why = !this.options.identity
        ? "This address cannot start it: the collector has no <code>http.identity</code> configured. Use the start link from the stop message."
        : !viewer
          ? "Sign in through the site's login to start it."
          : `You are signed in as <strong>${escapeHtml(viewer.user)}</strong>; this workstation belongs to ${escapeHtml(facts.owner ?? "nobody")}. Only its owner (or an admin) can start it.`;
      return {
        status: viewer && this.options.identity ? 403 : 503,
        type: "text/html; charset=utf-8",
        body: page(
          `${vmId(vm)} is not running`,
          `<h1>${escapeHtml(vmId(vm))} is not running</h1><div class="box bad" id="refusal" data-status="${viewer ? 403 : 401}"><p>${why}</p><p><strong>Nothing was changed.</strong></p></div>`,
        ),
      };
    }
    const action = `${ADDRESS_START_PATH}?next=${encodeURIComponent(next)}`;
    const html = this.options.links
      .render(vm, facts, this.options.links.formToken(vm), now, action)
      .replace(
        /<input type="hidden" name="t"/,
        `<input type="hidden" name="next" value="${escapeHtml(next)}"><input type="hidden" name="t"`,
      );
    return { status: 503, type: "text/html; charset=utf-8", body: html, headers: { "retry-after": "5" } };
  }

  private find(host: string, uri: string): VmKey | undefined {
    if (!host) return undefined;
    const candidates = [];
    for (const vm of this.options.platform.list()) {
      const facts = this.options.platform.facts(vm);
      const entryUrl = facts ? this.options.links.entryUrlOf(vm, facts) : undefined;
      if (entryUrl) candidates.push({ vm, entryUrl });
    }
    return vmAtAddress(candidates, host, uri);
  }
}

function text(status: number, body: string, headers: Record<string, string> = {}): AddressAnswer {
  return { status, type: "text/plain; charset=utf-8", body, headers };
}

function refusal(status: number, vm: VmKey, title: string, detail: string): AddressAnswer {
  return {
    status,
    type: "text/html; charset=utf-8",
    body: page(
      title,
      `<h1>${escapeHtml(title)}</h1><p class="muted">Workstation ${escapeHtml(vmId(vm))}</p><div class="box bad" id="refusal" data-status="${status}"><p>${detail}</p><p><strong>Nothing was changed.</strong></p></div>`,
    ),
  };
}

/** The fixed address's own listener (start.wakeListen): every request is the address's. */
export function createAddressServer(address: AddressStart, onError: (message: string) => void): http.Server {
  return createServer({ headersTimeout: 15_000, requestTimeout: 30_000 }, (req, res) => {
    const reply = (answer: AddressAnswer) => {
      res.writeHead(answer.status, {
        "content-type": answer.type,
        "cache-control": "no-store",
        ...PAGE_HEADERS,
        ...answer.headers,
      });
      res.end(req.method === "HEAD" ? undefined : answer.body);
    };
    const path = req.url?.startsWith("/") ? req.url : "/";
    void (async () => {
      let form: URLSearchParams | undefined;
      if (req.method === "POST") {
        const read = await readForm(req);
        if (!read.ok) return reply(text(read.status, "the form could not be read\n"));
        form = read.form;
      }
      reply(await address.handle(req, form, path));
    })().catch((error: unknown) => {
      onError(errorMessage(error));
      if (!res.headersSent) reply(text(500, "internal error (logged)\n"));
      else res.destroy();
    });
  });
}
