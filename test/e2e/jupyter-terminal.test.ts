// A Jupyter terminal's output is not a person, with the shipped artifacts: a real Jupyter
// Server (run as a test user) with two terminals that print the date every second; the bundled
// agent for two VMs reporting to the bundled collector (standalone, stops logged). One terminal
// is left alone: its VM gets the notice after idle-timeout and is stopped after the grace
// period. The other gets Enter every two seconds through the terminal websocket, as a browser
// sends it: its VM stays Active.
//
// The machine is shared with other tests' terminals: each agent's --dev-root holds only its
// own terminal's pty, bind-mounted from /dev/pts (needs root, as the test users do), and the
// sources that read the whole machine (system, remote sessions, …) are disabled.
import { execFileSync } from "node:child_process";
import { chmod, chown, mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  connectTerminal,
  startJupyterServer,
  startTerminal,
  type RunningJupyter,
  type TerminalSession,
} from "../support/jupyter.js";
import {
  agentBundle,
  collectorBundle,
  eventually,
  getText,
  requireBundles,
  start,
  type Proc,
} from "../support/process.js";
import { ensureTestUser } from "../support/sshd.js";
import { standaloneCollector, type StandaloneCollector } from "../support/standalone.js";

const USER = "wstest16e";
let dir: string;
let server: RunningJupyter;
let setup: StandaloneCollector;
const procs: Proc[] = [];
const mounts: string[] = [];
const timers: NodeJS.Timeout[] = [];
const tabs: TerminalSession[] = [];

interface Terminal {
  name: string;
  tab: TerminalSession;
  pty: string;
}

async function openTerminal(marker: string): Promise<Terminal> {
  const { name } = await startTerminal(server);
  const tab = await connectTerminal(server, name);
  tabs.push(tab);
  const ttyFile = path.join(dir, `tty-${marker}`);
  tab.type(`tty > ${ttyFile}; (while :; do date; sleep 1; done) &\r`);
  const pty = await eventually(
    async () => {
      const text = (await readFile(ttyFile, "utf8").catch(() => "")).trim();
      return /^\/dev\/pts\/\d+$/.test(text) ? text.slice("/dev/".length) : undefined;
    },
    30_000,
    `terminal ${name} to run its command (it printed: ${tab.output().slice(-200)})`,
  );
  return { name, tab, pty };
}

/** A /dev with only this terminal's pty in it (and no input devices). */
async function devRootFor(terminal: Terminal): Promise<string> {
  const dev = path.join(dir, `dev-${terminal.name}`);
  await mkdir(path.join(dev, "pts"), { recursive: true });
  const node = path.join(dev, terminal.pty);
  await writeFile(node, "");
  execFileSync("mount", ["--bind", `/dev/${terminal.pty}`, node]);
  mounts.push(node);
  return dev;
}

function startAgent(vm: string, dev: string): Proc {
  const empty = path.join(dir, "empty");
  const proc = start(
    agentBundle,
    setup.agentRunArgs("e2e", vm, [
      "--state-dir",
      path.join(dir, `state-${vm}`),
      "--socket",
      path.join(dir, `${vm}.sock`),
      "--dev-root",
      dev,
      "--run-root",
      empty,
      "--home-root",
      empty,
      "--jupyter-url",
      `${server.url}?token=${server.token}`,
    ]),
    { WS_AGENT_TOKEN: setup.token("e2e", vm), WS_AGENT_CONFIG: path.join(dir, "agent.yaml") },
  );
  procs.push(proc);
  return proc;
}

async function vm(name: string): Promise<{ state: string; explanation: string } | undefined> {
  const { body } = await getText(`http://127.0.0.1:${setup.httpPort}/api/vms`);
  return (JSON.parse(body).vms as Array<{ name: string; state: string; explanation: string }>).find(
    (entry) => entry.name === name,
  );
}

beforeAll(async () => {
  requireBundles();
  if (process.getuid?.() !== 0)
    throw new Error("this test bind-mounts ptys and runs Jupyter as a test user: run it as root");
  const account = await ensureTestUser(USER);
  dir = await mkdtemp(path.join(os.tmpdir(), "ws16-e2e-jterm-"));
  await chmod(dir, 0o777);
  await mkdir(path.join(dir, "empty"));
  await mkdir(path.join(dir, "runtime"));
  await chown(path.join(dir, "runtime"), account.uid, account.gid);
  await writeFile(
    path.join(dir, "agent.yaml"),
    "disabledSignals: [system, gpu, code_server, inhibitors, remote_sessions, desktop, disk]\n",
  );
  server = await startJupyterServer({
    runtimeDir: path.join(dir, "runtime"),
    runAs: { uid: account.uid, gid: account.gid },
    shell: "/bin/bash",
  });
  setup = await standaloneCollector(dir, {
    policyDefaults: { autostop: "enabled", "idle-timeout": "20s", "grace-period": "5s", "weak-activity-max": "5s" },
  });
  procs.push(start(collectorBundle, ["serve", "--config", setup.configFile]));
}, 180_000);

afterAll(async () => {
  for (const timer of timers) clearInterval(timer);
  for (const tab of tabs) tab.close();
  await Promise.all(procs.splice(0).map((proc) => proc.stop()));
  for (const node of mounts) execFileSync("umount", [node]);
  await server?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe("Jupyter terminals, as shipped", () => {
  it("stops the VM whose terminal only prints; typing into the other holds its VM", async () => {
    const alone = await openTerminal("alone");
    const typed = await openTerminal("typed");
    timers.push(setInterval(() => typed.tab.type("\r"), 2_000));
    startAgent("jt-alone", await devRootFor(alone));
    startAgent("jt-typed", await devRootFor(typed));
    await eventually(
      async () => (await vm("jt-alone"))?.state === "Active" && (await vm("jt-typed"))?.state === "Active",
      60_000,
      "both VMs Active",
    );

    const stopped = await eventually(
      async () => {
        const entry = await vm("jt-alone");
        return entry && ["Stopping", "Stopped"].includes(entry.state) ? entry : undefined;
      },
      120_000,
      "the VM of the printing terminal to be stopped",
    );
    expect(stopped.state).toMatch(/Stopping|Stopped/);
    expect(alone.tab.output()).toMatch(/\d\d:\d\d:\d\d/); // it did print, every second
    // Its twin, typed into, was never even warned.
    expect(await vm("jt-typed")).toMatchObject({ state: "Active" });
    expect((await vm("jt-typed"))!.explanation).not.toMatch(/notice/);
  }, 300_000);
});
