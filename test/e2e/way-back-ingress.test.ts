// The documented Ingresses leave the way back outside the login (issue 40 #2, #4): every
// collector Ingress docs/install.md shows, and the way-back component's, rendered into the nginx
// configuration ingress-nginx makes of them (a location per path, the longer prefix winning; the
// auth annotations as auth_request to the auth URL, a 302 to the sign-in URL on 401, the response
// headers copied) and run in Debian's nginx in front of the real collector. /start/ and /keep/
// reach the collector without a login (it answers for the link itself); /, /vm/… and /api/vms
// send an anonymous visitor to the sign-in page and pass a signed-in one with the identity header.
import http from "node:http";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import { startNginx, type Nginx } from "../support/nginx.js";
import { collectorBundle, freePort, repoRoot, requireBundles, start, type Proc } from "../support/process.js";
import { standaloneCollector, type StandaloneCollector } from "../support/standalone.js";

type Obj = Record<string, any>; // Ingress YAML: shapes are asserted, not typed

/** Every Ingress in a Markdown file's yaml blocks, or in a YAML file. */
function ingressesIn(file: string): Obj[] {
  const text = readFileSync(path.join(repoRoot, file), "utf8");
  const yamlTexts = file.endsWith(".md") ? [...text.matchAll(/```yaml\n([\s\S]*?)```/g)].map((m) => m[1]!) : [text];
  return yamlTexts
    .flatMap((t) => parseAllDocuments(t).map((d) => d.toJS() as Obj | null))
    .filter((o): o is Obj => o?.kind === "Ingress" && o.apiVersion === "networking.k8s.io/v1");
}

/** Only the collector's own Ingresses (those whose paths go to the ws-collector Service). */
const collectorIngresses = (file: string) =>
  ingressesIn(file).filter((ingress) =>
    (ingress.spec.rules as Obj[]).every((rule) =>
      (rule.http.paths as Obj[]).every((p) => p.backend.service.name === "ws-collector"),
    ),
  );

const ANNOTATION = "nginx.ingress.kubernetes.io/";

/**
 * The server block ingress-nginx makes of these Ingresses for one host: each path a location
 * with its own Ingress's auth (ingress-nginx applies an Ingress's annotations to its paths only).
 * The auth and sign-in URLs keep their paths and go to `authOrigin`; the Service's http port is `upstream`.
 */
function renderNginx(ingresses: Obj[], host: string, listen: string, upstream: string, authOrigin: string): string {
  const locations: string[] = [];
  ingresses.forEach((ingress, index) => {
    const annotations: Record<string, string> = ingress.metadata.annotations ?? {};
    const authUrl = annotations[`${ANNOTATION}auth-url`];
    const signin = annotations[`${ANNOTATION}auth-signin`];
    const copied = (annotations[`${ANNOTATION}auth-response-headers`] ?? "")
      .split(",")
      .map((h) => h.trim())
      .filter(Boolean);
    const auth: string[] = [];
    if (authUrl) {
      const authPath = `/_external-auth-${index}`;
      const url = new URL(authUrl);
      locations.push(`    location = ${authPath} {
      internal;
      proxy_pass_request_body off;
      proxy_set_header Content-Length "";
      proxy_set_header X-Original-URI $request_uri;
      proxy_pass ${authOrigin}${url.pathname};
    }`);
      auth.push(`auth_request ${authPath};`);
      copied.forEach((header, i) => {
        const variable = `$authHeader${index}_${i}`;
        auth.push(`auth_request_set ${variable} $upstream_http_${header.toLowerCase().replace(/-/g, "_")};`);
        auth.push(`proxy_set_header ${header} ${variable};`);
      });
      if (signin) {
        const target = new URL(signin.replace("$escaped_request_uri", "ESCAPED"));
        locations.push(`    location @signin-${index} {
      return 302 ${authOrigin}${target.pathname}${target.search.replace("ESCAPED", "$escaped_request_uri")};
    }`);
        auth.push(`error_page 401 = @signin-${index};`);
      }
    }
    for (const rule of ingress.spec.rules as Obj[]) {
      if (rule.host !== host) continue;
      for (const p of rule.http.paths as Obj[]) {
        const match = p.pathType === "Exact" ? `= ${p.path}` : p.path;
        locations.push(`    location ${match} {
      ${auth.join("\n      ")}
      proxy_pass ${upstream};
    }`);
      }
    }
  });
  return `  map $request_uri $escaped_request_uri { default $request_uri; }
  server {
    listen ${listen};
    server_name ${host};
${locations.join("\n")}
  }`;
}

const SOURCES = ["docs/install.md", "packaging/kubernetes-overlays/way-back/ingress.yaml"] as const;

let dir: string;
let setup: StandaloneCollector;
let collector: Proc;
let authServer: http.Server;
let authOrigin: string;
const proxies = new Map<string, Nginx>();

