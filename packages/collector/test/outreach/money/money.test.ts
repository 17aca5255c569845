// Money (issue 38 item 3): the prices section's checks, the spend ledger's per-VM accounting and
// its sums per namespace, owner and profile, and the right-sizing hint. A clock is passed in.
import { describe, expect, it } from "vitest";
import { parsePricesConfig, type Prices } from "../../../src/outreach/money/prices.js";
import { hourlyCost, SpendLedger, spendKinds, type VmHolding } from "../../../src/outreach/money/spend.js";
import { histogramQuantile, rightSizingHint, UsageWindow } from "../../../src/outreach/money/usage.js";

const H = 3_600_000;
const GiB = 2 ** 30;

function parse(value: unknown): { prices: Prices | undefined; problems: string[] } {
  const problems: string[] = [];
  const prices = parsePricesConfig(value, problems, "prices");
  return { prices, problems };
}

describe("the prices section", () => {
  it("is optional: absent means resource-hours only", () => {
    expect(parse(undefined)).toEqual({ prices: undefined, problems: [] });
  });

  it("reads per-unit prices, GPU prices by device name and disk prices by StorageClass", () => {
    const { prices, problems } = parse({
      currency: "EUR",
      cpuCoreHour: 0.03,
      memoryGiBHour: 0.004,
      gpuHour: { "nvidia.com/A100-PCIE-40GB": 2.5, default: 1 },
      diskGiBMonth: { "ceph-rbd": 0.1 },
    });
    expect(problems).toEqual([]);
    expect(prices).toEqual({
      currency: "EUR",
      cpuCoreHour: 0.03,
      memoryGiBHour: 0.004,
      gpuHour: { "nvidia.com/A100-PCIE-40GB": 2.5, default: 1 },
      diskGiBMonth: { "ceph-rbd": 0.1 },
    });
  });

  it("takes one number as the price of every GPU or StorageClass", () => {
    expect(parse({ gpuHour: 2, diskGiBMonth: 0.05 }).prices).toMatchObject({
      gpuHour: { default: 2 },
      diskGiBMonth: { default: 0.05 },
    });
  });

  it("refuses negative and absurd prices, and says why a huge one is taken for a typo", () => {
    const { problems } = parse({ cpuCoreHour: -1, memoryGiBHour: "cheap", gpuHour: { "nvidia.com/T4": 25_000 } });
    expect(problems).toEqual([
      "prices.cpuCoreHour must be a number from 0 to 100, not -1",
      'prices.memoryGiBHour must be a number from 0 to 100, not "cheap"',
      'prices.gpuHour["nvidia.com/T4"] must be a number from 0 to 1000, not 25000 (more than 1000 a unit is taken for a typo: a monthly price where an hourly one belongs, or cents)',
    ]);
  });

  it("names an unknown key with the one it was probably meant to be", () => {
    expect(parse({ cpuCoreHours: 0.03 }).problems).toEqual([
      'prices: unknown key "cpuCoreHours"; did you mean "cpuCoreHour"?',
    ]);
  });

  it("refuses a currency that would be markup, and a section that is not a mapping", () => {
    expect(parse({ currency: "<b>" }).problems).toHaveLength(1);
    expect(parse(3).problems).toEqual([
      "prices must be a mapping (currency, cpuCoreHour, memoryGiBHour, gpuHour, diskGiBMonth)",
    ]);
  });
});

const prices: Prices = {
  currency: "EUR",
  cpuCoreHour: 0.05,
  memoryGiBHour: 0.01,
  gpuHour: { "nvidia.com/A100": 2, default: 1 },
  diskGiBMonth: {},
};

function holding(name: string, kinds: Partial<VmHolding["kinds"]>, extra: Partial<VmHolding> = {}): VmHolding {
  return {
    namespace: "team-a",
    name,
    owner: "alice",
    profile: "gpu",
    capacity: { cpuCores: 8, memoryBytes: 64 * GiB, gpus: 1 },
    gpuDevices: [{ deviceName: "nvidia.com/A100", count: 1 }],
    kinds: { held: false, inUse: false, givenBack: false, wouldGiveBack: false, ...kinds },
    ...extra,
  };
}

