// 5. The trust boundary's cost and effect: what the safe reader (fs/user-file.ts) costs per file
// against a plain fs.readFile, and what a FIFO planted as a Jupyter runtime file does to libuv's
// thread pool with each (a plain open() holds a pool thread per FIFO; the safe one holds none).
//
//   node bench/run.mjs trust [--no-build] [--calls N]
import { execFileSync, spawnSync } from "node:child_process";
import {
  chownSync,
  closeSync,
  constants,
  fstatSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { readFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { readUserFile, statUserFile } from "../packages/guest-agent/src/fs/user-file.js";

const args = process.argv.slice(2);
const callsIndex = args.indexOf("--calls");
const CALLS = callsIndex >= 0 ? Number(args[callsIndex + 1]) : 2000;
if (!Number.isInteger(CALLS) || CALLS <= 0) {
  console.error("usage: trust.ts [--calls N]  (N reads per measured row, default 2000)");
  process.exit(2);
}

const USER = 4242;
const trusted = mkdtempSync(path.join(os.tmpdir(), "ws-bench-trust-"));
const runtime = path.join(trusted, "alice", ".local", "share", "jupyter", "runtime");
mkdirSync(runtime, { recursive: true });
chownSync(path.join(trusted, "alice"), USER, USER);
const file = path.join(runtime, "jpserver-4242.json");
writeFileSync(
  file,
  JSON.stringify({
    base_url: "/",
    hostname: "localhost",
    password: false,
    pid: 4242,
    port: 8888,
    root_dir: "/home/alice",
    secure: false,
    sock: "",
    token: "0".repeat(48),
    url: "http://localhost:8888/",
    version: "2.14.2",
  }),
);
chownSync(file, USER, USER);
execFileSync("mkfifo", [path.join(runtime, "jpserver-1.json")]);
const segments = ["alice", ".local", "share", "jupyter", "runtime"];

async function cpuMicrosPerCall(what: () => Promise<unknown>): Promise<number> {
  for (let i = 0; i < 200; i++) await what().catch(() => undefined); // warm up
  const start = process.cpuUsage();
  for (let i = 0; i < CALLS; i++) await what().catch(() => undefined);
  const used = process.cpuUsage(start);
  return (used.user + used.system) / CALLS;
}

/**
 * The same walk (six opens relative to the previous descriptor, an fstat each) made with
 * synchronous calls: what the safe reader would cost on the main thread. Not what the agent does:
 * a hung network filesystem under a home would then freeze the whole agent (docs/security.md).
 */
function syncWalk(): void {
  const flags = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;
  let fd = openSync(trusted, constants.O_RDONLY | constants.O_DIRECTORY);
  for (const name of [...segments, "jpserver-4242.json"]) {
    const next = openSync(`/proc/self/fd/${fd}/${name}`, flags);
    fstatSync(next);
    closeSync(fd);
    fd = next;
  }
  closeSync(fd);
}

const rows: Array<[string, number]> = [
  ["fs.readFile (no checks: what wave 1 did, less its fstat)", await cpuMicrosPerCall(() => readFile(file))],
  [
    "readUserFile, a 300-byte runtime file (6 opens via /proc/self/fd, fstat each)",
    await cpuMicrosPerCall(() =>
      readUserFile({ trusted, segments: [...segments, "jpserver-4242.json"], maxBytes: 65536 }),
    ),
  ],
  [
    "readUserFile, a FIFO (refused after fstat)",
    await cpuMicrosPerCall(() =>
      readUserFile({ trusted, segments: [...segments, "jpserver-1.json"], maxBytes: 65536 }),
    ),
  ],
  [
    "statUserFile (code-server heartbeat)",
    await cpuMicrosPerCall(() => statUserFile({ trusted, segments: [...segments, "jpserver-4242.json"] })),
  ],
  [
    "the same walk with synchronous calls (reference only: not used, see above)",
    await cpuMicrosPerCall(async () => syncWalk()),
  ],
];

/**
 * In a child process (a stuck pool thread keeps a process from exiting): open N FIFOs the given
 * way, then time one fs.stat of an ordinary file. With 4 FIFOs opened plainly the pool is full
 * and the stat never completes; the child reports that after 2 s and is killed.
 */
function statLatencyWith(fifos: number, nonBlocking: boolean): string {
  const script = `
    const fs = require("node:fs");
    const flags = fs.constants.O_RDONLY | ${nonBlocking ? "fs.constants.O_NONBLOCK" : "0"};
    for (let i = 0; i < ${fifos}; i++) fs.promises.open(${JSON.stringify(path.join(runtime, "jpserver-1.json"))}, flags).then((h) => h.close(), () => {});
    const started = process.hrtime.bigint();
    fs.promises.stat(${JSON.stringify(file)}).then(() => { console.log(String(Number(process.hrtime.bigint() - started) / 1e6)); process.kill(process.pid, "SIGKILL"); });
    setTimeout(() => { console.log("never (after 2000 ms)"); process.kill(process.pid, "SIGKILL"); }, 2000);`;
  const result = spawnSync(process.execPath, ["-e", script], { encoding: "utf8", timeout: 10_000 });
  const out = result.stdout.trim();
  return /^\d/.test(out) ? `${Number(out).toFixed(2)} ms` : out || `no answer (${result.signal ?? result.status})`;
}

console.log(`## 5. Trust boundary: safe reads of user files\n`);
console.log(
  `${CALLS} calls per row, CPU time (user + system) of this process per call; the machine is shared with other jobs, so compare rows, not runs.\n`,
);
console.log("| read | CPU µs per call |\n|---|---:|");
for (const [what, micros] of rows) console.log(`| ${what} | ${micros.toFixed(1)} |`);
console.log(
  "\nA FIFO planted as jpserver-1.json, opened N times the way a signal opens it, then one fs.stat of an ordinary file (libuv's default pool: 4 threads):\n",
);
console.log("| FIFOs planted | plain open() | O_NONBLOCK open() (the safe reader) |\n|---:|---|---|");
for (const fifos of [1, 4])
  console.log(
    `| ${fifos} | stat answered in ${statLatencyWith(fifos, false)} | stat answered in ${statLatencyWith(fifos, true)} |`,
  );
rmSync(trusted, { recursive: true, force: true });
