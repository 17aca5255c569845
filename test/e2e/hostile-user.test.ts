// The agent's trust boundary, end to end with the shipped bundle: real unprivileged users
// (ws13a the attacker, ws13b the bystander) plant every attack of issue 13 in real homes, as
// themselves, and the agent must keep reporting, keep serving ws-lease, keep secrets, touch
// nothing outside its state dir, and stop on SIGTERM. docs/security.md lists the attacks.
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import {
  chmodSync,
  chownSync,
  copyFileSync,
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureUser, type TestUser } from "../../packages/guest-agent/test/lease/support/users.js";
import {
  agentBundle,
  collectorBundle,
  eventually,
  getText,
  requireBundles,
  start,
  type Proc,
} from "../support/process.js";
import { quietMachine, type QuietMachine } from "../support/quiet-machine.js";
import { standaloneCollector, type StandaloneCollector } from "../support/standalone.js";

const SECRET = `WS13-SECRET-${randomBytes(8).toString("hex")}`;
const RUNTIME = [".local", "share", "jupyter", "runtime"];

let dir: string;
let machine: QuietMachine;
let attacker: TestUser;
let bystander: TestUser;
let wsLease: string;
let secretFile: string;
let outsideDir: string;
let setup: StandaloneCollector;
let collector: Proc;
let traceFile: string;
const running: Proc[] = [];
const children: ChildProcess[] = [];
const mounts: string[] = [];

/** Runs a shell script as `user` (the attack is planted by the user, not by root on their behalf). */
function asUser(user: TestUser, script: string): string {
  const result = spawnSync("sh", ["-ec", script], {
    uid: user.uid,
    gid: user.gid,
    encoding: "utf8",
    env: { PATH: "/usr/bin:/bin", HOME: homeOf(user) },
    timeout: 60_000,
  });
  if (result.status !== 0) throw new Error(`as ${user.name}: ${script}\nfailed: ${result.stderr}`);
  return result.stdout;
}

function homeOf(user: TestUser): string {
  return path.join(machine.root, "home", user.name);
}

function wsLeaseAs(user: TestUser | "root", args: string[], socket = machine.socket) {
  const ids = user === "root" ? {} : { uid: user.uid, gid: user.gid };
  return spawnSync(process.execPath, [wsLease, ...args], {
    ...ids,
    encoding: "utf8",
    timeout: 30_000,
    env: { PATH: "/usr/bin:/bin", WS_AGENT_SOCKET: socket },
  });
}

function agentFlags(stateDir = machine.stateDir): string[] {
  const flags = [...machine.flags];
  flags[flags.indexOf("--state-dir") + 1] = stateDir;
  return flags;
}

function startAgent(name: string, stateDir?: string): Proc {
  const agent = start(agentBundle, setup.agentRunArgs("e2e", name, [...agentFlags(stateDir)]), {
    WS_AGENT_TOKEN: setup.token("e2e", name),
    WS_AGENT_CONFIG: path.join(dir, "none.yaml"),
  });
  running.push(agent);
  return agent;
}

async function vm(name: string): Promise<{ state: string; connected: boolean; lastReportAtMs?: number } | undefined> {
  const { body } = await getText(`http://127.0.0.1:${setup.httpPort}/api/vms`);
  return (
    JSON.parse(body).vms as Array<{ name: string; state: string; connected: boolean; lastReportAtMs?: number }>
  ).find((v) => v.name === name);
}

/** Every path below `root` with its kind, size and link target: what "nothing changed" compares. */
function snapshot(root: string, skip: string[] = []): string[] {
  const out: string[] = [];
  const walk = (at: string): void => {
    if (skip.includes(at)) return;
    const info = lstatSync(at);
    const kind = info.isSymbolicLink()
      ? `link->${readlinkSync(at)}`
      : info.isFIFO()
        ? "fifo"
        : info.isDirectory()
          ? "dir"
          : info.isSocket()
            ? "socket"
            : "file";
    out.push(
      `${path.relative(root, at) || "."} ${kind} ${info.isFile() ? info.size : ""} uid=${info.uid} mode=${(info.mode & 0o7777).toString(8)}`,
    );
    if (info.isDirectory()) for (const name of readdirSync(at).sort()) walk(path.join(at, name));
  };
  walk(root);
  return out;
}

