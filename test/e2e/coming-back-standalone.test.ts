/**
 * Issue 24 in standalone mode, with real parts: a standalone collector whose stop and start are
 * argv commands (standalone.stopCommand / startCommand, as `virsh shutdown` / `virsh start`
 * would be), the shipped agent, and Debian's OpenSSH sshd for the logins.
 *
 * idle → the stop command runs and the last stop is recorded → the start link's page (GET
 * changes nothing) → its POST runs the start command once → the new boot's agent connects →
 * the first SSH login on a real terminal shows the welcome back (why, when, idle, last
 * activity, ws-lease, the dispute link) → the agent restarted in the same boot does not show it
 * again, nor does a second login. Then `ws-collector whatif --disputes` lists the dispute.
 */
import { spawnSync } from "node:child_process";
import {
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  unlinkSync,
  writeFileSync,
} from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startFrozenAgent } from "../support/kube-agent.js";
import {
  collectorBundle,
  eventually,
  freePort,
  getText,
  requireBundles,
  start,
  type Proc,
} from "../support/process.js";
import { spawnPty } from "../support/pty.js";
import { SSH, ensureTestUser, startSshd, type RunningSshd } from "../support/sshd.js";

const NS = "users";
const VM = "welcome";
const USER = "wstest24w";
const STOP_WAIT_MS = 4 * 60_000;

let dir: string;
let sshd: RunningSshd;
let collector: Proc;
let httpPort: number;
let grpcPort: number;
let keyFile: string;
const agents: Proc[] = [];

function ws(args: string[]): string {
  const result = spawnSync(process.execPath, [collectorBundle, ...args], { encoding: "utf8", timeout: 30_000 });
  if (result.status !== 0) throw new Error(`ws-collector ${args.join(" ")} failed: ${result.stderr}`);
  return result.stdout;
}

/** A command that records it ran (the file named by its last argument), as virsh would start or stop the VM. */
function recordingCommand(file: string): string[] {
  return [process.execPath, "-e", "require('fs').appendFileSync(process.argv[1], Date.now() + '\\n')", file];
}

/** The agent's machine: the frozen one, with this boot's id, and for the new boot the real ptys and utmp. */
function agentFor(name: string, bootId: string, realTerminals: boolean): Proc {
  const root = path.join(dir, name);
  const agent = startFrozenAgent({
    root,
    namespace: NS,
    name: VM,
    grpcPort,
    token: ws(["token", "--key-file", keyFile, "--namespace", NS, "--name", VM]).trim(),
    prepare: (machine) => {
      mkdirSync(path.join(machine, "proc/sys/kernel/random"), { recursive: true });
      writeFileSync(path.join(machine, "proc/sys/kernel/random/boot_id"), `${bootId}\n`);
      if (!realTerminals) return;
      // Only the test user is a person on this machine: the agent writes to no one else's terminal.
      const passwd = spawnSync("getent", ["passwd", "root", USER], { encoding: "utf8" }).stdout;
      writeFileSync(path.join(machine, "etc/passwd"), passwd);
      // The host's /dev and utmp, linked (a second start in the same root finds the links there).
      const dev = path.join(machine, "dev");
      if (lstatSync(dev).isSymbolicLink()) unlinkSync(dev);
      else rmSync(dev, { recursive: true, force: true });
      symlinkSync("/dev", dev);
      const utmp = path.join(machine, "run/utmp");
      if (existsSync(utmp) || lstatSync(utmp, { throwIfNoEntry: false })) unlinkSync(utmp);
      symlinkSync("/run/utmp", utmp);
    },
  });
  agents.push(agent.proc);
  return agent.proc;
}

