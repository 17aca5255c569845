// Configured capacity beside actual usage (docs/cost.md, "Right-sizing"): per VM, the 95th
// percentile of the agent's CPU busy share, memory in use and GPU utilisation over the last 7 days
// this process watched, and a plain hint where the VM holds far more than it uses. Fixed memory per
// VM: one histogram of 5 %-wide buckets per resource and day, 7 days kept. Pure: times are passed in.

export const USAGE_RESOURCES = ["cpu", "memory", "gpu"] as const;
export type UsageResource = (typeof USAGE_RESOURCES)[number];

const BUCKETS = 20;
const DAY_MS = 86_400_000;
export const USAGE_DAYS = 7;
/** The right-sizing rule: p95 under this share of what the VM holds, over readings that cover at least MIN_HINT_DAYS. */
export const RIGHT_SIZE_UNDER = 0.25;
export const MIN_HINT_DAYS = 1;

export type UsageSample = Partial<Record<UsageResource, number>>;

/** The upper edge of the bucket where `quantile` of the samples lie at or below; undefined without samples. */
export function histogramQuantile(counts: ArrayLike<number>, quantile: number): number | undefined {
  let total = 0;
  for (let i = 0; i < counts.length; i++) total += counts[i]!;
  if (total === 0) return undefined;
  let seen = 0;
  for (let i = 0; i < counts.length; i++) {
    seen += counts[i]!;
    if (seen >= quantile * total) return (i + 1) / counts.length;
  }
  return 1;
}

const bucketOf = (ratio: number) => Math.min(BUCKETS - 1, Math.max(0, Math.floor(ratio * BUCKETS)));

export class UsageWindow {
  /** [day slot][resource][bucket] flattened; `days[slot]` says which day the slot holds. */
  // 16 bits a bucket: a day holds at most 2,880 readings at the 30 s tick (FleetSpend adds them on its timer only).
  private readonly counts = new Uint16Array(USAGE_DAYS * USAGE_RESOURCES.length * BUCKETS);
  private readonly days = new Float64Array(USAGE_DAYS).fill(-1);
  /** Each slot's first reading: how long the readings cover (a hint needs a day of them, not a day's date). */
  private readonly firstAtMs = new Float64Array(USAGE_DAYS);
  private lastAtMs = 0;

  add(sample: UsageSample, atMs: number): void {
    this.lastAtMs = Math.max(this.lastAtMs, atMs);
    const day = Math.floor(atMs / DAY_MS);
    const slot = day % USAGE_DAYS;
    if (this.days[slot] !== day) {
      this.counts.fill(0, slot * USAGE_RESOURCES.length * BUCKETS, (slot + 1) * USAGE_RESOURCES.length * BUCKETS);
      this.days[slot] = day;
      this.firstAtMs[slot] = atMs;
    }
    USAGE_RESOURCES.forEach((resource, r) => {
      const value = sample[resource];
      if (value === undefined || !Number.isFinite(value)) return;
      const index = (slot * USAGE_RESOURCES.length + r) * BUCKETS + bucketOf(value);
      if (this.counts[index]! < 0xffff) this.counts[index]!++;
    });
  }

  /**
   * The p95 of each resource over the days of the last week that hold readings, and how many days
   * the readings cover (first to last reading within the week; to a tenth of a day).
   */
  p95(nowMs: number): { p95: Partial<Record<UsageResource, number>>; days: number } {
    const today = Math.floor(nowMs / DAY_MS);
    const p95: Partial<Record<UsageResource, number>> = {};
    const live = [...this.days.keys()].filter((s) => this.days[s]! > today - USAGE_DAYS && this.days[s]! <= today);
    const coveredMs =
      live.length === 0 ? 0 : Math.min(nowMs, this.lastAtMs) - Math.min(...live.map((s) => this.firstAtMs[s]!));
    const days = Math.floor(Math.max(0, Math.min(coveredMs, USAGE_DAYS * DAY_MS)) / (DAY_MS / 10)) / 10;
    USAGE_RESOURCES.forEach((resource, r) => {
      const merged = new Uint32Array(BUCKETS);
      for (const slot of live)
        for (let b = 0; b < BUCKETS; b++) merged[b]! += this.counts[(slot * USAGE_RESOURCES.length + r) * BUCKETS + b]!;
      const q = histogramQuantile(merged, 0.95);
      if (q !== undefined) p95[resource] = q;
    });
    return { p95, days };
  }
}

/** The plain right-sizing hint (null: none): which held resources a VM's p95 uses under a quarter of. */
export function rightSizingHint(
  p95: Partial<Record<UsageResource, number>>,
  days: number,
  held: { cpuCores: number | null; memoryBytes: number | null; gpus: number },
): string | null {
  if (days < MIN_HINT_DAYS) return null;
  const under: string[] = [];
  const pct = (ratio: number) => `${Math.round(ratio * 100)}%`;
  if (held.cpuCores && p95.cpu !== undefined && p95.cpu < RIGHT_SIZE_UNDER)
    under.push(
      `CPU (p95 ${pct(p95.cpu)} of ${held.cpuCores} cores: about ${Math.max(1, Math.ceil(held.cpuCores * p95.cpu * 2))} would do)`,
    );
  if (held.memoryBytes && p95.memory !== undefined && p95.memory < RIGHT_SIZE_UNDER)
    under.push(`memory (p95 ${pct(p95.memory)} of ${Math.round(held.memoryBytes / 2 ** 30)} GiB)`);
  if (held.gpus > 0 && p95.gpu !== undefined && p95.gpu < RIGHT_SIZE_UNDER)
    under.push(`GPU (p95 ${pct(p95.gpu)} utilisation of ${held.gpus})`);
  if (under.length === 0) return null;
  return `uses under ${pct(RIGHT_SIZE_UNDER)} of its ${under.join(", ")} over ${days} day(s): a smaller size would do`;
}
