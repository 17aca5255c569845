// What host-side evidence costs the collector per round, in CPU time (process.cpuUsage: the
// machine may be shared): parsing Prometheus' answers (the JSON of the biggest query), folding
// the eight answers into per-VM readings, and Fleet.hostBatch deciding every VM on its reading,
// for fleets of 1000 and 10000 VMs (their agents gone, the host quiet: the rule's full path).
// Prints a markdown table.
import { BUILTIN_DEFAULT_POLICY } from "../packages/collector/src/engine/policy.js";
import { Fleet } from "../packages/collector/src/loop/fleet.js";
import { parseVector, type VectorSample } from "../packages/collector/src/loop/hostside/prometheus.js";
import { type HostAnswers, readingsFromAnswers } from "../packages/collector/src/loop/hostside/queries.js";
import { staticPolicySource } from "../packages/collector/src/model/policy-source.js";

const NOW = Date.parse("2026-12-01T10:00:00Z");

function cpuMs(run: () => void): number {
  const start = process.cpuUsage();
  run();
  const used = process.cpuUsage(start);
  return (used.user + used.system) / 1000;
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

function answersFor(count: number): { answers: HostAnswers; vcpuJson: string } {
  const vms = Array.from({ length: count }, (_, i) => ({ namespace: `ns-${i % 50}`, name: `vm-${i}` }));
  const vector = (value: (i: number) => number, vmi = false): VectorSample[] =>
    vms.map((vm, i) => ({
      metric: { namespace: vm.namespace, [vmi ? "vmi" : "name"]: vm.name },
      value: value(i),
    }));
  const answers: HostAnswers = {
    vcpuSeconds: vector(() => 0.006),
    vcpus: vector(() => 2),
    network: vector(() => 2100),
    disk: vector(() => 0),
    vnc: vector(() => 1, true).slice(0, Math.ceil(count / 100)),
    console: [],
    portForward: [],
    connectionsWitness: [{ metric: {}, value: 2 }],
  };
  // What Prometheus sends for the vCPU query (labels as `sum by (namespace, name)` leaves them).
  const vcpuJson = JSON.stringify({
    status: "success",
    data: {
      resultType: "vector",
      result: answers.vcpuSeconds.map((s) => ({ metric: s.metric, value: [NOW / 1000, String(s.value)] })),
    },
  });
  return { answers, vcpuJson };
}

const policy = { ...BUILTIN_DEFAULT_POLICY, autostopEnabled: true, agentLostMaxSeconds: 3600 };
const rows: string[] = [];
for (const count of [1000, 10_000]) {
  const { answers, vcpuJson } = answersFor(count);
  const parse = median(Array.from({ length: 9 }, () => cpuMs(() => parseVector(200, vcpuJson))));
  const fold = median(Array.from({ length: 9 }, () => cpuMs(() => readingsFromAnswers(answers, NOW, 120))));
  let now = NOW;
  const fleet = new Fleet({
    log: () => {},
    nowMs: () => now,
    authenticate: () => ({ ok: true }),
    policySource: staticPolicySource(policy, {}, "workstation.aik8s.run/", {}),
    actuator: { stop: async () => ({ outcome: "accepted", message: "" }), event: () => {}, persist: () => {} },
    vmRunning: () => true,
  });
  for (let i = 0; i < count; i++) fleet.track({ namespace: `ns-${i % 50}`, name: `vm-${i}` });
  const rounds: number[] = [];
  for (let round = 0; round < 9; round++) {
    now += 60_000;
    const batch = readingsFromAnswers(answers, now, 120);
    rounds.push(cpuMs(() => fleet.hostBatch(batch)));
  }
  fleet.stopTicking();
  rows.push(
    `| ${count} | ${(vcpuJson.length / 1024).toFixed(0)} KiB | ${parse.toFixed(1)} ms | ${fold.toFixed(1)} ms | ${median(rounds).toFixed(1)} ms (${((median(rounds) * 1000) / count).toFixed(1)} µs/VM) |`,
  );
}
console.log(
  "| VMs | one answer (vCPU query) | parse one answer | fold 8 answers into readings | Fleet.hostBatch (decide every VM) |",
);
console.log("|---|---|---|---|---|");
for (const row of rows) console.log(row);