beforeAll(async () => {
  requireBundles();
  [attacker, bystander] = await Promise.all([ensureUser("ws13a"), ensureUser("ws13b")]);
  dir = mkdtempSync(path.join(os.tmpdir(), "ws-hostile-"));
  chmodSync(dir, 0o755); // the users must reach ws-lease inside
  writeFileSync(path.join(dir, "none.yaml"), "");
  wsLease = path.join(dir, "ws-lease");
  copyFileSync(agentBundle, wsLease); // a copy, readable by the test users, under the CLI's name
  chmodSync(wsLease, 0o755);
  machine = await quietMachine();
  chmodSync(machine.root, 0o755);
  for (const user of [attacker, bystander]) {
    mkdirSync(homeOf(user), { mode: 0o700 });
    chownSync(homeOf(user), user.uid, user.gid);
  }
  // A root-only file with a secret in it, and a root-owned directory outside everything the agent owns.
  const rootOnly = path.join(dir, "root-only");
  mkdirSync(rootOnly, { mode: 0o755 });
  secretFile = path.join(rootOnly, "secret.json");
  writeFileSync(secretFile, `${SECRET} this is not JSON and must never be quoted ${SECRET}\n`, { mode: 0o600 });
  outsideDir = path.join(dir, "outside");
  mkdirSync(path.join(outsideDir, "nested"), { recursive: true });
  for (const name of ["a", "b", "nested/c"]) writeFileSync(path.join(outsideDir, name), "keep me\n");

  setup = await standaloneCollector(dir, {
    policyDefaults: { autostop: "enabled", mode: "observe", "idle-timeout": "1h" },
    // Reports on change, with a heartbeat short enough that "Reports go on" is seen in seconds: an
    // agent whose sampling a FIFO froze would miss its heartbeats, as it would miss every sample.
    extra: "reportHeartbeat: 5s",
  });
  traceFile = path.join(dir, "trace.jsonl");
  collector = start(collectorBundle, ["serve", "--config", setup.configFile, "--record-trace", traceFile]);
  running.push(collector);
  await collector.waitFor(/collector serving/);
});

