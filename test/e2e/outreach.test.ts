// Reaching people, with the shipped files: webhooks to a real loopback
// receiver (JSON, Slack, ntfy bodies as documented), a receiver that answers
// 500 is retried and one that hangs delays no stop; the signed keep-running
// link end to end (notice → link → POST 4h → the agent reports a "via link"
// lease → the pending stop is cancelled), and reused, expired, tampered and
// other-VM links refused with nothing changed; observe mode warns nobody.
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { deriveLinkKey, signKeepLink } from "../../packages/collector/src/links/keep-token.js";
import { keyFromFile } from "../../packages/collector/src/links/agent-token.js";
import {
  agentBundle,
  collectorBundle,
  eventually,
  getText,
  requireBundles,
  start,
  type Proc,
} from "../support/process.js";
import { quietMachine, type QuietMachine } from "../support/quiet-machine.js";
import { standaloneCollector, type StandaloneCollector } from "../support/standalone.js";
import { webhookReceiver, type WebhookReceiver } from "../support/webhook-receiver.js";

let dir: string;
let wsLease: string;
let receiver: WebhookReceiver;
let setup: StandaloneCollector;
let collector: Proc;
const machines: Record<string, QuietMachine> = {};
const running: Proc[] = [];

function lease(vm: string, args: string[]) {
  return spawnSync(process.execPath, [wsLease, ...args], {
    encoding: "utf8",
    timeout: 30_000,
    env: { ...process.env, WS_AGENT_SOCKET: machines[vm]!.socket },
  });
}

interface JsonHook {
  event: string;
  vm: { namespace: string; name: string };
  owner: string;
  mode: string;
  reason: string;
  noticeId: string | null;
  deadline: string | null;
  keepUrl: string | null;
  vmUrl: string | null;
  text: string;
}
const jsonHooks = (vm: string) =>
  receiver
    .on("/json")
    .map((h) => h.body as JsonHook)
    .filter((b) => b.vm.name === vm);

beforeAll(async () => {
  requireBundles();
  dir = mkdtempSync(path.join(os.tmpdir(), "ws17-outreach-"));
  wsLease = path.join(dir, "ws-lease");
  symlinkSync(agentBundle, wsLease);
  receiver = await webhookReceiver();
  const placeholderHttp = "HTTP_PORT";
  setup = await standaloneCollector(dir, {
    policyDefaults: { autostop: "enabled", mode: "enforce", "idle-timeout": "3s", "grace-period": "40s" },
    extra: `notifications:
  publicUrl: "http://127.0.0.1:${placeholderHttp}"
  timeout: 20s
  retries: 2
  webhooks:
    - { url: "${receiver.url}/json", format: json }
    - { url: "${receiver.url}/slack/T000/B000/secretpart", format: slack }
    - { url: "${receiver.url}/ntfy/ws-alice", format: ntfy }
    - { url: "${receiver.url}/fail", format: json, name: failing }
    - { url: "${receiver.url}/hang", format: json, name: hanging }
standalone:
  stopCommand: ["touch", ${JSON.stringify(path.join(dir, "stopped-{name}"))}]
  vms:
    e2e/kept: { labels: { platform.example.com/user: alice } }
    e2e/doomed: { labels: { platform.example.com/user: bob }, annotations: { profile: quick } }
    e2e/watched: { labels: { platform.example.com/user: carol }, annotations: { profile: watch } }`,
  });
  // The profiles live in the policy section (config values may be shorter than annotation minimums).
  const config = readFileSync(setup.configFile, "utf8")
    .replace(placeholderHttp, String(setup.httpPort))
    .concat(`  profiles:\n    quick: { grace-period: 3s }\n    watch: { mode: observe, grace-period: 3s }\n`);
  writeFileSync(setup.configFile, config);
  collector = start(collectorBundle, ["serve", "--config", setup.configFile]);
  running.push(collector);
  await collector.waitFor(/collector serving/);
  for (const name of ["kept", "doomed", "watched"]) {
    const machine = await quietMachine();
    machines[name] = machine;
    writeFileSync(path.join(dir, "none.yaml"), "");
    const agent = start(agentBundle, setup.agentRunArgs("e2e", name, [...machine.flags]), {
      WS_AGENT_TOKEN: setup.token("e2e", name),
      WS_AGENT_CONFIG: path.join(dir, "none.yaml"),
    });
    running.push(agent);
    await agent.waitFor(/connected to collector/);
  }
}, 120_000);

afterAll(async () => {
  await Promise.all(running.map((p) => p.stop()));
  await receiver?.close();
  await Promise.all(Object.values(machines).map((m) => m.remove()));
  rmSync(dir, { recursive: true, force: true });
});

