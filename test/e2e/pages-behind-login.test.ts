// The pages behind the site's login, with a real reverse proxy in front (Debian's nginx standing in
// for oauth2-proxy or an Ingress with external auth: it authenticates people with basic auth and
// sets the identity headers itself, overwriting whatever the client sent). The shipped collector
// believes only that header, and only from the proxy's address; users see their own VMs, admins
// all; keep links pass the login and prove themselves; /metrics and the probes are on their own port.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { htpasswd, startNginx, type Nginx } from "../support/nginx.js";
import {
  agentBundle,
  collectorBundle,
  freePort,
  getText,
  requireBundles,
  start,
  type Proc,
} from "../support/process.js";
import { quietMachine, type QuietMachine } from "../support/quiet-machine.js";
import { standaloneCollector, type StandaloneCollector } from "../support/standalone.js";

let dir: string;
let setup: StandaloneCollector;
let metricsPort: number;
let collector: Proc;
let proxy: Nginx;
const running: Proc[] = [];
const machines: QuietMachine[] = [];

const auth = (user: string) => ({ authorization: `Basic ${Buffer.from(`${user}:pw-${user}`).toString("base64")}` });
async function get(url: string, headers: Record<string, string> = {}) {
  const response = await fetch(url, { headers, redirect: "manual" });
  return { status: response.status, body: await response.text() };
}
const vmNames = (json: string) => (JSON.parse(json).vms as Array<{ name: string }>).map((vm) => vm.name).sort();

beforeAll(async () => {
  requireBundles();
  dir = mkdtempSync(path.join(os.tmpdir(), "ws29-login-"));
  metricsPort = await freePort();
  setup = await standaloneCollector(dir, {
    policyDefaults: { autostop: "enabled", mode: "observe", "idle-timeout": "2h" },
    extra: `standalone:
  vms:
    e2e/alice-ws: { labels: { platform.example.com/user: alice } }
    e2e/bob-ws: { labels: { platform.example.com/user: bob } }`,
  });
  // The proxy connects from 127.0.0.2 (proxy_bind): only that address is a trusted proxy, so a
  // request that reaches the collector directly from 127.0.0.1 is nobody's, whatever it claims.
  writeFileSync(
    setup.configFile,
    readFileSync(setup.configFile, "utf8").replace(
      /^http: .*$/m,
      `http:
  listen: "127.0.0.1:${setup.httpPort}"
  metricsListen: "127.0.0.1:${metricsPort}"
  identity:
    userHeader: X-Auth-Request-User
    groupsHeader: X-Auth-Request-Groups
    adminGroups: [ws-admins]
    trustedProxies: [127.0.0.2/32]`,
    ),
  );
  collector = start(collectorBundle, ["serve", "--config", setup.configFile]);
  running.push(collector);
  await collector.waitFor(/collector serving/);
  writeFileSync(path.join(dir, "none.yaml"), "");
  for (const name of ["alice-ws", "bob-ws"]) {
    const machine = await quietMachine();
    machines.push(machine);
    const agent = start(agentBundle, setup.agentRunArgs("e2e", name, machine.flags), {
      WS_AGENT_TOKEN: setup.token("e2e", name),
      WS_AGENT_CONFIG: path.join(dir, "none.yaml"),
    });
    running.push(agent);
    await agent.waitFor(/connected to collector/);
  }
  writeFileSync(path.join(dir, "htpasswd"), htpasswd({ alice: "pw-alice", bob: "pw-bob", carol: "pw-carol" }));
  // What docs/security.md tells a site to configure in front of the collector.
  const proxyPort = await freePort();
  proxy = await startNginx(
    dir,
    proxyPort,
    `  map $remote_user $ws_groups { carol "ws-admins,staff"; default ""; }
  server {
    listen 127.0.0.1:${proxyPort};
    proxy_bind 127.0.0.2;
    location / {
      auth_basic "workstations";
      auth_basic_user_file ${path.join(dir, "htpasswd")};
      proxy_set_header X-Auth-Request-User $remote_user;
      proxy_set_header X-Auth-Request-Groups $ws_groups;
      proxy_pass http://127.0.0.1:${setup.httpPort};
    }
    # Keep-running (and start) links prove themselves: no login in front of them.
    location /keep/ {
      proxy_set_header X-Auth-Request-User "";
      proxy_set_header X-Auth-Request-Groups "";
      proxy_pass http://127.0.0.1:${setup.httpPort};
    }
  }`,
  );
}, 120_000);