afterAll(async () => {
  for (const child of children) child.kill("SIGKILL");
  await Promise.all(running.map((p) => p.stop()));
  for (const mount of mounts) spawnSync("umount", ["-l", mount]);
  await machine?.remove();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("a hostile user on the VM", () => {
  it("plants a FIFO, links to a root-only file, a 1 GB sparse file and a linked home: Reports go on, nothing leaks, SIGTERM ends the agent", async () => {
    const home = homeOf(attacker);
    const runtime = path.join(home, ...RUNTIME);
    const runUser = path.join(machine.root, "run", "user", String(attacker.uid));
    mkdirSync(path.dirname(runUser), { recursive: true, mode: 0o755 });
    chmodSync(path.dirname(runUser), 0o755);
    mkdirSync(runUser, { mode: 0o700 });
    chownSync(runUser, attacker.uid, attacker.gid);
    // Everything below is done by ws13a, in ws13a's own home and runtime dir.
    asUser(
      attacker,
      `mkdir -p ${runtime} ${path.join(home, ".local", "share", "code-server")} ${runUser}/jupyter
       mkfifo ${runtime}/jpserver-1.json                                      # freeze: open() would block forever
       mkfifo ${path.join(home, ".local", "share", "code-server", "heartbeat")}
       ln -s ${secretFile} ${runtime}/jpserver-2.json                         # read a root-only file
       ln -s ${secretFile} ${runUser}/jupyter/nbserver-3.json
       truncate -s 1G ${runtime}/jpserver-4.json                              # 1 GB, sparse
       ln -s ${path.dirname(secretFile)} ${home}/.local/share/jupyter/linked  # a directory link inside the home
       mkdir -p ${home}/real && ln -s ${home}/real ${home}/.local/share/code-server-link`,
    );
    // A home that is a link the user controls (as if ws13a could write the home root): a user's link is never followed.
    const linkedHome = path.join(machine.root, "home", "ws13a-linked");
    spawnSync("ln", ["-s", path.dirname(secretFile), linkedHome]);
    spawnSync("chown", ["-h", `${attacker.uid}:${attacker.gid}`, linkedHome]);
    const before = snapshot(machine.root, [machine.stateDir, path.dirname(machine.socket)]);
    const outsideBefore = snapshot(outsideDir);

    const agent = startAgent("hostile");
    await agent.waitFor(/agent started/, 60_000);
    // Reports keep arriving: the collector's last-report time moves on again and again, and the VM stays connected.
    const seen = new Set<number>();
    await eventually(
      async () => {
        const view = await vm("hostile");
        if (view?.connected && view.lastReportAtMs !== undefined) seen.add(view.lastReportAtMs);
        return seen.size >= 5;
      },
      60_000,
      "five successive Reports from the agent with the FIFO planted",
    );
    expect((await vm("hostile"))?.state).not.toBe("AgentLost");

    // ws-lease answers, for the attacker's neighbour and for root.
    const taken = wsLeaseAs(bystander, ["30m", "--reason", "bystander"]);
    expect(taken.status, taken.stderr).toBe(0);
    const listed = wsLeaseAs("root", ["list", "--json"]);
    expect(listed.status, listed.stderr).toBe(0);
    expect(
      (JSON.parse(listed.stdout) as { leases: Array<{ user: string; uid: number }> }).leases.map((l) => l.uid),
    ).toContain(bystander.uid);

    // One sample by hand: every planted file is named with what is wrong with it, and the secret is not there.
    const probe = spawnSync(
      process.execPath,
      [agentBundle, "probe", "--json", "--window", "100ms", ...agentFlags(path.join(dir, "probe-state"))],
      { encoding: "utf8", timeout: 60_000 },
    );
    expect(probe.stdout, probe.stderr).toContain("jpserver-1.json: a FIFO, not a regular file");
    expect(probe.stdout).toContain("jpserver-2.json: a symbolic link: not followed");
    expect(probe.stdout).toContain("nbserver-3.json: a symbolic link: not followed");
    expect(probe.stdout).toContain("jpserver-4.json: 1073741824 bytes, more than the 65536");
    expect(probe.stdout).toContain("heartbeat: a FIFO, not a regular file");
    expect(probe.stdout).toContain("ws13a-linked: a symbolic link owned by uid");
    const report = JSON.parse(probe.stdout) as { sources: Array<{ source: string; state: string }> };
    expect(report.sources.map((s) => s.source)).toEqual(
      expect.arrayContaining(["jupyter", "code_server", "sessions", "system", "leases"]),
    );

    // SIGTERM ends the agent, cleanly (exit 0, not the SIGKILL of stop()'s fallback).
    expect(await agent.stop("SIGTERM")).toBe(0);

    const trace = existsSync(traceFile) ? readFileSync(traceFile, "utf8") : "";
    expect(trace.length).toBeGreaterThan(0);
    for (const [what, text] of [
      ["the Report (probe)", probe.stdout + probe.stderr],
      ["the agent's log", agent.output()],
      ["the collector's log", collector.output()],
      ["the trace file", trace],
      ["the collector's API", (await getText(`http://127.0.0.1:${setup.httpPort}/api/vms`)).body],
    ] as const) {
      expect(text.includes(SECRET), `the secret appears in ${what}`).toBe(false);
      expect(text.includes("must never be quoted"), `the secret file's text appears in ${what}`).toBe(false);
    }
    // Nothing outside the agent's state dir and socket dir changed: the planted files are all still there, as they were.
    expect(snapshot(machine.root, [machine.stateDir, path.dirname(machine.socket)])).toEqual(before);
    expect(snapshot(outsideDir)).toEqual(outsideBefore);
    expect(readFileSync(secretFile, "utf8")).toContain(SECRET);
  });

  it("names a home with terminal escapes: root's probe, as text or JSON, shows none of them raw", () => {
    // OSC 52 (a clipboard write), a clear screen, an 8-bit CSI and a right-to-left override in a
    // name ws13a chose: a home link, as if ws13a could write the home root (like ws13a-linked).
    const hostile = path.join(machine.root, "home", "ws13a-\u001b]52;c;cm0gLXJmIH4=\u0007\u001b[2J\u009b2J\u202eevil");
    spawnSync("ln", ["-s", homeOf(attacker), hostile]);
    spawnSync("chown", ["-h", `${attacker.uid}:${attacker.gid}`, hostile]);
    const probe = (json: boolean) =>
      spawnSync(
        process.execPath,
        [
          agentBundle,
          "probe",
          ...(json ? ["--json"] : ["--no-collector"]),
          "--window",
          "100ms",
          ...agentFlags(path.join(dir, "probe-escapes")),
        ],
        { encoding: "utf8", timeout: 60_000 },
      );
    const text = probe(false);
    const json = probe(true);
    rmSync(hostile);
    expect(text.stdout, text.stderr).toMatch(/^jupyter .*\/ws13a- \]52;c;cm0gLXJmIH4= \[2J 2J evil: a symbolic link/m);
    expect(json.stdout, json.stderr).toContain(
      "ws13a-\\u001b]52;c;cm0gLXJmIH4=\\u0007\\u001b[2J\\u009b2J\\u202eevil: a symbolic link",
    );
    for (const output of [text.stdout, text.stderr, json.stdout, json.stderr])
      for (const raw of ["\u001b", "\u0007", "\u009b", "\u202e"]) expect(output).not.toContain(raw);
  });

  it("swaps directories for links in the proof directory while the agent cleans it: nothing outside is deleted", async () => {
    // A first start creates the proof directory (1733, beside the socket); then ws13a fills it.
    const first = startAgent("cleanup");
    await first.waitFor(/agent started/, 60_000);
    expect(await first.stop()).toBe(0);
    const proofDir = path.join(path.dirname(machine.socket), "proof");
    expect(lstatSync(proofDir).mode & 0o7777).toBe(0o1733);
    asUser(
      attacker,
      `cd ${proofDir}; for i in $(seq 1 40); do mkdir -p d$i/sub; touch d$i/sub/f d$i/f; ln -s ${outsideDir} l$i; done`,
    );
    // While the agent starts and cleans up, ws13a keeps turning its directories into links to outsideDir and back.
    const swapper = spawn(
      "sh",
      [
        "-c",
        `cd ${proofDir}; while :; do for i in $(seq 1 40); do mv d$i x$i 2>/dev/null; ln -s ${outsideDir} d$i 2>/dev/null; rm -f d$i 2>/dev/null; mv x$i d$i 2>/dev/null; done; done`,
      ],
      { uid: attacker.uid, gid: attacker.gid, stdio: "ignore" },
    );
    children.push(swapper);
    const outsideBefore = snapshot(outsideDir);
    for (let round = 0; round < 3; round++) {
      const agent = startAgent("cleanup");
      await agent.waitFor(/agent started/, 60_000);
      expect(await agent.stop()).toBe(0);
    }
    swapper.kill("SIGKILL");
    expect(snapshot(outsideDir)).toEqual(outsideBefore);
    // What the agent could remove without recursing it did: the links ws13a made are gone, its full directories stay.
    expect(readdirSync(proofDir).filter((name) => /^l\d+$/.test(name))).toEqual([]);
    expect(readdirSync(proofDir).filter((name) => /^[dx]\d+$/.test(name)).length).toBeGreaterThan(0);
  });

  it("holds 100 connections to the lease socket: ws-lease still works for another user and for root", async () => {
    const agent = startAgent("crowded");
    await agent.waitFor(/agent started/, 60_000);
    // ws13a's script: 100 connections, each reopened as soon as the agent closes it.
    const hog = path.join(dir, "hog.cjs");
    writeFileSync(
      hog,
      `const net = require("node:net");
       let open = 0;
       const one = () => { const s = net.connect(${JSON.stringify(machine.socket)}); s.on("connect", () => { open++; if (open === 100) console.log("holding 100"); });
         s.on("error", () => {}); s.on("close", () => { open--; setTimeout(one, 10); }); };
       for (let i = 0; i < 100; i++) one();`,
    );
    chmodSync(hog, 0o644);
    const hogProcess = spawn(process.execPath, [hog], {
      uid: attacker.uid,
      gid: attacker.gid,
      stdio: ["ignore", "pipe", "inherit"],
    });
    children.push(hogProcess);
    await new Promise<void>((resolve) =>
      hogProcess.stdout!.on("data", (chunk: Buffer) => chunk.toString().includes("holding 100") && resolve()),
    );

    for (let attempt = 0; attempt < 5; attempt++) {
      const taken = wsLeaseAs(bystander, ["1h", "--reason", `attempt ${attempt}`]);
      expect(taken.status, taken.stderr).toBe(0);
      const status = wsLeaseAs(bystander, ["status", "--json"]);
      expect(status.status, status.stderr).toBe(0);
      const root = wsLeaseAs("root", ["list", "--json"]);
      expect(root.status, root.stderr).toBe(0);
    }
    // The attacker's own extra connections are what is limited: held verified ones count against ws13a alone.
    hogProcess.kill("SIGKILL");
    expect(await agent.stop()).toBe(0);
  });

  it("counts connections by the kernel-attested uid: ws13a's ninth proven connection is refused, ws13b and root are not", async () => {
    const agent = startAgent("per-uid");
    await agent.waitFor(/agent started/, 60_000);
    // ws13a answers the identity challenge honestly (as ws-lease does) and keeps each connection open.
    const prover = path.join(dir, "prover.cjs");
    writeFileSync(
      prover,
      `const fs = require("node:fs"), net = require("node:net"), path = require("node:path");
       const socketPath = ${JSON.stringify(machine.socket)}, proofDir = path.join(path.dirname(socketPath), "proof");
       const answers = [];
       const one = () => new Promise((resolve) => {
         const s = net.connect(socketPath); let buffer = ""; let challenged = false;
         s.on("error", () => resolve("error"));
         s.on("data", (chunk) => {
           buffer += chunk; const lines = buffer.split("\\n"); buffer = lines.pop();
           for (const line of lines) {
             if (!challenged) {
               challenged = true; const c = JSON.parse(line);
               const fd = fs.openSync(path.join(proofDir, c.proof), fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_EXCL, 0o600);
               fs.writeSync(fd, c.nonce); fs.closeSync(fd);
               s.write(JSON.stringify({ op: "status" }) + "\\n");
             } else resolve(JSON.parse(line).ok ? "ok" : JSON.parse(line).error.message);
           }
         });
       });
       (async () => { for (let i = 0; i < 9; i++) answers.push(await one()); console.log(JSON.stringify(answers)); setInterval(() => {}, 1000); })();`,
    );
    chmodSync(prover, 0o644);
    const proving = spawn(process.execPath, [prover], {
      uid: attacker.uid,
      gid: attacker.gid,
      stdio: ["ignore", "pipe", "inherit"],
    });
    children.push(proving);
    const answers = await new Promise<string[]>((resolve, reject) => {
      proving.stdout!.on("data", (chunk: Buffer) => resolve(JSON.parse(chunk.toString()) as string[]));
      proving.on("exit", (code) => reject(new Error(`ws13a's client exited (${code}) before answering`)));
    });
    expect(answers.slice(0, 8)).toEqual(Array(8).fill("ok"));
    expect(answers[8]).toBe(
      `you (uid ${attacker.uid}) already hold 8 connections to the agent; close some (or wait 10s) and try again`,
    );
    // The limit is ws13a's alone.
    const other = wsLeaseAs(bystander, ["status", "--json"]);
    expect(other.status, other.stderr).toBe(0);
    expect(wsLeaseAs("root", ["status", "--json"]).status).toBe(0);
    proving.kill("SIGKILL");
    expect(await agent.stop()).toBe(0);
  });

  it("with the state dir on a full 64 KiB tmpfs, ws-lease 2h exits 1 saying why, and every earlier lease survives a restart", async () => {
    const stateDir = path.join(dir, "tiny-state");
    mkdirSync(stateDir, { recursive: true });
    const mounted = spawnSync("mount", ["-t", "tmpfs", "-o", "size=64k,mode=0700", "tmpfs", stateDir], {
      encoding: "utf8",
    });
    if (mounted.status !== 0)
      throw new Error(`mount -t tmpfs failed (the test needs root and tmpfs): ${mounted.stderr}`);
    mounts.push(stateDir);
    let agent = startAgent("full-disk", stateDir);
    await agent.waitFor(/agent started/, 60_000);
    for (const [user, reason] of [
      [bystander, "first"],
      ["root", "second"],
    ] as const) {
      const taken = wsLeaseAs(user, ["1h", "--reason", reason]);
      expect(taken.status, taken.stderr).toBe(0);
    }
    const ids = () =>
      (JSON.parse(wsLeaseAs("root", ["list", "--json"]).stdout) as { leases: Array<{ id: string }> }).leases
        .map((l) => l.id)
        .sort();
    const earlier = ids();
    expect(earlier).toHaveLength(2);
    // Fill it up, as a runaway log would.
    spawnSync("sh", ["-c", `dd if=/dev/zero of=${stateDir}/filler bs=4k 2>/dev/null; true`]);
    for (let attempt = 0; attempt < 3; attempt++) {
      const refused = wsLeaseAs(bystander, ["2h"]);
      expect(refused.status).toBe(1);
      expect(refused.stderr).toContain("the agent could not save the lease: the disk is full");
    }
    expect(ids()).toEqual(earlier);
    expect(await agent.stop()).toBe(0);
    agent = startAgent("full-disk", stateDir);
    await agent.waitFor(/agent started/, 60_000);
    expect(ids()).toEqual(earlier);
    expect(await agent.stop()).toBe(0);
  });
});
