// Reading figures back from a Prometheus text exposition. Pure.

/** The value of the first sample named `name` whose labels include `labels`. */
export function sampleValue(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of text.split("\n")) {
    if (!line.startsWith(name)) continue;
    const rest = line.slice(name.length);
    if (rest[0] !== " " && rest[0] !== "{") continue;
    const labelText = rest[0] === "{" ? rest.slice(1, rest.indexOf("}")) : "";
    if (!Object.entries(labels).every(([key, value]) => labelText.includes(`${key}="${value}"`))) continue;
    const value = Number(
      rest
        .slice(rest[0] === "{" ? rest.indexOf("}") + 1 : 0)
        .trim()
        .split(/\s+/)[0],
    );
    if (Number.isFinite(value)) return value;
  }
  return undefined;
}

export interface Bucket {
  le: number;
  /** Cumulative count of observations ≤ le. */
  count: number;
}

/** The cumulative buckets of histogram `name` (no labels besides le). */
export function histogramBuckets(text: string, name: string): Bucket[] {
  const buckets: Bucket[] = [];
  const pattern = new RegExp(`^${name}_bucket\\{(?:[^}]*,)?le="([^"]+)"[^}]*\\}\\s+(\\S+)`);
  for (const line of text.split("\n")) {
    const match = pattern.exec(line);
    if (match) buckets.push({ le: match[1] === "+Inf" ? Infinity : Number(match[1]), count: Number(match[2]) });
  }
  return buckets.sort((a, b) => a.le - b.le);
}

/** Observations between two scrapes of the same histogram. */
export function bucketDelta(before: readonly Bucket[], after: readonly Bucket[]): Bucket[] {
  return after.map((bucket) => ({
    le: bucket.le,
    count: bucket.count - (before.find((b) => b.le === bucket.le)?.count ?? 0),
  }));
}

/**
 * histogram_quantile as Prometheus computes it: linear within the bucket the rank falls in.
 * The result is an estimate bounded by the bucket edges, never finer.
 */
export function histogramQuantile(buckets: readonly Bucket[], q: number): number | undefined {
  const total = buckets[buckets.length - 1]?.count ?? 0;
  if (total <= 0) return undefined;
  const rank = q * total;
  let lowerEdge = 0;
  let lowerCount = 0;
  for (const bucket of buckets) {
    if (bucket.count >= rank) {
      if (!Number.isFinite(bucket.le)) return lowerEdge;
      const inBucket = bucket.count - lowerCount;
      return inBucket <= 0 ? bucket.le : lowerEdge + ((bucket.le - lowerEdge) * (rank - lowerCount)) / inBucket;
    }
    lowerEdge = bucket.le;
    lowerCount = bucket.count;
  }
  return lowerEdge;
}
