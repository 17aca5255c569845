// The collector's pages in a real browser: headless Chromium (Debian's
// `chromium`) loads the fleet page and VM pages of the shipped collector,
// saves screenshots under test-output/pages/, and checks what a person sees:
// explanation rows, observe wording, the lease reason, the chart.
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { type Chromium, openChromium, requireChromium } from "../support/chromium.js";
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
let wsLease: string;
let setup: StandaloneCollector;
let chrome: Chromium | undefined;
const machines: Record<string, QuietMachine> = {};
const running: Proc[] = [];
const base = () => `http://127.0.0.1:${setup.httpPort}`;

beforeAll(async () => {
  requireChromium();
  requireBundles();
  mkdirSync(SCREENSHOT_DIR, { recursive: true });
  dir = mkdtempSync(path.join(os.tmpdir(), "ws17-pages-"));
  wsLease = path.join(dir, "ws-lease");
  symlinkSync(agentBundle, wsLease);
  setup = await standaloneCollector(dir, {
    policyDefaults: { autostop: "enabled", mode: "enforce", "idle-timeout": "4s", "grace-period": "10m" },
    extra: `notifications:
  publicUrl: "http://127.0.0.1:HTTP_PORT"
standalone:
  vms:
    lab/observed: { labels: { platform.example.com/user: alice }, annotations: { mode: observe } }
    lab/leased: { labels: { platform.example.com/user: bob } }
    research/pending: { labels: { platform.example.com/user: carol } }`,
  });
  writeFileSync(setup.configFile, readFileSync(setup.configFile, "utf8").replace("HTTP_PORT", String(setup.httpPort)));
  const collector = start(collectorBundle, ["serve", "--config", setup.configFile]);
  running.push(collector);
  await collector.waitFor(/collector serving/);
  writeFileSync(path.join(dir, "none.yaml"), "");
  for (const [namespace, name] of [
    ["lab", "observed"],
    ["lab", "leased"],
    ["research", "pending"],
  ] as const) {
    const machine = await quietMachine();
    machines[name] = machine;
    const agent = start(
      agentBundle,
      [
        "run",
        "--insecure",
        "--collector",
        `127.0.0.1:${setup.grpcPort}`,
        "--namespace",
        namespace,
        "--name",
        name,
        "--report-interval",
        "1s",
        ...machine.flags,
      ],
      {
        WS_AGENT_TOKEN: setup.token(namespace, name),
        WS_AGENT_CONFIG: path.join(dir, "none.yaml"),
      },
    );
    running.push(agent);
    await agent.waitFor(/connected to collector/);
  }
  const taken = spawnSync(process.execPath, [wsLease, "2h", "--reason", "training resnet"], {
    encoding: "utf8",
    env: { ...process.env, WS_AGENT_SOCKET: machines.leased!.socket },
  });
  expect(taken.status, taken.stderr).toBe(0);
  // Wait until the observed VM would stop and the pending one has its notice, so the pages have something to explain.
  await eventually(
    async () => {
      const vms = JSON.parse((await getText(`${base()}/api/vms`)).body).vms as Array<{
        name: string;
        state: string;
        leases: unknown[];
      }>;
      const state = (name: string) => vms.find((v) => v.name === name)?.state;
      return (
        state("observed") === "StoppingPending" &&
        state("pending") === "StoppingPending" &&
        vms.find((v) => v.name === "leased")?.leases.length === 1
      );
    },
    60_000,
    "the VMs to reach their states",
  );
  chrome = await openChromium();
}, 120_000);

afterAll(async () => {
  await chrome?.close();
  await Promise.all(running.map((p) => p.stop()));
  await Promise.all(Object.values(machines).map((m) => m.remove()));
  rmSync(dir, { recursive: true, force: true });
});

