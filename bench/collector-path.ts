// The collector's per-Report path and per-VM heap, in process (no gRPC, no other process): what
// one Report costs step by step (decode, validation, the VM's loop: evidence, decide, Directive,
// the Directive's encoding, and the /metrics cache), for the typical Report of benchmark 2 and for the largest Report the
// collector accepts; and the live heap each VM holds, part by part (its session, the latest
// Report, the kept evidence, the last decision, the rest of its state, its cached series).
// Benchmark 2 measures the same collector end to end; this says where its time and memory go.
//
//   node bench/run.mjs collector-path [--vms 2000] [--reports 3]
import v8 from "node:v8";
import { create, toBinary } from "@bufbuild/protobuf";
import {
  type AgentMessage,
  AgentMessageSchema,
  AgentService,
  CollectorMessageSchema,
  MAX_AGENT_MESSAGE_BYTES,
  type Report,
} from "@ws/protocol";
import { serverDefinition } from "@ws/protocol/grpc";
import { MAX_STRING, REPORT_LIMITS, validateReport } from "../packages/collector/src/agents/validate.js";
import { BUILTIN_DEFAULT_POLICY } from "../packages/collector/src/engine/policy.js";
import { createMetrics, warmPerVmSeries } from "../packages/collector/src/metrics/metrics.js";
import { CollectorStats } from "../packages/collector/src/lib/stats.js";
import { rememberWire } from "../packages/collector/src/model/compact-report.js";
import type { VmLoopState } from "../packages/collector/src/loop/step.js";
import { startFleet } from "../packages/collector/test/loop/fleet-harness.js";
import { benchArgs, integers } from "./lib/args.js";
import { hostileReport, reportFor, TYPICAL_VM } from "./lib/reports.js";
import { bytes, fmt, markdownTable } from "./lib/table.js";

const USAGE = "usage: node bench/run.mjs collector-path [--vms 2000] [--reports 3]";
const args = benchArgs(process.argv.slice(2), ["vms", "reports"], USAGE);
const vmCount = integers(args.vms, [2000], "vms")[0]!;
const rounds = integers(args.reports, [3], "reports")[0]!;
const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error("run through bench/run.mjs (node --expose-gc)");

const liveHeap = () => {
  gc();
  gc();
  return v8.getHeapStatistics().used_heap_size;
};
const policy = { ...BUILTIN_DEFAULT_POLICY, autostopEnabled: true, mode: "observe" as const };
const wire = (report: Report) =>
  Buffer.from(toBinary(AgentMessageSchema, create(AgentMessageSchema, { payload: { case: "report", value: report } })));
/** The agent stream's own codecs, as grpc-js calls them in the collector (agents/server.ts). */
const agentStream = serverDefinition(AgentService).connect!;
const decode = (bytes: Buffer) => agentStream.requestDeserialize(bytes) as AgentMessage;

/** Milliseconds per Report in each step, for `count` Reports of one kind through one fleet. */
async function pathCost(bytesOf: (i: number) => Buffer, count: number, vms: number) {
  const harness = startFleet(policy, Date.now());
  const registry = createMetrics(
    harness.fleet,
    new CollectorStats(),
    () => harness.clock.nowMs,
    () => vms,
    { processMetrics: false },
  );
  const sessions = Array.from({ length: vms }, (_, i) => harness.connect({ namespace: "bench", name: `vm-${i}` }));
  const spent = { decode: 0, validate: 0, loop: 0, encode: 0, metrics: 0 };
  for (let i = 0; i < count; i++) {
    const bytesIn = bytesOf(i);
    let at = performance.now();
    const message = decode(bytesIn);
    spent.decode += performance.now() - at;
    at = performance.now();
    const report = message.payload.value as Report;
    const cuts = validateReport(report);
    spent.validate += performance.now() - at;
    if (cuts.length === 0) rememberWire(report, bytesIn);
    report.sequence = BigInt(i + 1);
    at = performance.now();
    const session = sessions[i % vms]!;
    harness.report(session, report);
    spent.loop += performance.now() - at;
    // The Directive answering it, as the stream writes it (agents/server.ts: send).
    at = performance.now();
    const directive = session.directives.pop()!;
    agentStream.responseSerialize(create(CollectorMessageSchema, { payload: { case: "directive", value: directive } }));
    spent.encode += performance.now() - at;
    // /metrics rebuilds a changed VM's lines once per scrape: one rebuild per Report at 15 s.
    at = performance.now();
    if ((i + 1) % vms === 0) await registry.metrics();
    spent.metrics += performance.now() - at;
  }
  return Object.fromEntries(Object.entries(spent).map(([step, msTotal]) => [step, msTotal / count])) as typeof spent;
}