afterAll(async () => {
  await proxy?.stop();
  await Promise.all(running.map((p) => p.stop()));
  await Promise.all(machines.map((m) => m.remove()));
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("pages behind the site's login", () => {
  it("shows each user only their own VMs, admins every VM", async () => {
    const alice = await get(`${proxy.url}/api/vms`, auth("alice"));
    expect(alice.status).toBe(200);
    expect(vmNames(alice.body)).toEqual(["alice-ws"]);
    expect(vmNames((await get(`${proxy.url}/api/vms`, auth("bob"))).body)).toEqual(["bob-ws"]);
    expect(vmNames((await get(`${proxy.url}/api/vms`, auth("carol"))).body)).toEqual(["alice-ws", "bob-ws"]);
    const page = await get(`${proxy.url}/`, auth("alice"));
    expect(page.body).toContain("Signed in as <strong>alice</strong>: your VMs");
    expect(page.body).toContain('data-vm="e2e/alice-ws"');
    expect(page.body).not.toContain("bob-ws");
    expect((await get(`${proxy.url}/`, auth("carol"))).body).toContain("(admin: every VM)");
  });

  it("refuses another user's VM page with a clear page, and the proxy refuses anonymous visitors", async () => {
    const foreign = await get(`${proxy.url}/vm/e2e/bob-ws`, auth("alice"));
    expect(foreign.status).toBe(403);
    expect(foreign.body).toContain(
      "You are signed in as <strong>alice</strong>; this workstation belongs to someone else.",
    );
    expect((await get(`${proxy.url}/api/vms/e2e/bob-ws`, auth("alice"))).status).toBe(403);
    expect((await get(`${proxy.url}/vm/e2e/alice-ws`, auth("alice"))).status).toBe(200);
    expect((await get(`${proxy.url}/vm/e2e/alice-ws`)).status).toBe(401); // nginx: no credentials
  });

  it("ignores an identity a client sends itself, through the proxy and around it", async () => {
    // Through the proxy the header is the proxy's: alice claiming to be carol is still alice.
    const claimed = await get(`${proxy.url}/api/vms`, {
      ...auth("alice"),
      "X-Auth-Request-User": "carol",
      "X-Auth-Request-Groups": "ws-admins",
    });
    expect(vmNames(claimed.body)).toEqual(["alice-ws"]);
    // Straight to the collector from an address that is not the proxy: nobody is signed in.
    const direct = await getText(`http://127.0.0.1:${setup.httpPort}/api/vms`);
    expect(direct.status).toBe(401);
    const forged = await get(`http://127.0.0.1:${setup.httpPort}/vm/e2e/bob-ws`, { "X-Auth-Request-User": "bob" });
    expect(forged.status).toBe(401);
    expect(forged.body).toContain("Sign in first");
    expect(forged.body).not.toContain("bob-ws");
  });

  it("lets keep links through without a login: the link's signature decides", async () => {
    const link = await get(`${proxy.url}/keep/e2e/alice-ws?t=k1.forged`);
    expect(link.status).toBe(400);
    expect(link.body).toContain("This link is not valid");
    expect(link.body).toContain("Nothing was changed.");
  });

  it("serves /metrics and the probes on their own port, and no /metrics on the pages' port", async () => {
    const metrics = await getText(`http://127.0.0.1:${metricsPort}/metrics`);
    expect(metrics.status).toBe(200);
    expect(metrics.body).toContain('workstation_state{namespace="e2e",name="alice-ws"');
    expect((await getText(`http://127.0.0.1:${metricsPort}/healthz`)).status).toBe(200);
    expect((await getText(`http://127.0.0.1:${metricsPort}/readyz`)).body).toBe("ready (leader)\n");
    expect((await getText(`http://127.0.0.1:${metricsPort}/api/vms`)).status).toBe(404);
    expect((await getText(`http://127.0.0.1:${setup.httpPort}/metrics`)).status).toBe(404);
    expect((await get(`${proxy.url}/metrics`, auth("carol"))).status).toBe(404);
    expect((await getText(`http://127.0.0.1:${setup.httpPort}/healthz`)).status).toBe(200);
  });
});