describe("webhooks", () => {
  it("sends the notice to each format with the documented body, and the link in the VM's notice", async () => {
    const notice = await eventually(
      () => jsonHooks("kept").find((b) => b.event === "notice"),
      60_000,
      "the JSON notice for e2e/kept",
    );
    expect(notice).toMatchObject({
      version: 1,
      event: "notice",
      vm: { namespace: "e2e", name: "kept" },
      owner: "alice",
      mode: "enforce",
    });
    expect(notice.reason).toMatch(/idle|no activity/i);
    expect(Date.parse(notice.deadline!)).toBeGreaterThan(Date.now());
    expect(notice.keepUrl).toMatch(new RegExp(`^http://127\\.0\\.0\\.1:${setup.httpPort}/keep/e2e/kept\\?t=k1\\.`));
    expect(notice.vmUrl).toBe(`http://127.0.0.1:${setup.httpPort}/vm/e2e/kept`);
    expect(notice.text).toContain("alice");

    const slack = await eventually(
      () =>
        receiver
          .on("/slack")
          .map((h) => h.body as { text: string; blocks: Array<{ type: string; elements?: Array<{ url: string }> }> })
          .find((b) => b.text.includes("e2e/kept") && b.text.includes("will be stopped")),
      30_000,
      "the Slack notice",
    );
    const buttons = slack.blocks.find((b) => b.type === "actions")!.elements!;
    expect(buttons.map((b) => b.url)).toContain(notice.keepUrl);

    const ntfy = await eventually(
      () => receiver.on("/ntfy/").find((h) => (h.body as { title: string }).title.includes("e2e/kept")),
      30_000,
      "the ntfy notice",
    );
    expect(ntfy.path).toBe("/ntfy/");
    expect(ntfy.body).toMatchObject({
      topic: "ws-alice",
      priority: 4,
      click: notice.vmUrl,
      actions: [
        { action: "view", label: "Keep running", url: notice.keepUrl },
        { action: "view", label: "Why?", url: notice.vmUrl },
      ],
    });

    const status = JSON.parse(lease("kept", ["status", "--json"]).stdout) as {
      notice?: { keepRunningHint: string };
      vm?: { state: string };
    };
    expect(status.vm?.state).toBe("StoppingPending");
    expect(status.notice?.keepRunningHint).toContain(notice.keepUrl);
  });

  it("retries a receiver that answers 500; one that hangs delays no stop; no secret in the log", async () => {
    const marker = path.join(dir, "stopped-doomed");
    await eventually(() => existsSync(marker), 60_000, "the stop of e2e/doomed");
    // The stop happened although the hanging receiver still holds requests about this VM open.
    expect(receiver.on("/hang").some((h) => (h.body as JsonHook).vm.name === "doomed")).toBe(true);
    expect(receiver.hanging()).toBeGreaterThan(0);
    // And the other receivers heard of the stop while the hanging one still holds its requests.
    await eventually(() => jsonHooks("doomed").some((b) => b.event === "stop"), 30_000, "the stop webhook");
    expect(receiver.hanging()).toBeGreaterThan(0);
    const failedAttempts = await eventually(
      () => {
        const attempts = receiver
          .on("/fail")
          .filter((h) => (h.body as JsonHook).vm.name === "doomed" && (h.body as JsonHook).event === "notice");
        return attempts.length >= 3 ? attempts : undefined;
      },
      30_000,
      "three attempts (1 + 2 retries) at the failing receiver",
    );
    expect(new Set(failedAttempts.map((h) => (h.body as JsonHook).noticeId)).size).toBe(1);
    const metrics = await eventually(
      async () => {
        const text = (await getText(`http://127.0.0.1:${setup.httpPort}/metrics`)).body;
        return /workstation_notifications_total\{format="json",outcome="failed"\} [1-9]/.test(text) ? text : undefined;
      },
      30_000,
      "a failed delivery in the metrics",
    );
    expect(metrics).toMatch(/workstation_notifications_total\{format="slack",outcome="sent"\} [1-9]/);
    expect(metrics).toMatch(/workstation_notification_retries_total [1-9]/);
    expect(collector.output()).toMatch(
      /webhook failing: notice for e2e\/doomed not delivered after 3 attempt\(s\): HTTP 500/,
    );
    expect(collector.output()).not.toContain("secretpart");
    expect(collector.output()).not.toContain("/fail");
  });

  it("observe mode warns nobody: no webhook, no notice in the VM", async () => {
    await collector.waitFor(/watched: would stop now \(observe mode\)/, 60_000);
    expect(
      receiver.received.filter(
        (h) => JSON.stringify(h.body).includes("e2e/watched") || (h.body as JsonHook).vm?.name === "watched",
      ),
    ).toEqual([]);
    const status = JSON.parse(lease("watched", ["status", "--json"]).stdout) as {
      notice?: unknown;
      vm?: { state: string; mode: string };
    };
    expect(status.notice).toBeUndefined();
    expect(status.vm?.mode).toBe("observe");
  });
});

