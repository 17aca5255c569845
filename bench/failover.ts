// Benchmark 5: failover, leader killed → first Report handled by the new leader.
//
//   node bench/run.mjs failover [--runs 3] [--vms 5] [--interval 2s]
//
// Two built collectors in Kubernetes mode against the fake API server (test/support/fake-kube,
// in this process) under the shipped RBAC, each with a Pod object named after it; the shipped
// agents' Service (selector with the leader label, packaging/kubernetes/service.yaml) modelled by
// test/support/fake-kube/service.ts, which routes new connections to the Ready, labelled pod;
// `--vms` bundled agents reading a frozen /proc connect through it. Lease timings are the
// collector's defaults, as shipped (leaseDuration 15 s, renewDeadline 10 s, retryPeriod 2 s).
//
// Each run kills the leader, either with SIGKILL (it dies holding the Lease and its label: the
// standby must wait the Lease out) or SIGTERM (a rollout or drain: it hands the Lease back and
// removes its label), and times from the signal:
//   leads      the standby's workstation_collector_leader is 1
//   labelled   its pod carries the leader label, and no other pod does
//   endpoint   the Service routes to it alone (it polls readiness and labels every 500 ms and
//              records when its endpoints change)
//   first      the first Report handled by the new leader (a VM's lastReportAtMs after the kill)
//   all        every VM's Report handled by the new leader
// Polled every 25 ms: each figure is up to 25 ms late.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { parseAllDocuments } from "yaml";
import { LEADER_LABEL } from "../packages/collector/src/platform/kube/leader-label.js";
import { generateKey, tokenFor } from "../packages/collector/src/links/agent-token.js";
import { resourceByKind, startFakeKube, type FakeKube } from "../test/support/fake-kube/index.js";
import { policyForServiceAccount } from "../test/support/fake-kube/rbac.js";
import { startFakeService, type FakeService } from "../test/support/fake-kube/service.js";
import { layFrozenMachine } from "../test/support/kube-agent.js";
import { benchArgs, seconds } from "./lib/args.js";
import { freePort } from "./lib/collector.js";
import { delay, launch, type Launched } from "./lib/launch.js";
import { describeMachine, machineLine } from "./lib/machine.js";
import { agentBundle, collectorBundle, repoRoot, requireBundles } from "./lib/paths.js";
import { summarize } from "./lib/stats.js";
import { fmt, markdownTable } from "./lib/table.js";

const USAGE = "usage: node bench/run.mjs failover [--runs 3] [--vms 5] [--interval 2s]";
const args = benchArgs(process.argv.slice(2), ["runs", "vms", "interval"], USAGE);
const runs = Number(args.runs ?? 3);
const vmCount = Number(args.vms ?? 5);
const intervalSeconds = seconds(args.interval, 2, "interval");
if (!Number.isInteger(runs) || runs < 1 || !Number.isInteger(vmCount) || vmCount < 1) {
  console.error(USAGE);
  process.exit(2);
}

const POD = resourceByKind("Pod");
const NS = "failover";
const COLLECTOR_NS = "ws-system";
const POLL_MS = 25;

type Manifest = Record<string, any>;
const manifests = (file: string): Manifest[] =>
  parseAllDocuments(readFileSync(path.join(repoRoot, "packaging/kubernetes", file), "utf8")).map(
    (doc) => doc.toJS() as Manifest,
  );
const RBAC = policyForServiceAccount(manifests("rbac.yaml"), { namespace: COLLECTOR_NS, name: "ws-collector" });
const POD_LABELS: Record<string, string> = manifests("deployment.yaml")[0]!.spec.template.metadata.labels;
const SELECTOR: Record<string, string> = manifests("service.yaml")[0]!.spec.selector;

interface Replica {
  name: string;
  proc: Launched;
  grpcPort: number;
  httpPort: number;
}

interface Timings {
  leads: number;
  labelled: number;
  endpoint: number;
  first: number;
  all: number;
}