beforeAll(async () => {
  requireBundles();
  dir = mkdtempSync(path.join(os.tmpdir(), "ws-welcome-"));
  await ensureTestUser(USER);
  sshd = await startSshd({ users: [USER] });
  keyFile = path.join(dir, "token.key");
  writeFileSync(keyFile, ws(["keygen"]), { mode: 0o600 });
  grpcPort = await freePort();
  httpPort = await freePort();
  const config = path.join(dir, "collector.yaml");
  writeFileSync(
    config,
    `mode: standalone
grpc: { listen: "127.0.0.1:${grpcPort}" }
http: { listen: "127.0.0.1:${httpPort}" }
tokenKeyFile: ${JSON.stringify(keyFile)}
reportInterval: 1s
notifications: { publicUrl: "http://127.0.0.1:${httpPort}" }
standalone:
  stopCommand: ${JSON.stringify(recordingCommand(path.join(dir, "{name}.stopped")))}
  startCommand: ${JSON.stringify(recordingCommand(path.join(dir, "{name}.started")))}
  vms:
    ${NS}/${VM}: { labels: { "platform.example.com/user": ${USER} } }
policy:
  defaults:
    autostop: enabled
    mode: enforce
    idle-timeout: 60s
    grace-period: 30s
`,
  );
  collector = start(collectorBundle, ["serve", "--config", config]);
  await collector.waitFor(/collector serving/, 60_000);
}, 120_000);