describe("the spend ledger", () => {
  it("prices an hour of a VM from its cores, memory and GPUs by device", () => {
    // 8 × 0.05 + 64 × 0.01 + 1 × 2 = 3.04
    expect(hourlyCost(holding("a", {}), prices)).toBeCloseTo(3.04, 10);
    expect(
      hourlyCost(holding("a", {}, { gpuDevices: [{ deviceName: "nvidia.com/T4", count: 2 }] }), prices),
    ).toBeCloseTo(3.04, 10);
    expect(hourlyCost(holding("a", {}), undefined)).toBe(0);
    // GPUs the spec counts without naming a device are priced at the default.
    expect(hourlyCost(holding("a", {}, { gpuDevices: [] }), prices)).toBeCloseTo(2.04, 10);
  });

  it("counts each stretch under the kinds of the sample that began it, per owner and profile", () => {
    const ledger = new SpendLedger({ prices, maxGapMs: 2 * H });
    const t0 = 1_000 * H;
    ledger.sample([holding("a", { held: true, inUse: true })], t0);
    ledger.sample([holding("a", { held: true, wouldGiveBack: true })], t0 + H); // 1 h held, in use
    ledger.sample([holding("a", { givenBack: true })], t0 + 2 * H); // 1 h held, would give back
    ledger.sample([holding("a", { givenBack: true })], t0 + 3 * H); // 1 h given back
    const [row] = ledger.rows();
    expect(row).toMatchObject({ namespace: "team-a", owner: "alice", profile: "gpu", vms: 1 });
    expect(row!.spend.held).toMatchObject({ vm: 7200, cpuCore: 8 * 7200, memoryGiB: 64 * 7200, gpu: 7200 });
    expect(row!.spend.held.money).toBeCloseTo(6.08, 10);
    expect(row!.spend.inUse.vm).toBe(3600);
    expect(row!.spend.wouldGiveBack.vm).toBe(3600);
    expect(row!.spend.givenBack.money).toBeCloseTo(3.04, 10);
    expect(ledger.vm("team-a", "a")!.held.vm).toBe(7200);
  });

  it("never counts more than maxGapMs for one sample: time nobody watched is not money spent", () => {
    const ledger = new SpendLedger({ maxGapMs: 60_000 });
    ledger.sample([holding("a", { held: true })], 0);
    ledger.sample([holding("a", { held: true })], 10 * H);
    expect(ledger.rows()[0]!.spend.held.vm).toBe(60);
    expect(ledger.rows()[0]!.spend.held.money).toBe(0);
  });

  it("keeps what a VM spent in its group after the VM is gone or changes owner: counters never go down", () => {
    const ledger = new SpendLedger({ maxGapMs: 2 * H });
    ledger.sample([holding("a", { held: true }), holding("b", { held: true })], 0);
    ledger.sample([holding("a", { held: true }), holding("b", { held: true }, { owner: "bob" })], H);
    ledger.sample([holding("b", { held: true }, { owner: "bob" })], 2 * H);
    const rows = ledger.rows();
    expect(rows.map((r) => [r.owner, r.vms, r.spend.held.vm])).toEqual([
      ["alice", 0, 3 * 3600],
      ["bob", 1, 3600],
    ]);
    // The VM page's group: the same sums, for one namespace, owner and profile.
    expect(ledger.group("team-a", "bob", "gpu")).toEqual(rows[1]);
    expect(ledger.group("team-a", "alice", "gpu")).toEqual(rows[0]);
    expect(ledger.group("team-a", "carol", "gpu").vms).toBe(0);
  });
});