let scrapeFigures: { ms: number; bytes: number; series: number; max: number } | undefined;
let warmedScrapeMs: number | undefined;

async function heapPerVm() {
  const templates = Array.from({ length: 16 }, (_, i) => wire(reportFor(TYPICAL_VM, 100 + i)));
  const harness = startFleet(policy, Date.now());
  const registry = createMetrics(
    harness.fleet,
    new CollectorStats(),
    () => harness.clock.nowMs,
    () => vmCount,
    { processMetrics: false },
  );
  await registry.metrics();
  const empty = liveHeap();
  const sessions = Array.from({ length: vmCount }, (_, i) =>
    harness.connect({ namespace: "bench", name: `vm-${String(i).padStart(5, "0")}` }),
  );
  const connected = liveHeap();
  let sequence = 0n;
  for (let round = 0; round < rounds; round++) {
    await harness.clock.advanceTo(harness.clock.nowMs + 15_000);
    for (let i = 0; i < vmCount; i++) {
      const bytesIn = templates[(i + round) % templates.length]!;
      const report = decode(bytesIn).payload.value as Report;
      validateReport(report);
      rememberWire(report, bytesIn);
      report.sequence = ++sequence;
      harness.report(sessions[i]!, report);
    }
  }
  const reported = liveHeap();
  // Scrapes as Prometheus sees them at 15 s: every VM reported since the last one, so every VM's
  // lines are rebuilt (the worst case; a quiet VM's are reused).
  const scrapes: Array<{ ms: number; bytes: number; series: number }> = [];
  for (let round = 0; round < 3; round++) {
    await harness.clock.advanceTo(harness.clock.nowMs + 15_000);
    for (let i = 0; i < vmCount; i++) {
      const bytesIn = templates[(i + round + rounds) % templates.length]!;
      const report = decode(bytesIn).payload.value as Report;
      rememberWire(report, bytesIn);
      report.sequence = ++sequence;
      harness.report(sessions[i]!, report);
    }
    const began = performance.now();
    const text = await registry.metrics();
    scrapes.push({
      ms: performance.now() - began,
      bytes: Buffer.byteLength(text),
      series: text.split("\n").filter((line) => line.includes('name="vm-')).length,
    });
  }
  scrapes.sort((a, b) => a.ms - b.ms);
  scrapeFigures = { ...scrapes[1]!, max: scrapes[2]!.ms };
  // The same scrape when every VM's text was built before it (between scrapes, as the collector
  // warms it): what is left is joining cached text and the idle clocks.
  const warmed: number[] = [];
  for (let round = 0; round < 3; round++) {
    await harness.clock.advanceTo(harness.clock.nowMs + 15_000);
    for (let i = 0; i < vmCount; i++) {
      const bytesIn = templates[(i + round) % templates.length]!;
      const report = decode(bytesIn).payload.value as Report;
      rememberWire(report, bytesIn);
      report.sequence = ++sequence;
      harness.report(sessions[i]!, report);
    }
    while (warmPerVmSeries(registry, 1000) > 0) {
      // every changed VM, in slices
    }
    const began = performance.now();
    await registry.metrics();
    warmed.push(performance.now() - began);
  }
  warmed.sort((a, b) => a - b);
  warmedScrapeMs = warmed[1]!;
  // The same state as at `reported` (newer Reports of the same size), now with every VM's lines cached.
  const scraped = liveHeap();
  const loops = sessions.map((session) => harness.fleet.loopState(session.vm) as VmLoopState);
  for (const loop of loops) loop.evidence = undefined;
  const noEvidence = liveHeap();
  for (const loop of loops) loop.latest = undefined;
  const noReport = liveHeap();
  for (const loop of loops) loop.lastDecision = undefined;
  const noDecision = liveHeap();
  const per = (bytesTotal: number) => bytes(bytesTotal / vmCount);
  return [
    ["session (connected, no Report yet)", per(connected - empty)],
    ["latest Report (compact: wire bytes + summary)", per(noEvidence - noReport)],
    ["evidence kept from it", per(scraped - noEvidence)],
    ["last decision (explanation, readings)", per(noReport - noDecision)],
    ["record, loop and fleet entry (the rest)", per(noDecision - connected - (scraped - reported))],
    ["cached /metrics lines", per(scraped - reported)],
    ["all (live heap)", per(scraped - empty)],
  ];
}