describe("the keep-running link", () => {
  it("notice → link → POST 4h → a lease via link → the stop is cancelled; reuse, expiry, tampering and other VMs refused", async () => {
    const notice = await eventually(() => jsonHooks("kept").find((b) => b.event === "notice"), 60_000, "the notice");
    const keepUrl = notice.keepUrl!;
    const token = new URL(keepUrl).searchParams.get("t")!;

    // GET shows the VM, the reason and the buttons; it changes nothing.
    const page = await getText(keepUrl);
    expect(page.status).toBe(200);
    expect(page.body).toContain("Keep e2e/kept running?");
    expect(page.body).toContain("alice");
    for (const seconds of [3600, 14400, 28800]) expect(page.body).toContain(`name="keep" value="${seconds}"`);
    expect(JSON.parse(lease("kept", ["list", "--json"]).stdout).leases).toEqual([]);

    const post = (url: string, body: string) =>
      fetch(url, { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" }, body }).then(
        async (r) => ({ status: r.status, body: await r.text() }),
      );
    const keepPath = `http://127.0.0.1:${setup.httpPort}/keep/e2e/kept`;
    const granted = await post(keepPath, `t=${token}&keep=14400`);
    expect(granted.status, granted.body).toBe(200);
    expect(granted.body).toContain("keeps running");

    const leases = await eventually(
      () => {
        const list = JSON.parse(lease("kept", ["list", "--json"]).stdout).leases as Array<{
          via?: string;
          user: string;
          reason: string;
          requestedSeconds: number;
          confirmed: boolean;
        }>;
        return list[0]?.confirmed ? list : undefined;
      },
      30_000,
      "the agent to hold and report the link's lease",
    );
    expect(leases).toHaveLength(1);
    expect(leases[0]).toMatchObject({
      via: "link",
      user: "alice",
      requestedSeconds: 14400,
      reason: "kept running via link by alice",
    });
    expect(lease("kept", ["list"]).stdout).toMatch(/via link/);
    expect(readFileSync(path.join(machines.kept!.stateDir, "lease-audit.log"), "utf8")).toMatch(
      /action=granted .*via=link/,
    );

    await eventually(() => jsonHooks("kept").find((b) => b.event === "cancel"), 30_000, "the cancel webhook");
    const vms = JSON.parse((await getText(`http://127.0.0.1:${setup.httpPort}/api/vms`)).body).vms as Array<{
      name: string;
      state: string;
      leases: Array<{ reason: string }>;
    }>;
    const kept = vms.find((v) => v.name === "kept")!;
    expect(kept.state).toBe("Active");
    expect(kept.leases[0]?.reason).toBe("kept running via link by alice");
    await collector.waitFor(/e2e\/kept: keep-running link used: lease [0-9a-f]{8} for 4h/);

    // Refusals: each a page that says why, and nothing changes.
    const reused = await post(keepPath, `t=${token}&keep=14400`);
    expect(reused.status).toBe(409);
    expect(reused.body).toContain("already used");
    const tampered = await post(keepPath, `t=${token.slice(0, -2)}${token.endsWith("AA") ? "BB" : "AA"}&keep=3600`);
    expect(tampered.status).toBe(400);
    expect(tampered.body).toContain("not valid");
    const otherVm = await getText(`http://127.0.0.1:${setup.httpPort}/keep/e2e/doomed?t=${token}`);
    expect(otherVm.status).toBe(400);
    expect(otherVm.body).toContain("for another VM");
    const linkKey = deriveLinkKey(keyFromFile(readFileSync(setup.keyFile), setup.keyFile));
    const expiredToken = signKeepLink(linkKey, {
      namespace: "e2e",
      name: "kept",
      noticeId: notice.noticeId!,
      expiresAtMs: Date.now() - 1000,
    });
    const expired = await post(keepPath, `t=${expiredToken}&keep=3600`);
    expect(expired.status, expired.body).toBe(410);
    expect(expired.body).toContain("expired");
    for (const refusal of [reused, tampered, otherVm, expired]) expect(refusal.body).toContain("Nothing was changed.");
    expect(JSON.parse(lease("kept", ["list", "--json"]).stdout).leases).toHaveLength(1);
  });
});
