import v8 from "node:v8";
import { create, toBinary, fromBinary } from "@bufbuild/protobuf";
import { startFleet } from "/work/clones/issue-27/packages/collector/test/vm/fleet-harness.js";
import { reportFor, TYPICAL_VM } from "/work/clones/issue-27/bench/lib/reports.js";
import { createMetrics } from "/work/clones/issue-27/packages/collector/src/metrics.js";
import { CollectorStats } from "/work/clones/issue-27/packages/collector/src/stats.js";
import { BUILTIN_DEFAULT_POLICY } from "/work/clones/issue-27/packages/collector/src/engine/policy.js";
import { ReportSchema } from "@ws/protocol";
import { summarizeHeapSnapshot } from "/work/clones/issue-27/bench/lib/heap-summary.js";
const N = Number(process.argv[2] ?? 2000);
const gc = (globalThis as any).gc as () => void;
const heap = () => {
  gc();
  gc();
  return v8.getHeapStatistics().used_heap_size;
};
const p = { ...BUILTIN_DEFAULT_POLICY, autostop: true, mode: "observe", idleTimeoutSeconds: 7200 } as any;
const f = startFleet(p, Date.now());
const reg = createMetrics(
  f.fleet,
  new CollectorStats(),
  () => f.clock.nowMs,
  () => 1,
  { processMetrics: false },
);
const templates = Array.from({ length: 16 }, (_, i) => toBinary(ReportSchema, reportFor(TYPICAL_VM, 100 + i)));
await reg.metrics();
const h0 = heap();
const sessions = [];
for (let i = 0; i < N; i++) sessions.push(f.connect({ namespace: "bench", name: `vm-${String(i).padStart(5, "0")}` }));
const h1 = heap();
let seq = 0n;
const t0 = performance.now();
for (let round = 0; round < 3; round++) {
  await f.clock.advanceTo(f.clock.nowMs + 15_000);
  for (let i = 0; i < N; i++) {
    const r = fromBinary(ReportSchema, templates[(i + round) % 16]!);
    r.sequence = ++seq;
    f.report(sessions[i]!, r);
  }
}
const perReport = (performance.now() - t0) / (3 * N);
const h2 = heap();
const t1 = performance.now();
const text = await reg.metrics();
const scrape = performance.now() - t1;
const h3 = heap();
console.log(
  `N=${N} session ${((h1 - h0) / N) | 0} B/VM, reports+state ${((h2 - h1) / N) | 0} B/VM, metrics cache ${((h3 - h2) / N) | 0} B/VM; per report ${perReport.toFixed(3)} ms (decode+fleet), scrape ${scrape.toFixed(0)} ms ${text.length} B`,
);
if (process.argv[3]) {
  const file = v8.writeHeapSnapshot("/tmp/t27/h.heapsnapshot");
  const s = summarizeHeapSnapshot(file);
  for (const r of s.rows.slice(0, 25))
    console.log(r.kind.padEnd(50), String(r.count).padStart(8), (r.bytes / N).toFixed(0).padStart(8), "B/VM");
}
// composition: drop parts and measure
const loops = sessions.map((s) => f.fleet.loopState(s.vm) as any);
const hA = heap();

for (const l of loops) {
  l.evidence = undefined;
}
const hB = heap();
for (const l of loops) {
  l.latest = undefined;
}
const hC = heap();
for (const l of loops) {
  l.lastDecision = undefined;
}
const hD = heap();
console.log(
  `kept evidence ${((hA - hB) / N) | 0} B/VM, latest report ${((hB - hC) / N) | 0} B/VM, last decision ${((hC - hD) / N) | 0} B/VM, rest ${((hD - h1) / N) | 0} B/VM`,
);
