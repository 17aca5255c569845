// /api/spend and the fleet page's money behind the site's login: a user sees their own VMs'
// groups and sizes, an admin everyone's (docs/cost.md).
import http from "node:http";
import type { AddressInfo } from "node:net";
import { Registry } from "prom-client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createWebServer } from "../../src/serve/router.js";
import type { FleetCounters, FleetReader, VmView } from "../../src/model/vm-view.js";
import { FleetSpend } from "../../src/outreach/money/fleet-spend.js";
import { vmView } from "../fixtures/vm-view.js";

const view = (name: string, owner: string): VmView => vmView(name, { owner });

let server: http.Server;
let port: number;
const views = [view("alice-ws", "alice"), view("bob-ws", "bob")];

beforeAll(async () => {
  let now = 0;
  const spend = new FleetSpend(
    {
      acting: () => true,
      views: () => views,
      facts: () => ({
        running: true,
        profile: "cpu",
        wouldHaveStopped: false,
        capacity: { cpuCores: 4, memoryBytes: 2 ** 33, gpus: 0 },
      }),
      stoppedByWs: () => false,
    },
    0,
  );
  for (; now <= 3_600_000; now += 30_000) spend.tick(now);
  now = 3_600_000;
  const fleet: FleetReader = { views: () => views, counters: () => ({}) as FleetCounters };
  server = createWebServer({
    fleet,
    registry: new Registry(),
    nowMs: () => now,
    ready: () => true,
    info: () => ({ version: "test", mode: "standalone", leader: true }),
    identity: { userHeader: "x-user", groupsHeader: "x-groups", adminGroups: ["admins"], trustedProxies: [] },
    spend,
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  port = (server.address() as AddressInfo).port;
});
afterAll(() => new Promise((resolve) => server.close(resolve)));

function get(path: string, headers: Record<string, string>): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    http
      .get({ host: "127.0.0.1", port, path, headers }, (res) => {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (chunk: string) => (body += chunk));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
      })
      .on("error", reject);
  });
}

describe("the spend behind the login", () => {
  it("gives a user their own groups and VMs only", async () => {
    const answer = await get("/api/spend", { "x-user": "bob" });
    expect(answer.status).toBe(200);
    const body = JSON.parse(answer.body);
    expect(body.rows.map((r: { owner: string }) => r.owner)).toEqual(["bob"]);
    expect(body.rows[0].spend.held.cpuCore).toBe(4 * 3600);
    expect(body.vms.map((v: { name: string }) => v.name)).toEqual(["bob-ws"]);
    const page = await get("/", { "x-user": "bob" });
    expect(page.body).toContain('data-group="lab/bob/cpu"');
    expect(page.body).not.toContain('data-group="lab/alice/cpu"');
  });

  it("gives an admin everyone's, and nothing to a request without a user", async () => {
    const body = JSON.parse((await get("/api/spend", { "x-user": "root", "x-groups": "admins" })).body);
    expect(body.rows.map((r: { owner: string }) => r.owner)).toEqual(["alice", "bob"]);
    expect((await get("/api/spend", {})).status).toBe(401);
  });
});