afterAll(async () => {
  for (const agent of agents) await agent.stop();
  await collector?.stop();
  await sshd?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

async function postForm(url: string, form: string): Promise<{ status: number; body: string }> {
  const res = await fetch(url, {
    method: "POST",
    body: form,
    redirect: "manual",
    headers: { "content-type": "application/x-www-form-urlencoded" },
  });
  return { status: res.status, body: await res.text() };
}

describe("coming back in standalone mode (issue 24)", { timeout: 8 * 60_000 }, () => {
  it("stop command → start link → start command once → the first SSH login shows the welcome back, once", async () => {
    const before = agentFor("boot-1", "11111111-1111-4111-8111-111111111111", false);
    await before.waitFor(/connected to collector/, 60_000);
    await eventually(() => existsSync(path.join(dir, `${VM}.stopped`)), STOP_WAIT_MS, "the stop command");
    await before.stop(); // the guest shut down

    // The VM page of a stopped VM carries its start link.
    const vmPage = await eventually(
      async () => {
        const page = (await getText(`http://127.0.0.1:${httpPort}/vm/${NS}/${VM}`)).body;
        return page.includes('id="start-link"') ? page : undefined;
      },
      30_000,
      "the start link on the VM page",
    );
    const startUrl = /<div class="box" id="start-link">[^<]*<a href="([^"]+)"/
      .exec(vmPage)![1]!
      .replaceAll("&amp;", "&");
    expect(startUrl).toMatch(new RegExp(`^http://127\\.0\\.0\\.1:${httpPort}/start/${NS}/${VM}\\?t=s1\\.`));

    // GET shows why it stopped, and changes nothing.
    for (let i = 0; i < 2; i++) {
      const page = (await getText(startUrl)).body;
      expect(page).toContain('data-status="stopped"');
      expect(page).toContain('<button type="submit" id="start">');
      expect(page).toMatch(/<dd id="why">idle for/);
      expect(page).toContain(`<dd id="owner">${USER}</dd>`);
    }
    expect(existsSync(path.join(dir, `${VM}.started`))).toBe(false);

    const token = new URL(startUrl).searchParams.get("t")!;
    const base = startUrl.slice(0, startUrl.indexOf("?"));

    // Two POSTs: the start command runs once.
    const [first, second] = await Promise.all([postForm(base, `t=${token}`), postForm(base, `t=${token}`)]);
    expect([first.status, second.status]).toEqual([303, 303]);
    await eventually(() => existsSync(path.join(dir, `${VM}.started`)), 30_000, "the start command");
    expect(
      readFileSync(path.join(dir, `${VM}.started`), "utf8")
        .trim()
        .split("\n"),
    ).toHaveLength(1);
    expect(collector.output()).toMatch(/event Started: start requested by the start link sent to wstest24w via link/);
    const starting = (await getText(startUrl)).body;
    expect(starting).toContain('data-status="starting"');
    expect(starting).toContain("Start command run");

    // The new boot: its agent connects and waits for the first login.
    const after = agentFor("boot-2", "22222222-2222-4222-8222-222222222222", true);
    await after.waitFor(/welcome stop-\d+: waiting for the first login of this boot/, 60_000);
    let disputeUrl = "";
    const login = spawnPty(SSH, sshd.sshArgs(USER));
    try {
      const shown = await login.waitFor(/ws: welcome back[^\r\n]*[\s\S]*?Say so in one click: (\S+)/, {
        timeoutMs: 60_000,
      });
      const text = shown[0];
      expect(text).toMatch(/this VM was stopped by ws on \d{4}-\d\d-\d\d \d\d:\d\d/);
      expect(text).toMatch(/Why: idle for [^\r\n]*\(idle-timeout 1m\)/);
      expect(text).toMatch(/It had been idle \d+m?/);
      expect(text).toContain('ws-lease 8h --reason "what you are running"');
      disputeUrl = shown[1]!;
      expect(disputeUrl).toMatch(new RegExp(`^http://127\\.0\\.0\\.1:${httpPort}/start/${NS}/${VM}\\?t=s1\\.`));
      await after.waitFor(/welcome stop-\d+: shown on pts\/\d+/, 30_000);
      const welcomeFile = JSON.parse(readFileSync(path.join(dir, "boot-2/run/ws-agent/welcome.json"), "utf8"));
      expect(welcomeFile.title).toContain("welcome back");
    } finally {
      login.write("exit\r");
      await login.close();
    }

    // The agent restarted in the same boot gets the welcome again from the collector: shown once per stop.
    await after.stop();
    const restarted = agentFor("boot-2", "22222222-2222-4222-8222-222222222222", true);
    await restarted.waitFor(/welcome stop-\d+: already shown \(once per stop\)/, 60_000);
    const again = spawnPty(SSH, sshd.sshArgs(USER, ["echo", "second-login-done;", "sleep", "3"]));
    try {
      await again.waitFor(/second-login-done/, { timeoutMs: 60_000 });
      await again.exited;
      expect(again.output()).not.toContain("welcome back");
    } finally {
      await again.close();
    }
    expect(restarted.output()).not.toMatch(/welcome stop-\d+: shown/);

    // "This stop was a mistake", from the welcome's link: kept with the stop, and whatif lists it.
    const disputeToken = new URL(disputeUrl).searchParams.get("t")!;
    const disputed = await postForm(
      base,
      `t=${disputeToken}&dispute=1&what=${encodeURIComponent("compiling a kernel")}`,
    );
    expect(disputed.body).toContain("Your report that this stop was a mistake is kept.");
    const disputes = await getText(`http://127.0.0.1:${httpPort}/api/disputes`);
    expect(disputes.status).toBe(200);
    const disputesFile = path.join(dir, "disputes.json");
    writeFileSync(disputesFile, disputes.body);
    const listed = spawnSync(process.execPath, [collectorBundle, "whatif", "--disputes", disputesFile, "--json"], {
      encoding: "utf8",
    });
    expect(listed.status, listed.stderr).toBe(0);
    const json = JSON.parse(listed.stdout) as { disputes: Array<Record<string, unknown>> };
    expect(json.disputes).toHaveLength(1);
    expect(json.disputes[0]).toMatchObject({
      vm: `${NS}/${VM}`,
      what: "compiling a kernel",
      knob: { name: "idle-timeout" },
    });
    const table = spawnSync(process.execPath, [collectorBundle, "whatif", "--disputes", disputesFile], {
      encoding: "utf8",
    });
    expect(table.stdout).toMatch(/users\/welcome .*compiling a kernel/);
    expect(table.stdout).toMatch(/--idle-timeout \d/);

    // The starting page: ready once the new boot's agent reports (Report of the new stream).
    await eventually(
      async () => (await getText(startUrl)).body.includes('data-stage="agent" data-state="done"'),
      30_000,
      "the agent stage done",
    );
  });
});