describe("the kinds a VM counts under", () => {
  const base = { running: true, connected: true, state: "Active", stoppedByWs: false, wouldHaveStopped: false };
  it("holds a running VM, and counts it in use only while the engine says Active", () => {
    expect(spendKinds(base)).toEqual({ held: true, inUse: true, givenBack: false, wouldGiveBack: false });
    expect(spendKinds({ ...base, state: "StoppingPending", wouldHaveStopped: true })).toEqual({
      held: true,
      inUse: false,
      givenBack: false,
      wouldGiveBack: true,
    });
  });
  it("counts a VM ws stopped as given back, and one stopped by someone else as nothing", () => {
    expect(spendKinds({ ...base, running: false, state: "Stopped", stoppedByWs: true }).givenBack).toBe(true);
    expect(Object.values(spendKinds({ ...base, running: false, state: "Stopped" }))).toEqual([
      false,
      false,
      false,
      false,
    ]);
  });
  it("takes a connected agent for a running VM where the platform cannot tell (standalone)", () => {
    expect(spendKinds({ ...base, running: undefined }).held).toBe(true);
    expect(spendKinds({ ...base, running: undefined, connected: false }).held).toBe(false);
  });
});

describe("right-sizing", () => {
  it("reads a quantile as the upper edge of its bucket", () => {
    expect(histogramQuantile([0, 0, 0], 0.95)).toBeUndefined();
    expect(histogramQuantile([95, 4, 1, 0], 0.95)).toBe(0.25);
    expect(histogramQuantile([90, 4, 6, 0], 0.95)).toBe(0.75);
  });

  it("hints where a week's p95 is under a quarter of what the VM holds, and only then", () => {
    const window = new UsageWindow();
    const day = 86_400_000;
    for (let d = 0; d < 7; d++)
      for (let i = 0; i < 100; i++)
        window.add({ cpu: i < 97 ? 0.08 : 0.9, memory: 0.6, gpu: 0.02 }, d * day + i * 1000);
    window.add({}, 6.5 * day);
    const { p95, days } = window.p95(6.5 * day);
    expect(days).toBe(6.5);
    expect(p95).toEqual({ cpu: 0.1, memory: 0.65, gpu: 0.05 });
    expect(rightSizingHint(p95, days, { cpuCores: 16, memoryBytes: 64 * GiB, gpus: 1 })).toBe(
      "uses under 25% of its CPU (p95 10% of 16 cores: about 4 would do), GPU (p95 5% utilisation of 1) over 6.5 day(s): a smaller size would do",
    );
    expect(rightSizingHint({ cpu: 0.5, memory: 0.5 }, 7, { cpuCores: 4, memoryBytes: GiB, gpus: 0 })).toBeNull();
    expect(rightSizingHint({ cpu: 0.05 }, 0, { cpuCores: 4, memoryBytes: GiB, gpus: 0 })).toBeNull();
  });

  it("forgets days older than a week", () => {
    const window = new UsageWindow();
    const day = 86_400_000;
    window.add({ cpu: 0.9 }, 0);
    window.add({ cpu: 0.1 }, 8 * day);
    window.add({}, 8.5 * day);
    expect(window.p95(9 * day)).toEqual({ p95: { cpu: 0.15 }, days: 0.5 });
  });

  it("gives no hint on minutes of readings: the rule needs a day of them", () => {
    // The e2e's fleet page showed "over 1 day(s)" after seconds of readings before this was fixed.
    const window = new UsageWindow();
    for (let i = 0; i < 20; i++) window.add({ cpu: 0.01 }, 1_000 * H + i * 30_000);
    const { p95, days } = window.p95(1_000 * H + 10 * 60_000);
    expect(days).toBe(0);
    expect(rightSizingHint(p95, days, { cpuCores: 8, memoryBytes: null, gpus: 0 })).toBeNull();
    window.add({ cpu: 0.01 }, 1_025 * H);
    expect(window.p95(1_025 * H).days).toBe(1);
  });
});
