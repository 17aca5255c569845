// Money on the pages (issue 38 item 3, docs/cost.md) in a real browser: a standalone collector
// with prices, one agent in observe mode that goes idle past its would-stop moment. The fleet page
// shows what the VM held and what enforce mode would have given back, in the configured currency,
// and its size beside its use; the VM page and /api/spend say the same. Screenshots under
// test-output/pages/.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { type Chromium, openChromium } from "../support/chromium.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  agentBundle,
  collectorBundle,
  eventually,
  getText,
  repoRoot,
  requireBundles,
  start,
  type Proc,
} from "../support/process.js";
import { quietMachine, type QuietMachine } from "../support/quiet-machine.js";
import { standaloneCollector, type StandaloneCollector } from "../support/standalone.js";

const SCREENSHOT_DIR = path.join(repoRoot, "test-output/pages");

let dir: string;
let setup: StandaloneCollector;
let chrome: Chromium | undefined;
let machine: QuietMachine;
const running: Proc[] = [];
const base = () => `http://127.0.0.1:${setup.httpPort}`;

interface SpendJson {
  currency?: string;
  rows: Array<{
    namespace: string;
    owner: string;
    profile: string;
    spend: Record<string, { money: number; cpuCore: number }>;
  }>;
  vms: Array<{ namespace: string; name: string; capacity: { cpuCores: number | null } }>;
}

beforeAll(async () => {
  requireBundles();
  mkdirSync(SCREENSHOT_DIR, { recursive: true });
  dir = mkdtempSync(path.join(os.tmpdir(), "h38m-money-"));
  setup = await standaloneCollector(dir, {
    policyDefaults: { autostop: "enabled", mode: "observe", "idle-timeout": "2s", "grace-period": "3s" },
    // Prices near the ceiling so a few seconds of one small VM show as cents.
    extra: `prices:
  currency: EUR
  cpuCoreHour: 90
  memoryGiBHour: 5
standalone:
  vms:
    lab/spender: { labels: { platform.example.com/user: alice } }`,
  });
  const collector = start(collectorBundle, ["serve", "--config", setup.configFile]);
  running.push(collector);
  await collector.waitFor(/collector serving/);
  writeFileSync(path.join(dir, "none.yaml"), "");
  machine = await quietMachine();
  const agent = start(agentBundle, setup.agentRunArgs("lab", "spender", machine.flags), {
    WS_AGENT_TOKEN: setup.token("lab", "spender"),
    WS_AGENT_CONFIG: path.join(dir, "none.yaml"),
  });
  running.push(agent);
  await agent.waitFor(/connected to collector/);
  // Observe mode past the would-stop moment: from then on the VM counts as "enforce mode would give back".
  await eventually(
    async () => {
      const detail = JSON.parse((await getText(`${base()}/api/vms/lab/spender`)).body);
      return detail.notice?.wouldStopAtMs !== undefined;
    },
    60_000,
    "the observed VM to pass its would-stop moment",
  );
  await eventually(
    async () => {
      const spend = JSON.parse((await getText(`${base()}/api/spend`)).body) as SpendJson;
      return (spend.rows[0]?.spend.wouldGiveBack?.money ?? 0) >= 0.01;
    },
    60_000,
    "a cent that enforce mode would have given back",
  );
  chrome = await openChromium();
}, 180_000);

afterAll(async () => {
  await chrome?.close();
  await Promise.all(running.map((p) => p.stop()));
  await machine?.remove();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const euros = (text: string | null) => {
  const match = /^(\d+\.\d\d) EUR$/.exec((text ?? "").trim());
  expect(match, `"${text}" is not an amount in EUR`).not.toBeNull();
  return Number(match![1]);
};

describe("money on the pages", () => {
  it("/api/spend has the VM's group in the configured currency, and its size from the guest", async () => {
    const spend = JSON.parse((await getText(`${base()}/api/spend`)).body) as SpendJson;
    expect(spend.currency).toBe("EUR");
    expect(spend.rows.map((r) => [r.namespace, r.owner, r.profile])).toEqual([["lab", "alice", ""]]);
    const row = spend.rows[0]!;
    // Held from the first decision on, would-give-back only from the would-stop moment (each sampled as it changed).
    expect(row.spend.held!.money).toBeGreaterThan(row.spend.wouldGiveBack!.money);
    expect(row.spend.held!.cpuCore).toBeGreaterThan(0);
    expect(row.spend.givenBack!.money).toBe(0);
    expect(spend.vms[0]).toMatchObject({ namespace: "lab", name: "spender" });
    expect(spend.vms[0]!.capacity.cpuCores).toBeGreaterThan(0);
  });

  it("the fleet page shows held and would-give-back money per owner, and the VM's size beside its use", async () => {
    const page = await chrome!.browser.newPage();
    await page.goto(`${base()}/`);
    await page.locator("#spend").scrollIntoViewIfNeeded();
    await page.screenshot({ path: path.join(SCREENSHOT_DIR, "fleet-money.png"), fullPage: true });
    expect(await page.locator("#spend-title").textContent()).toBe("What the fleet holds and costs");
    expect(await page.locator("#spend").getAttribute("data-unit")).toBe("money");
    const group = page.locator('#spend tr[data-group="lab/alice/"]');
    expect(await group.locator("td").nth(1).textContent()).toBe("alice");
    const held = euros(await group.locator('td[data-kind="held"]').textContent());
    const wouldGiveBack = euros(await group.locator('td[data-kind="wouldGiveBack"]').textContent());
    expect(wouldGiveBack).toBeGreaterThan(0);
    expect(held).toBeGreaterThanOrEqual(wouldGiveBack);
    expect(euros(await group.locator('td[data-kind="givenBack"]').textContent())).toBe(0);
    const sized = page.locator('#right-sizing tr[data-sized-vm="lab/spender"]');
    expect(await sized.locator("td").nth(1).textContent()).toMatch(/^\d+ cores · p95 (\d+%|—)$/);
    await page.close();
  });

  it("the VM page shows the VM's own figures", async () => {
    const page = await chrome!.browser.newPage();
    await page.goto(`${base()}/vm/lab/spender`);
    await page.locator("#vm-spend").scrollIntoViewIfNeeded();
    await page.screenshot({ path: path.join(SCREENSHOT_DIR, "vm-money.png"), fullPage: true });
    const text = (await page.locator('#vm-spend li[data-kind="wouldGiveBack"]').textContent()) ?? "";
    // The VM's own figure, then its namespace, owner and profile together (one VM: the same).
    expect(text).toMatch(/^Enforce mode would give back: \d+\.\d\d EUR \(lab · alice · no profile: \d+\.\d\d EUR\)$/);
    expect(Number(/(\d+\.\d\d)/.exec(text)![1])).toBeGreaterThan(0);
    await page.close();
  });
});