/** A request as the browser sends it to the site's host; `user` signs in (the auth stand-in's cookie). */
function request(
  proxy: Nginx,
  target: string,
  user?: string,
): Promise<{ status: number; location?: string; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.get(
      {
        host: "127.0.0.1",
        port: proxy.port,
        path: target,
        headers: { host: "ws.example.com", ...(user ? { cookie: `session=${user}` } : {}) },
      },
      (res) => {
        let body = "";
        res.on("data", (chunk: Buffer) => void (body += chunk.toString()));
        res.on("end", () =>
          resolve({
            status: res.statusCode ?? 0,
            ...(res.headers.location ? { location: res.headers.location } : {}),
            body,
          }),
        );
      },
    );
    req.on("error", reject);
  });
}

beforeAll(async () => {
  requireBundles();
  dir = mkdtempSync(path.join(os.tmpdir(), "ws-way-back-"));
  // The oauth2-proxy stand-in: a session cookie names the user; no cookie is a 401.
  authServer = http.createServer((req, res) => {
    const user = /session=(\w+)/.exec(req.headers.cookie ?? "")?.[1];
    if (req.url?.startsWith("/oauth2/auth") && user) {
      res.writeHead(202, { "x-auth-request-user": user, "x-auth-request-groups": "" });
      return void res.end();
    }
    res.writeHead(req.url?.startsWith("/oauth2/auth") ? 401 : 200);
    res.end(req.url?.startsWith("/oauth2/start") ? "the sign-in page\n" : "");
  });
  await new Promise<void>((resolve) => authServer.listen(0, "127.0.0.1", resolve));
  authOrigin = `http://127.0.0.1:${(authServer.address() as { port: number }).port}`;
  setup = await standaloneCollector(dir, {
    policyDefaults: { autostop: "enabled", mode: "observe", "idle-timeout": "2h" },
    extra: `notifications: { publicUrl: "https://ws.example.com" }
standalone: { vms: { e2e/alice-ws: { labels: { platform.example.com/user: alice } } } }`,
  });
  const configText = readFileSync(setup.configFile, "utf8").replace(
    /^http: .*$/m,
    `http:
  listen: "127.0.0.1:${setup.httpPort}"
  identity: { userHeader: X-Auth-Request-User, groupsHeader: X-Auth-Request-Groups, trustedProxies: [127.0.0.1/32] }`,
  );
  writeFileSync(setup.configFile, configText);
  collector = start(collectorBundle, ["serve", "--config", setup.configFile]);
  await collector.waitFor(/collector serving/);
  for (const source of SOURCES) {
    const ingresses = collectorIngresses(source);
    const port = await freePort();
    const body = renderNginx(
      ingresses,
      "ws.example.com",
      `127.0.0.1:${port}`,
      `http://127.0.0.1:${setup.httpPort}`,
      authOrigin,
    );
    proxies.set(source, await startNginx(path.join(dir, source.replace(/\W/g, "-")), port, body));
  }
}, 120_000);

afterAll(async () => {
  for (const proxy of proxies.values()) await proxy.stop();
  await collector?.stop();
  authServer?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe.each(SOURCES)("the collector Ingresses of %s, in nginx", (source) => {
  it("exist, on the host notifications.publicUrl names", () => {
    const ingresses = collectorIngresses(source);
    expect(ingresses.length).toBeGreaterThan(0);
    expect(ingresses.flatMap((i) => (i.spec.rules as Obj[]).map((r) => r.host))).toContain("ws.example.com");
  });

  it("let /start/ and /keep/ through without a login: the collector itself judges the link", async () => {
    const proxy = proxies.get(source)!;
    const startLink = await request(proxy, "/start/e2e/alice-ws?t=s1.forged");
    expect(startLink.location ?? "").not.toMatch(/oauth2/);
    expect(startLink.status).toBe(400);
    expect(startLink.body).toContain("not valid");
    const keepLink = await request(proxy, "/keep/e2e/alice-ws?t=k1.forged");
    expect(keepLink.status).toBe(400);
    expect(keepLink.body).toContain("This link is not valid");
  });

  it("send an anonymous visitor of the pages to the sign-in page, and pass a signed-in one as themselves", async () => {
    const proxy = proxies.get(source)!;
    for (const page of ["/", "/vm/e2e/alice-ws", "/api/vms"]) {
      const anonymous = await request(proxy, page);
      expect(anonymous.status, page).toBe(302);
      expect(anonymous.location, page).toBe(`${authOrigin}/oauth2/start?rd=${page}`);
    }
    // The collector believed the header the auth answer set (without one it answers 401 "Sign in first").
    const signedIn = await request(proxy, "/", "alice");
    expect(signedIn.status).toBe(200);
    expect(signedIn.body).toContain("Signed in as <strong>alice</strong>");
    expect((await request(proxy, "/api/vms", "alice")).status).toBe(200);
  });
});