async function text(url: string): Promise<string> {
  try {
    const response = await fetch(url, { signal: AbortSignal.timeout(1_000) });
    return await response.text();
  } catch {
    return "";
  }
}

async function startReplica(kube: FakeKube, dir: string, keyFile: string, name: string): Promise<Replica> {
  const grpcPort = await freePort();
  const httpPort = await freePort();
  kube.store.create(POD, {
    metadata: { name, namespace: COLLECTOR_NS, labels: { ...POD_LABELS } },
    spec: { containers: [{ name: "collector", image: "ws-collector" }] },
    status: { phase: "Running", podIP: "127.0.0.1" },
  });
  const config = path.join(dir, `${name}.yaml`);
  writeFileSync(
    config,
    [
      "mode: kubernetes",
      // Every simulated agent connects from 127.0.0.1: no per-source share to pace the failover's burst.
      `grpc: { listen: "127.0.0.1:${grpcPort}", maxPendingConnectionsPerSource: 1048576 }`,
      `http: { listen: "127.0.0.1:${httpPort}" }`,
      `tokenKeyFile: ${JSON.stringify(keyFile)}`,
      `reportInterval: ${intervalSeconds}s`,
      `kubernetes: { leaseNamespace: ${COLLECTOR_NS}, leaseName: ws-collector }`,
      "policy:",
      "  defaults: { autostop: enabled, mode: observe, idle-timeout: 2h }",
      "",
    ].join("\n"),
  );
  const proc = launch(
    process.execPath,
    [collectorBundle, "serve", "--kubeconfig", kube.kubeconfigPath, "--config", config],
    { env: { POD_NAME: name } },
  );
  await proc.waitFor(/collector serving/, 120_000);
  return { name, proc, grpcPort, httpPort };
}

function startAgent(dir: string, key: Buffer, name: string, grpcPort: number): Launched {
  const root = path.join(dir, `vm-${name}`);
  layFrozenMachine(root);
  return launch(
    process.execPath,
    [
      agentBundle,
      "run",
      "--config",
      path.join(root, "agent.yaml"),
      "--insecure",
      "--collector",
      `127.0.0.1:${grpcPort}`,
      "--namespace",
      NS,
      "--name",
      name,
      "--report-interval",
      `${intervalSeconds}s`,
      "--state-dir",
      path.join(root, "state"),
      "--socket",
      path.join(root, "agent.sock"),
      "--proc-root",
      path.join(root, "proc"),
      "--sys-root",
      path.join(root, "sys"),
      "--dev-root",
      path.join(root, "dev"),
      "--run-root",
      path.join(root, "run"),
      "--home-root",
      path.join(root, "home"),
      "--etc-root",
      path.join(root, "etc"),
    ],
    { env: { WS_AGENT_TOKEN: tokenFor(key, NS, name) } },
  );
}