describe("pages in a browser", () => {
  it("the fleet page lists every VM, sorts and filters by state, namespace and owner", async () => {
    const page = await chrome!.browser.newPage();
    await page.goto(`${base()}/`);
    expect(await page.locator("#fleet tbody tr").count()).toBe(3);
    expect(await page.locator("#observe-note").innerText()).toContain("observe mode");
    const observedRow = page.locator('tr[data-vm="lab/observed"]');
    expect(await observedRow.innerText()).toMatch(/would stop in/);
    expect(await page.locator('tr[data-vm="research/pending"]').innerText()).toMatch(/stops in/);
    await page.screenshot({ path: path.join(SCREENSHOT_DIR, "fleet.png"), fullPage: true });

    // Sorting by owner, descending, with the header link (no JavaScript needed).
    await page.click('th a:has-text("Owner")');
    await page.click('th a:has-text("Owner")');
    expect(page.url()).toContain("sort=owner");
    expect(
      await page.locator("#fleet tbody tr").evaluateAll((rows) => rows.map((r) => r.getAttribute("data-vm"))),
    ).toEqual(["research/pending", "lab/leased", "lab/observed"]);

    // Filtering with the form.
    await page.selectOption('select[name="namespace"]', "lab");
    await page.selectOption('select[name="state"]', "StoppingPending");
    await page.click('button:has-text("Filter")');
    expect(
      await page.locator("#fleet tbody tr").evaluateAll((rows) => rows.map((r) => r.getAttribute("data-vm"))),
    ).toEqual(["lab/observed"]);
    await page.goto(`${base()}/?owner=bob`);
    expect(
      await page.locator("#fleet tbody tr").evaluateAll((rows) => rows.map((r) => r.getAttribute("data-vm"))),
    ).toEqual(["lab/leased"]);
    await page.screenshot({ path: path.join(SCREENSHOT_DIR, "fleet-filtered.png"), fullPage: true });
    await page.close();
  });

  it("a VM in observe mode says it would stop, why, and draws its idle clock", async () => {
    const page = await chrome!.browser.newPage();
    await page.goto(`${base()}/`);
    await page.click('a:has-text("lab/observed")');
    expect(new URL(page.url()).pathname).toBe("/vm/lab/observed");
    expect(await page.locator("h1").innerText()).toBe("lab/observed");
    expect(await page.locator("#owner").innerText()).toBe("alice");
    const stop = await page.locator("#stop").innerText();
    expect(stop).toMatch(/Would stop at .* observe mode: nothing is stopped, nobody is warned/);
    // Every signal row says whether it counted and why; a quiet machine's readings do not count.
    const rows = page.locator("#signals tbody tr");
    expect(await rows.count()).toBeGreaterThan(0);
    expect(await page.locator("#signals").innerText()).toMatch(/not counted|No signal shows any use/);
    expect(await page.locator("#idle").innerText()).toMatch(/of 4s/);
    expect(await page.locator("#chart").count()).toBe(1);
    expect(await page.locator("#chart path.idle").count()).toBe(1);
    expect(await page.locator("#transitions").innerText()).toMatch(/Active → StoppingPending/);
    await page.screenshot({ path: path.join(SCREENSHOT_DIR, "vm-observed.png"), fullPage: true });
    await page.close();
  });

  it("a VM held by a lease shows the lease, its owner and reason, and a stop only after it", async () => {
    const page = await chrome!.browser.newPage();
    await page.goto(`${base()}/vm/lab/leased`);
    expect(await page.locator("#leases .lease-reason").innerText()).toBe("training resnet");
    // The earliest stop is after the 2h lease and the grace period, never while it holds.
    expect(await page.locator("#stop").innerText()).toMatch(/Stops at .* \(in 2h\d/);
    const signals = await page.locator("#signals").innerText();
    expect(signals).toMatch(/lease/);
    expect(signals).toMatch(/holds the VM/);
    await page.screenshot({ path: path.join(SCREENSHOT_DIR, "vm-leased.png"), fullPage: true });
    await page.goto(`${base()}/vm/research/pending`);
    expect(await page.locator("#stop").innerText()).toMatch(/Stops at .* the VM's users are warned/);
    await page.screenshot({ path: path.join(SCREENSHOT_DIR, "vm-pending.png"), fullPage: true });
    const json = JSON.parse((await getText(`${base()}/api/vms/lab/leased`)).body) as {
      view: { owner: string; leases: Array<{ reason: string }> };
      transitions: unknown[];
      points: unknown[];
    };
    expect(json.view.owner).toBe("bob");
    expect(json.view.leases[0]?.reason).toBe("training resnet");
    expect(json.transitions.length).toBeGreaterThan(0);
    expect(json.points.length).toBeGreaterThan(0);
    expect((await getText(`${base()}/api/vms/lab/nope`)).status).toBe(404);
    const missing = await page.goto(`${base()}/vm/lab/nope`);
    expect(missing?.status()).toBe(404);
    await page.close();
  });

  it("the keep-running link in a browser: the page, a button, the lease via link, and a reused link refused", async () => {
    const status = spawnSync(process.execPath, [wsLease, "status", "--json"], {
      encoding: "utf8",
      env: { ...process.env, WS_AGENT_SOCKET: machines.pending!.socket },
    });
    const hint = (JSON.parse(status.stdout) as { notice?: { keepRunningHint: string } }).notice?.keepRunningHint ?? "";
    const link = /http:\/\/\S+\/keep\/research\/pending\?t=\S+/.exec(hint)?.[0];
    expect(link, `the notice in the VM carries the link: ${hint}`).toBeDefined();
    const page = await chrome!.browser.newPage();
    await page.goto(link!);
    expect(await page.locator("h1").innerText()).toBe("Keep research/pending running?");
    expect(await page.locator("#reason").innerText()).toMatch(/idle/);
    expect(await page.locator('button[name="keep"]').allInnerTexts()).toEqual(["Keep 1h", "Keep 4h", "Keep 8h"]);
    await page.screenshot({ path: path.join(SCREENSHOT_DIR, "keep-confirm.png"), fullPage: true });
    await page.click('button:has-text("Keep 4h")');
    expect(await page.locator("#granted").innerText()).toMatch(/A lease of 4h .* via link/);
    await page.screenshot({ path: path.join(SCREENSHOT_DIR, "keep-granted.png"), fullPage: true });
    await eventually(
      async () => {
        await page.goto(`${base()}/vm/research/pending`);
        return (
          (await page.locator("#state").innerText()) === "Active" &&
          (await page.locator("#leases .lease-reason").count()) === 1
        );
      },
      30_000,
      "the pending stop cancelled by the link's lease",
    );
    expect(await page.locator("#leases .lease-reason").innerText()).toBe("kept running via link by carol");
    expect(await page.locator("#transitions").innerText()).toMatch(/cancel/);
    await page.screenshot({ path: path.join(SCREENSHOT_DIR, "vm-kept-via-link.png"), fullPage: true });
    const again = await page.goto(link!);
    expect(again?.status()).toBe(409);
    expect(await page.locator("#refusal").innerText()).toMatch(/Nothing was changed/);
    await page.screenshot({ path: path.join(SCREENSHOT_DIR, "keep-reused.png"), fullPage: true });
    await page.close();
  });
});
