// Benchmark 3: how late a stop comes, end to end.
//
//   node bench/run.mjs latency [--vms 20] [--idle-timeout 1m] [--grace 30s] [--interval 2s] [--tick 1s]
//
// stop overshoot = actual stop time − (last activity + idle-timeout + grace).
//
// The built collector (standalone, enforce mode, its stopCommand `touch
// DIR/stopped/{name}`, so the file's mtime is the stop time) and one bundled
// `ws-agent run` per VM. Each VM's activity is a real terminal: a shell on a
// pseudo-terminal the test user owns (util-linux `script`, as tmux or an IDE
// opens one); the agent's --dev-root holds pts/0 → that /dev/pts/N, so each
// agent sees its own terminal only. The harness types one key into each at a
// random moment and then nothing: the last activity is that keystroke, as
// the kernel records it in the tty's atime. Background-work, Jupyter,
// code-server and remote-session signals are off in these agents: they read
// the whole machine (its processes and sshd's sockets), so on a shared 2-core
// machine other people's CPU and SSH sessions would (rightly) count as work
// and hold the VMs, or be the last activity in place of the keystroke.
import { existsSync, mkdirSync, mkdtempSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { spawnUserTerminal, type PtySession } from "../test/support/pty.js";
import { ensureTestUser } from "../test/support/sshd.js";
import { benchArgs, seconds } from "./lib/args.js";
import { startCollector, type RunningCollector } from "./lib/collector.js";
import { delay, launch, type Launched } from "./lib/launch.js";
import { describeMachine, machineLine } from "./lib/machine.js";
import { agentBundle, repoRoot, requireBundles } from "./lib/paths.js";
import { seededRandom, summarize } from "./lib/stats.js";
import { fmt, markdownTable } from "./lib/table.js";

const USAGE =
  "usage: node bench/run.mjs latency [--vms 20] [--idle-timeout 1m] [--grace 30s] [--interval 2s] [--tick 1s] [--heartbeat 5m|off]";
const args = benchArgs(process.argv.slice(2), ["vms", "idle-timeout", "grace", "interval", "tick", "heartbeat"], USAGE);
const vmCount = Number(args.vms ?? 20);
const idleSeconds = seconds(args["idle-timeout"], 60, "idle-timeout");
const graceSeconds = seconds(args.grace, 30, "grace");
const intervalSeconds = seconds(args.interval, 2, "interval");
const tickSeconds = seconds(args.tick, 1, "tick");
const USER = "wstestlat";
/** The kernel moves a tty's atime only when the second leaves the 8-second slot of the previous value. */
const TTY_SLOT_SECONDS = 8;

interface Vm {
  name: string;
  terminal: PtySession;
  tty: string;
  agent?: Launched;
  keystrokeMs?: number;
  atimeMs?: number;
  stoppedMs?: number;
}

const cleanups: Array<() => Promise<void> | void> = [];

function sameSlot(aMs: number, bMs: number): boolean {
  return Math.floor(aMs / 1000 / TTY_SLOT_SECONDS) === Math.floor(bMs / 1000 / TTY_SLOT_SECONDS);
}

/** Types one key once the tty's atime can move (a new 8-second slot); returns when the kernel recorded it. */
async function lastKeystroke(vm: Vm): Promise<void> {
  const before = statSync(vm.tty).atimeMs;
  while (sameSlot(Date.now(), before)) await delay(100);
  vm.terminal.write("x");
  vm.keystrokeMs = Date.now();
  const deadline = Date.now() + 5_000;
  for (;;) {
    const atime = statSync(vm.tty).atimeMs;
    if (atime !== before) {
      vm.atimeMs = atime;
      return;
    }
    if (Date.now() > deadline) throw new Error(`${vm.tty}: the keystroke did not move the tty's atime`);
    await delay(20);
  }
}

async function main(): Promise<void> {
  requireBundles();
  if (!Number.isInteger(vmCount) || vmCount < 1) throw new Error(`--vms must be a positive integer`);
  const machine = describeMachine();
  await ensureTestUser(USER);
  const dir = mkdtempSync(path.join(os.tmpdir(), "ws-bench-latency-"));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  const stoppedDir = path.join(dir, "stopped");
  mkdirSync(stoppedDir);

  const collector: RunningCollector = await startCollector({
    reportInterval: `${intervalSeconds}s`,
    tick: `${tickSeconds}s`,
    // Unset: the collector's default (reports on change, 5m); `off`: every sample, as before.
    ...(args.heartbeat ? { reportHeartbeat: args.heartbeat } : {}),
    stopCommand: ["/usr/bin/touch", path.join(stoppedDir, "{name}")],
    policyYaml: [
      "  defaults:",
      "    autostop: enabled",
      "    mode: enforce",
      `    idle-timeout: ${idleSeconds}s`,
      `    grace-period: ${graceSeconds}s`,
    ].join("\n"),
  });
  cleanups.push(() => collector.stop());

  const random = seededRandom(7);
  const vms: Vm[] = [];
  for (let i = 0; i < vmCount; i++) {
    const terminal = await spawnUserTerminal(USER);
    cleanups.push(() => terminal.close());
    const tty = await terminal.shellTty({ timeoutMs: 60_000 });
    vms.push({ name: `vm-${String(i).padStart(3, "0")}`, terminal, tty });
  }
  const agentConfig = path.join(dir, "agent.yaml");
  writeFileSync(agentConfig, "disabledSignals: [system, jupyter, code_server, remote_sessions]\n");
  for (const vm of vms) {
    const roots = path.join(dir, vm.name);
    mkdirSync(path.join(roots, "dev/pts"), { recursive: true });
    mkdirSync(path.join(roots, "run"), { recursive: true });
    mkdirSync(path.join(roots, "home"), { recursive: true });
    symlinkSync(vm.tty, path.join(roots, "dev/pts/0"));
    // Agents start at random moments within an interval, as VMs boot at any time.
    await delay(((random() * intervalSeconds) / vmCount) * 1000);
    vm.agent = launch(
      process.execPath,
      [
        agentBundle,
        "run",
        "--insecure",
        "--collector",
        collector.grpcAddress,
        "--namespace",
        "latency",
        "--name",
        vm.name,
        "--report-interval",
        `${intervalSeconds}s`,
        "--state-dir",
        path.join(roots, "state"),
        "--socket",
        path.join(roots, "agent.sock"),
        "--dev-root",
        path.join(roots, "dev"),
        "--run-root",
        path.join(roots, "run"),
        "--home-root",
        path.join(roots, "home"),
      ],
      { env: { WS_AGENT_TOKEN: collector.tokenFor("latency", vm.name), WS_AGENT_CONFIG: agentConfig } },
    );
    const agent = vm.agent;
    cleanups.push(async () => void (await agent.stop()));
  }
  await Promise.all(vms.map((vm) => vm.agent!.waitFor(/connected to collector/, 120_000)));
  process.stderr.write(`bench latency: ${vmCount} agents connected; typing the last keystrokes\n`);

  // Last keystrokes spread over a few seconds, so they fall at every phase of the report and tick timers.
  await Promise.all(
    vms.map(async (vm) => {
      await delay(random() * TTY_SLOT_SECONDS * 1000);
      await lastKeystroke(vm);
    }),
  );
  const expectedLastMs = Math.max(...vms.map((vm) => vm.atimeMs!)) + (idleSeconds + graceSeconds) * 1000;
  const deadline = expectedLastMs + 120_000;
  process.stderr.write(`bench latency: waiting ${fmt((expectedLastMs - Date.now()) / 1000)} s for the stops\n`);
  while (vms.some((vm) => vm.stoppedMs === undefined) && Date.now() < deadline) {
    for (const vm of vms) {
      if (vm.stoppedMs !== undefined) continue;
      const file = path.join(stoppedDir, vm.name);
      if (existsSync(file)) {
        vm.stoppedMs = statSync(file).mtimeMs;
        // The VM is gone: its agent goes with it.
        void vm.agent!.stop();
      }
    }
    await delay(100);
  }

  const stopped = vms.filter((vm) => vm.stoppedMs !== undefined);
  const missing = vms.length - stopped.length;
  const budgetMs = (idleSeconds + graceSeconds) * 1000;
  const vsRecorded = summarize(stopped.map((vm) => (vm.stoppedMs! - vm.atimeMs! - budgetMs) / 1000));
  const vsKeystroke = summarize(stopped.map((vm) => (vm.stoppedMs! - vm.keystrokeMs! - budgetMs) / 1000));
  // The collector logs each transition; a pending stop that went back to Active without new activity explains a late stop.
  const log = collector.proc.output();
  const cancellations = (vm: Vm) =>
    (log.match(new RegExp(`latency/${vm.name}: StoppingPending → Active`, "g")) ?? []).length;
  const overshoot = (vm: Vm) => (vm.stoppedMs! - vm.atimeMs! - budgetMs) / 1000;
  const clean = stopped.filter((vm) => cancellations(vm) === 0);
  const cancelled = stopped.filter((vm) => cancellations(vm) > 0);
  const sec = (value: number) => (Number.isNaN(value) ? "n/a" : `${fmt(value)} s`);
  const row = (label: string, s: ReturnType<typeof summarize>) => [
    label,
    s.n,
    sec(s.min),
    sec(s.p50),
    sec(s.p90),
    sec(s.p99),
    sec(s.max),
    fmt(s.p99 / intervalSeconds),
  ];

  const out: string[] = [];
  out.push("## Decision latency: stop overshoot (benchmark 3)", "", machineLine(machine), "");
  out.push(
    `${vmCount} VMs, each a bundled \`ws-agent run\` reporting every ${intervalSeconds} s to the built collector (standalone, enforce, tick ${tickSeconds} s, reportHeartbeat ${args.heartbeat ?? "default: reports on change, 5m"}), ` +
      `idle-timeout ${idleSeconds} s, grace-period ${graceSeconds} s (the shortest the policy accepts: 1m and 30s). ` +
      `Activity: one real keystroke into each VM's own pseudo-terminal at a random moment, then nothing. Stop time: the mtime of the file the collector's stopCommand touched. ` +
      `overshoot = stop − (last activity + idle-timeout + grace).`,
    "",
  );
  out.push(
    markdownTable(
      ["last activity taken as", "VMs stopped", "min", "p50", "p90", "p99", "max", "p99 / report interval"],
      [
        row("the tty atime the kernel recorded (what any reader can know)", vsRecorded),
        row("the moment the harness typed the key", vsKeystroke),
        row("  tty atime; VMs whose pending stop was never cancelled", summarize(clean.map(overshoot))),
        row("  tty atime; VMs whose pending stop was cancelled and restarted", summarize(cancelled.map(overshoot))),
      ],
    ),
    "",
  );
  out.push(
    `${cancelled.length} of ${stopped.length} VMs had their pending stop cancelled (${cancelled.reduce((n, vm) => n + cancellations(vm), 0)} cancellations in all) ` +
      `with no new activity: the collector logged "pending stop cancelled: activity: input on pts/0" for the same keystroke, and started the grace period again.`,
    "",
  );
  out.push(
    `The kernel records tty times in whole seconds (and moves them only once per 8-second slot, which the harness waited out before typing), ` +
      `so the recorded activity is up to 1 s before the keystroke: the second row is the first one minus that truncation. ` +
      `With ${vmCount} VMs p99 is the ${vmCount >= 100 ? "99th percentile" : "largest value but one or the largest"}; run more VMs for a tighter tail. ` +
      `Target (issue 9): p99 overshoot ≤ one report interval (${intervalSeconds} s) → ` +
      (missing > 0
        ? `not established: ${missing} VM(s) were not stopped within 2 minutes of their deadline.`
        : vsRecorded.p99 <= intervalSeconds
          ? `met (${fmt(vsRecorded.p99)} s).`
          : `missed by ${fmt(vsRecorded.p99 - intervalSeconds)} s.`),
    "",
  );
  process.stdout.write(`${out.join("\n")}\n`);
  writeCollectorLog(collector, vms);
  if (missing > 0) {
    process.stderr.write(`collector output:\n${collector.proc.output().slice(-6000)}\n`);
    process.exitCode = 1;
  }
}

/** The collector's log and each VM's timeline, kept beside the results for a look at any outlier. */
function writeCollectorLog(collector: RunningCollector, vms: readonly Vm[]): void {
  const iso = (ms: number | undefined) => (ms === undefined ? "-" : new Date(ms).toISOString());
  const lines = vms.map(
    (vm) =>
      `${vm.name} ${vm.tty} keystroke=${iso(vm.keystrokeMs)} atime=${iso(vm.atimeMs)} stopped=${iso(vm.stoppedMs)}`,
  );
  mkdirSync(path.join(repoRoot, "bench/results"), { recursive: true });
  writeFileSync(
    path.join(repoRoot, "bench/results/latency-timeline.log"),
    [...lines, "", collector.proc.output()].join("\n"),
  );
}

async function cleanup(): Promise<void> {
  for (const step of cleanups.reverse()) {
    try {
      await step();
    } catch (error) {
      process.stderr.write(`cleanup: ${(error as Error).message}\n`);
    }
  }
}

main()
  .catch((error) => {
    process.stderr.write(`${(error as Error).stack ?? String(error)}\n`);
    process.exitCode = 1;
  })
  .finally(cleanup);
