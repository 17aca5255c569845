import { create, toBinary, fromBinary } from "@bufbuild/protobuf";
import { AgentMessageSchema, MAX_MESSAGE_BYTES } from "@ws/protocol";
import { startFleet } from "/work/clones/issue-27/packages/collector/test/vm/fleet-harness.js";
import { hostileReport, reportFor, TYPICAL_VM } from "/work/clones/issue-27/bench/lib/reports.js";
import {
  MAX_STRING,
  REPORT_LIMITS,
  validateReport,
} from "/work/clones/issue-27/packages/collector/src/agents/validate.js";
import { BUILTIN_DEFAULT_POLICY } from "/work/clones/issue-27/packages/collector/src/engine/policy.js";
import { createMetrics } from "/work/clones/issue-27/packages/collector/src/metrics.js";
import { CollectorStats } from "/work/clones/issue-27/packages/collector/src/stats.js";
const cap = Number(process.argv[2] ?? MAX_MESSAGE_BYTES);
const p = { ...BUILTIN_DEFAULT_POLICY, autostopEnabled: true, mode: "observe" } as any;
const f = startFleet(p, Date.now());
const reg = createMetrics(
  f.fleet,
  new CollectorStats(),
  () => f.clock.nowMs,
  () => 1,
  { processMetrics: false },
);
const h = hostileReport("largest-allowed", REPORT_LIMITS, MAX_STRING, cap);
const bytes = toBinary(AgentMessageSchema, create(AgentMessageSchema, { payload: { case: "report", value: h } }));
const typical = toBinary(
  AgentMessageSchema,
  create(AgentMessageSchema, { payload: { case: "report", value: reportFor(TYPICAL_VM, 1) } }),
);
const s = f.connect({ namespace: "b", name: "h" });
for (const [label, b] of [
  ["hostile", bytes],
  ["typical", typical],
] as const) {
  const t = { decode: 0, validate: 0, fleet: 0, metrics: 0 };
  const n = label === "hostile" ? 20 : 2000;
  for (let i = 0; i < n; i++) {
    let a = performance.now();
    const m = fromBinary(AgentMessageSchema, b);
    t.decode += performance.now() - a;
    a = performance.now();
    const r = m.payload.value as any;
    validateReport(r);
    t.validate += performance.now() - a;
    a = performance.now();
    r.sequence = BigInt(i + 1);
    f.report(s, r);
    t.fleet += performance.now() - a;
    a = performance.now();
    if (i % 5 === 0) await reg.metrics();
    t.metrics += performance.now() - a;
  }
  console.log(
    label,
    `${b.length} B:`,
    Object.entries(t)
      .map(([k, v]) => `${k} ${(v / n).toFixed(3)} ms`)
      .join(", "),
  );
}