async function oneRun(signal: "SIGKILL" | "SIGTERM"): Promise<Timings> {
  const dir = mkdtempSync(path.join(os.tmpdir(), "ws-bench-failover-"));
  const keyText = generateKey();
  const key = Buffer.from(keyText, "utf8");
  const keyFile = path.join(dir, "token.key");
  writeFileSync(keyFile, `${keyText}\n`, { mode: 0o600 });
  const kube = await startFakeKube({ rbac: RBAC });
  const procs: Launched[] = [];
  let service: FakeService | undefined;
  try {
    const names = Array.from({ length: vmCount }, (_, i) => `fo-${i}`);
    for (const name of names) kube.seedWorkstation({ namespace: NS, name, podIp: "127.0.0.1" });
    const first = await startReplica(kube, dir, keyFile, "replica-a");
    procs.push(first.proc);
    await first.proc.waitFor(/became the leader/, 60_000);
    const second = await startReplica(kube, dir, keyFile, "replica-b");
    procs.push(second.proc);
    service = await startFakeService(
      [first, second].map((r) => ({ port: r.grpcPort, readinessPort: r.httpPort, pod: r.name })),
      { selector: { store: kube.store, namespace: COLLECTOR_NS, labels: SELECTOR } },
    );
    for (const name of names) procs.push(startAgent(dir, key, name, service.port));
    const reportedAt = async (replica: Replica): Promise<Map<string, number>> => {
      const body = await text(`http://127.0.0.1:${replica.httpPort}/api/vms`);
      const vms = body
        ? ((JSON.parse(body) as { vms: Array<{ name: string; lastReportAtMs?: number }> }).vms ?? [])
        : [];
      return new Map(vms.filter((vm) => vm.lastReportAtMs !== undefined).map((vm) => [vm.name, vm.lastReportAtMs!]));
    };
    for (const deadline = Date.now() + 120_000; (await reportedAt(first)).size < vmCount; ) {
      if (Date.now() > deadline) throw new Error("the agents did not all report to the first leader");
      await delay(200);
    }
    // A few intervals of steady state, so every agent's reconnect backoff is reset.
    await delay(3 * intervalSeconds * 1000);

    const killedWallMs = Date.now();
    const t0 = performance.now();
    first.proc.child.kill(signal);
    const timings: Partial<Timings> = {};
    const since = () => (performance.now() - t0) / 1000;
    while (timings.all === undefined) {
      if (since() > 180)
        throw new Error(
          `no complete failover within 180 s: ${JSON.stringify(timings)}\n${second.proc.output().slice(-3000)}`,
        );
      if (
        timings.leads === undefined &&
        /^workstation_collector_leader 1$/m.test(await text(`http://127.0.0.1:${second.httpPort}/metrics`))
      )
        timings.leads = since();
      const labelled = kube.store
        .list(POD, COLLECTOR_NS)
        .filter((pod) => pod.metadata.labels?.[LEADER_LABEL] === "true")
        .map((pod) => pod.metadata.name);
      if (timings.labelled === undefined && labelled.length === 1 && labelled[0] === second.name)
        timings.labelled = since();
      const fresh = [...(await reportedAt(second)).values()].filter((at) => at > killedWallMs).length;
      if (timings.first === undefined && fresh > 0) timings.first = since();
      if (fresh === vmCount) timings.all = since();
      await delay(POLL_MS);
    }
    // The Service records when its endpoints changed: the first time after the kill it routed to the new leader alone.
    const switched = service
      .changes()
      .find((change) => change.atMs > t0 && change.ports.join() === String(second.grpcPort));
    timings.endpoint = switched ? (switched.atMs - t0) / 1000 : NaN;
    return timings as Timings;
  } finally {
    await Promise.all(procs.map((proc) => proc.stop("SIGTERM", 5_000).catch(() => null)));
    await service?.close();
    await kube.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

requireBundles();
const results: Record<"SIGKILL" | "SIGTERM", Timings[]> = { SIGKILL: [], SIGTERM: [] };
for (let run = 1; run <= runs; run++) {
  for (const signal of ["SIGKILL", "SIGTERM"] as const) {
    const timings = await oneRun(signal);
    results[signal].push(timings);
    process.stderr.write(
      `bench failover: run ${run} ${signal}: ${JSON.stringify(Object.fromEntries(Object.entries(timings).map(([k, v]) => [k, Number(v.toFixed(2))])))}\n`,
    );
  }
}

const PHASES = ["leads", "labelled", "endpoint", "first", "all"] as const;
console.log(`## 5. Failover\n`);
console.log(
  `${machineLine(describeMachine())}; ${runs} run(s) per case, ${vmCount} agents, report interval ${intervalSeconds} s, lease defaults (15 s / 10 s / 2 s).\n`,
);
console.log("Seconds from the signal to the old leader (median, max over runs):\n");
console.log(
  markdownTable(
    ["leader", ...PHASES],
    (["SIGKILL", "SIGTERM"] as const).map((signal) => [
      signal === "SIGKILL" ? "killed (SIGKILL)" : "terminated (SIGTERM)",
      ...PHASES.map((phase) => {
        const summary = summarize(results[signal].map((t) => t[phase]));
        return `${fmt(summary.p50)} (${fmt(summary.max)})`;
      }),
    ]),
  ),
);