async function main() {
  const typical = Array.from({ length: 16 }, (_, i) => wire(reportFor(TYPICAL_VM, 100 + i)));
  const largest = wire(hostileReport("largest-allowed", REPORT_LIMITS, MAX_STRING, MAX_AGENT_MESSAGE_BYTES));
  // Warm up the code paths first, as a running collector's are.
  await pathCost((i) => typical[i % 16]!, 2000, 200);
  const typicalCost = await pathCost((i) => typical[i % 16]!, 10_000, 1000);
  const largestCost = await pathCost(() => largest, 40, 10);
  const row = (label: string, size: number, cost: Awaited<ReturnType<typeof pathCost>>) => [
    label,
    bytes(size),
    `${fmt(cost.decode)} ms`,
    `${fmt(cost.validate)} ms`,
    `${fmt(cost.loop)} ms`,
    `${fmt(cost.encode)} ms`,
    `${fmt(cost.metrics)} ms`,
    `${fmt(cost.decode + cost.validate + cost.loop + cost.encode + cost.metrics)} ms`,
  ];
  const out = [
    "## The collector's per-Report path and per-VM heap (in process)",
    "",
    markdownTable(
      [
        "Report",
        "size",
        "decode",
        "validate",
        "VM loop (evidence, decide, Directive)",
        "Directive encoded",
        "/metrics lines",
        "all",
      ],
      [
        row("typical (benchmark 2)", typical[0]!.length, typicalCost),
        row("largest accepted (MAX_AGENT_MESSAGE_BYTES)", largest.length, largestCost),
      ],
    ),
    "",
    `Per VM, ${vmCount} VMs after ${rounds} Reports each (live V8 heap after a full GC):`,
    "",
    markdownTable(["part", "heap per VM"], await heapPerVm()),
    "",
  ];
  if (scrapeFigures)
    out.push(
      markdownTable(
        [
          "VMs",
          "/metrics (default series) p50 (max of 3), in process",
          "the same, every VM's text built before the scrape",
          "size",
          "per-VM series per VM",
        ],
        [
          [
            vmCount,
            `${fmt(scrapeFigures.ms)} ms (max ${fmt(scrapeFigures.max)})`,
            warmedScrapeMs === undefined ? "" : `${fmt(warmedScrapeMs)} ms`,
            bytes(scrapeFigures.bytes),
            fmt(scrapeFigures.series / vmCount),
          ],
        ],
      ),
      "",
      "Every VM reported since the previous scrape, so each VM's lines are rebuilt: the scrape's worst case.",
      "",
    );
  process.stdout.write(`${out.join("\n")}\n`);
}

main().catch((error) => {
  process.stderr.write(`${(error as Error).stack ?? String(error)}\n`);
  process.exitCode = 1;
});
