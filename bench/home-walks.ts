// CPU cost of the home walks alone: one sample of the Jupyter and code-server signals (sharing one
// home scan, as createSignals does) over N homes in a home root of its own, with every walk made
// afresh (a new cache each sample: the agent before issue 30 walked each home per signal, which
// this approaches) and with the walks remembered between samples (what ships).
//
//   node bench/run.mjs home-walks [--homes 1,10,100] [--rounds 50]
//
// Homes are laid out as bench/lib/homes.ts makes them for benchmark 1 (.cache, .local/share;
// every third with a Jupyter runtime dir holding a kernel file, every fifth with a code-server
// heartbeat), owned by uids 20001… that passwd (a fixture file) names. CPU time of this process
// (user + system) per sample, not wall time: the machine is shared.
import { chownSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { systemClock } from "../packages/guest-agent/src/clock.js";
import type { Roots } from "../packages/guest-agent/src/roots.js";
import { createCodeServerSignal } from "../packages/guest-agent/src/signals/code-server.js";
import { createHomeScan, type HomeScan } from "../packages/guest-agent/src/signals/home-scan.js";
import { createJupyterSignal } from "../packages/guest-agent/src/signals/jupyter.js";
import type { Signal, SignalContext } from "../packages/guest-agent/src/signals/types.js";
import { loadUsers } from "../packages/guest-agent/src/users.js";
import { benchArgs, integers } from "./lib/args.js";
import { runBenchmark, type Cleanup } from "./lib/main.js";
import { delay } from "./lib/launch.js";
import { fmt, markdownTable } from "./lib/table.js";

const USAGE = "usage: node bench/run.mjs home-walks [--homes 1,10,100] [--rounds 50]";
const args = benchArgs(process.argv.slice(2), ["homes", "rounds"], USAGE);
const points = integers(args.homes, [1, 10, 100], "homes");
const rounds = Number(args.rounds ?? 50);
const cleanups: Cleanup[] = [];

function machineWith(homes: number): Roots {
  const base = mkdtempSync(path.join(os.tmpdir(), "ws-bench-home-walks-"));
  cleanups.push(() => rmSync(base, { recursive: true, force: true }));
  const roots: Roots = {
    proc: "/proc",
    sys: "/sys",
    dev: "/dev",
    run: path.join(base, "run"),
    home: path.join(base, "home"),
    etc: path.join(base, "etc"),
    state: path.join(base, "state"),
  };
  mkdirSync(roots.etc, { recursive: true });
  const passwd = ["root:x:0:0:root:/root:/bin/bash"];
  for (let i = 1; i <= homes; i++) {
    const uid = 20000 + i;
    const name = `walker${i}`;
    const home = path.join(roots.home, name);
    passwd.push(`${name}:x:${uid}:${uid}::/home/${name}:/bin/bash`);
    const dirs = [".cache/pip", ".local/share/nano", "notebooks"];
    if (i % 3 === 0) dirs.push(".local/share/jupyter/runtime");
    if (i % 5 === 0) dirs.push(".local/share/code-server");
    for (const dir of dirs) mkdirSync(path.join(home, dir), { recursive: true });
    if (i % 3 === 0) writeFileSync(path.join(home, ".local/share/jupyter/runtime", `kernel-${i}.json`), "{}");
    if (i % 5 === 0) writeFileSync(path.join(home, ".local/share/code-server/heartbeat"), "");
    writeFileSync(path.join(home, ".bash_history"), "ls\n");
    chownTree(home, uid);
  }
  writeFileSync(path.join(roots.etc, "passwd"), `${passwd.join("\n")}\n`);
  return roots;
}

function chownTree(at: string, uid: number): void {
  chownSync(at, uid, uid);
  for (const entry of readdirSync(at, { withFileTypes: true })) {
    const next = path.join(at, entry.name);
    if (entry.isDirectory()) chownTree(next, uid);
    else chownSync(next, uid, uid);
  }
}

function signalsSharing(scan: HomeScan): Array<Signal<unknown>> {
  return [createJupyterSignal({ urls: [], timeoutMs: 5_000, homes: scan }), createCodeServerSignal(scan)] as Array<
    Signal<unknown>
  >;
}

/** CPU ms per sample of both signals; `fresh`: a new scan (and cache) every sample. */
async function perSample(roots: Roots, fresh: boolean): Promise<{ cpuMs: number; walked: number; remembered: number }> {
  const users = await loadUsers(roots);
  let scan = createHomeScan();
  let signals = signalsSharing(scan);
  const sample = async () => {
    if (fresh) {
      scan = createHomeScan();
      signals = signalsSharing(scan);
    }
    // A clock per sample, stopped at the sample's instant, as the sampler makes it.
    const at = systemClock.nowMs();
    const ctx: SignalContext = {
      roots,
      users,
      clock: { nowMs: () => at, monotonicMs: () => systemClock.monotonicMs() },
      signal: new AbortController().signal,
    };
    await Promise.all(signals.map((signal) => signal.collect(ctx)));
  };
  await sample();
  await sample();
  const counted = { ...scan.cache.counts };
  const before = process.cpuUsage();
  for (let round = 0; round < rounds; round++) await sample();
  const used = process.cpuUsage(before);
  return {
    cpuMs: (used.user + used.system) / 1000 / rounds,
    walked: (scan.cache.counts.walked - (fresh ? 0 : counted.walked)) / (fresh ? 1 : rounds),
    remembered: (scan.cache.counts.remembered - (fresh ? 0 : counted.remembered)) / (fresh ? 1 : rounds),
  };
}

async function main(): Promise<void> {
  const rows: Array<Array<string | number>> = [];
  for (const homes of points) {
    const roots = machineWith(homes);
    // Stamps younger than RACY_MS are not trusted: let the new homes settle first.
    await delay(2_500);
    const fresh = await perSample(roots, true);
    const remembered = await perSample(roots, false);
    rows.push([
      homes,
      `${fmt(fresh.cpuMs, 3)} ms`,
      `${fmt(remembered.cpuMs, 3)} ms`,
      `${fmt(remembered.walked, 2)} walked, ${fmt(remembered.remembered, 2)} remembered`,
    ]);
  }
  console.log(
    `### Home walks: Jupyter + code-server, CPU per sample (${rounds} samples, ${os.availableParallelism()} CPUs, Node ${process.version}, Node's default flags)\n`,
  );
  console.log(
    markdownTable(
      ["homes (+ /root)", "every walk made afresh", "walks remembered (ships)", "walks per sample, remembered"],
      rows,
    ),
  );
}

runBenchmark(main, cleanups);
