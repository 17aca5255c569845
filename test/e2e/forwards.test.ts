// Machine traffic through SSH is not a person, with the shipped artifacts: a real sshd, two real
// Jupyter Servers (each run as its own test user), Python's http.server, headless Chromium and
// the bundled agent (one per VM) reporting to the bundled collector (standalone, short policy,
// the default weak-activity-max):
// - p: `ssh -N -L` to Jupyter, a poller on its REST API every 10 s, an idle kernel → stopped
//   after idle-timeout + grace (the forward is judged by the kernel);
// - q: the same forward and poller while cells execute through it → held;
// - r: `ssh -N -L` to http.server, Chromium on a page that reloads itself every 4 s → a regular
//   cadence, weak: stopped;
// - s: `ssh -T host cat` with irregular typing (no pty) → held.
// Issue 39's machine traffic, against a server answering in 100–300 ms (test/support/slow-web.ts),
// each stopped after idle-timeout + grace; the person beside a heartbeat held:
// - slow: Chromium on a page refreshing every 4 s;
// - slots: an HTTP client polling at k·5 s ± 1.25 s (±25 % per slot);
// - heartbeat: Chromium holding a WebSocket that sends a message every second;
// - stops: the 4 s page for about 30 s, then a page that does not refresh, its connection lingering;
// - beside: `ssh -T -L … host cat` carrying the same heartbeat while a person types irregularly → held.
//
// The machine is shared with other tests' sessions: each agent's --etc-root has a passwd with
// only its own user (the remote-sessions signal believes only sessions of accounts it knows),
// its --home-root and --run-root are its own, and the sources that read the whole machine
// (sessions, system, …) are disabled.
import { type ChildProcess, spawn } from "node:child_process";
import { chmod, chown, mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import { chromium, type Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  connectKernel,
  type KernelSession,
  type RunningJupyter,
  startJupyterServer,
  startKernel,
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
import { startSlowWeb } from "../support/slow-web.js";
import { ensureTestUser, freeLoopbackPort, SSH, startSshd, type RunningSshd } from "../support/sshd.js";
import { standaloneCollector, type StandaloneCollector } from "../support/standalone.js";

const CHROMIUM = "/usr/bin/chromium";
const USERS = {
  idle: "wstest25p",
  busy: "wstest25q",
  reload: "wstest25r",
  typing: "wstest25s",
  slow: "wstest39p",
  slots: "wstest39q",
  heartbeat: "wstest39r",
  stops: "wstest39s",
  beside: "wstest39t",
} as const;
type Vm = keyof typeof USERS;
const VMS = Object.keys(USERS) as Vm[];
/** The first test's VMs, and issue 39's. */
const FIRST: Vm[] = ["idle", "busy", "reload", "typing"];
const ISSUE_39: Vm[] = ["slow", "slots", "heartbeat", "stops", "beside"];

let dir: string;
let sshd: RunningSshd;
let setup: StandaloneCollector;
let browser: Browser | undefined;
const jupyter: Partial<Record<Vm, RunningJupyter>> = {};
const procs: Proc[] = [];
const children: ChildProcess[] = [];
const timers: NodeJS.Timeout[] = [];
const kernels: KernelSession[] = [];
const closers: Array<() => void> = [];
let stopped = false;

const delay = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** The VM's user's home: in its agent's own --home-root. */
const homeOf = (vm: Vm) => path.join(dir, `homeroot-${vm}`, USERS[vm]);

/**
 * An /etc with a passwd that has only this user (and root), so the agent sees only its
 * sessions. Passwd homes are read under the directory holding --etc-root: there is none here.
 */
async function etcFor(vm: Vm): Promise<string> {
  const etc = path.join(dir, `etc-${vm}`);
  await mkdir(path.join(etc, "ssh"), { recursive: true });
  const line = (await readFile("/etc/passwd", "utf8")).split("\n").find((entry) => entry.startsWith(`${USERS[vm]}:`))!;
  await writeFile(path.join(etc, "passwd"), `root:x:0:0:root:/root:/bin/bash\n${line}\n`);
  await writeFile(path.join(etc, "ssh", "sshd_config"), "");
  return etc;
}

async function makeHome(vm: Vm): Promise<{ uid: number; gid: number }> {
  const account = await ensureTestUser(USERS[vm]);
  const runtime = path.join(homeOf(vm), ".local", "share", "jupyter", "runtime");
  await mkdir(runtime, { recursive: true });
  let at = homeOf(vm);
  for (const part of ["", ".local", "share", "jupyter", "runtime"]) {
    at = path.join(at, part);
    await chown(at, account.uid, account.gid);
    await chmod(at, 0o700);
  }
  return account;
}

function startAgent(vm: Vm, etc: string): void {
  const own = (name: string) => path.join(dir, `${name}-${vm}`);
  procs.push(
    start(
      agentBundle,
      setup.agentRunArgs("e2e", vm, [
        "--state-dir",
        own("state"),
        "--socket",
        `${own("agent")}.sock`,
        "--etc-root",
        etc,
        "--home-root",
        own("homeroot"),
        "--run-root",
        own("run"),
        "--dev-root",
        own("dev"),
      ]),
      { WS_AGENT_TOKEN: setup.token("e2e", vm), WS_AGENT_CONFIG: path.join(dir, "agent.yaml") },
    ),
  );
}

/** `ssh -N -L` from a free local port to 127.0.0.1:port, as `user`; resolves with the local port. */
async function forward(user: string, port: number): Promise<number> {
  const local = await freeLoopbackPort();
  children.push(
    spawn(
      SSH,
      [...sshd.sshNoTtyArgs(user, [], ["ExitOnForwardFailure=yes"]), "-N", "-L", `${local}:127.0.0.1:${port}`],
      {
        stdio: "ignore",
      },
    ),
  );
  await eventually(
    () =>
      new Promise<true | undefined>((resolve) => {
        const request = http.get({ host: "127.0.0.1", port: local, path: "/" }, (response) => {
          response.resume();
          resolve(true);
        });
        request.on("error", () => resolve(undefined));
      }),
    30_000,
    `the forward of ${user} to port ${port}`,
  );
  return local;
}

/** A JupyterLab tab's polling: GET api/kernels every 10 s on one keep-alive connection. */
function pollEvery10s(local: number, token: string): { answered: () => number } {
  const agent = new http.Agent({ keepAlive: true });
  let answered = 0;
  const poll = () =>
    http
      .get(
        { host: "127.0.0.1", port: local, path: "/api/kernels", agent, headers: { Authorization: `token ${token}` } },
        (response) => {
          response.resume();
          if (response.statusCode === 200) answered++;
        },
      )
      .on("error", () => {});
  poll();
  timers.push(setInterval(poll, 10_000));
  return { answered: () => answered };
}

interface VmView {
  state: string;
  explanation: string;
}

async function vmView(name: Vm): Promise<VmView | undefined> {
  const { body } = await getText(`http://127.0.0.1:${setup.httpPort}/api/vms`);
  return (JSON.parse(body).vms as Array<VmView & { name: string }>).find((entry) => entry.name === name);
}

async function vmDetail(name: Vm): Promise<string> {
  return (await getText(`http://127.0.0.1:${setup.httpPort}/api/vms/e2e/${name}`)).body;
}

beforeAll(async () => {
  requireBundles();
  if (process.getuid?.() !== 0)
    throw new Error("this test runs Jupyter and sshd sessions as test users: run it as root");
  dir = await mkdtemp(path.join(os.tmpdir(), "ws25-e2e-forwards-"));
  await chmod(dir, 0o755);
  for (const vm of VMS) {
    for (const name of ["homeroot", "run", "dev"]) await mkdir(path.join(dir, `${name}-${vm}`));
  }
  await writeFile(
    path.join(dir, "agent.yaml"),
    "disabledSignals: [sessions, system, gpu, code_server, inhibitors, desktop, disk]\n",
  );
  sshd = await startSshd({ users: Object.values(USERS) });
  for (const vm of ["idle", "busy"] as const) {
    const account = await makeHome(vm);
    jupyter[vm] = await startJupyterServer({
      runtimeDir: path.join(homeOf(vm), ".local", "share", "jupyter", "runtime"),
      runAs: account,
    });
  }
  for (const vm of ["reload", "typing", ...ISSUE_39] as const) await makeHome(vm);
  setup = await standaloneCollector(dir, {
    policyDefaults: { autostop: "enabled", "idle-timeout": "30s", "grace-period": "10s" },
  });
  procs.push(start(collectorBundle, ["serve", "--config", setup.configFile]));
}, 240_000);

afterAll(async () => {
  stopped = true;
  for (const timer of timers) clearInterval(timer);
  for (const kernel of kernels) kernel.close();
  await browser?.close();
  for (const child of children) child.kill("SIGTERM");
  for (const close of closers) close();
  await Promise.all(procs.splice(0).map((proc) => proc.stop()));
  for (const server of Object.values(jupyter)) await server?.stop();
  await sshd?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe("SSH forwards and machine traffic, as shipped", () => {
  it("stops the idle kernel's forward and the self-reloading page; holds executing cells and typing", async () => {
    // p: an idle kernel, polled through the forward.
    const idle = jupyter.idle!;
    await startKernel(idle);
    const idleLocal = await forward(USERS.idle, Number(new URL(idle.url).port));
    const idlePolls = pollEvery10s(idleLocal, idle.token);

    // q: the same, and a cell executed through the forward every 3 s.
    const busy = jupyter.busy!;
    const kernel = await startKernel(busy);
    const busyLocal = await forward(USERS.busy, Number(new URL(busy.url).port));
    pollEvery10s(busyLocal, busy.token);
    const session = await connectKernel({ url: `http://127.0.0.1:${busyLocal}/`, token: busy.token }, kernel.id);
    kernels.push(session);
    let executed = 0;
    timers.push(
      setInterval(() => {
        void session.execute("sum(range(10**6))").then(
          () => executed++,
          () => {},
        );
      }, 3_000),
    );

    // r: a page reloading itself every 4 s through a forward.
    const web = path.join(dir, "web");
    await mkdir(web);
    await writeFile(
      path.join(web, "index.html"),
      `<!doctype html><html><head><meta http-equiv="refresh" content="4"><title>Dashboard</title></head><body>${"loss 0.1 ".repeat(150)}</body></html>\n`,
    );
    const webPort = await freeLoopbackPort();
    children.push(
      spawn(
        "/usr/bin/python3",
        ["-m", "http.server", "--protocol", "HTTP/1.1", "--bind", "127.0.0.1", "--directory", web, String(webPort)],
        {
          stdio: "ignore",
        },
      ),
    );
    await delay(1_000);
    const reloadLocal = await forward(USERS.reload, webPort);
    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true });
    const page = await (await browser.newContext()).newPage();
    await page.goto(`http://127.0.0.1:${reloadLocal}/`);

    // s: a person typing into `ssh -T host cat`: words, then pauses of 2 to 20 s.
    const typist = spawn(SSH, sshd.sshNoTtyArgs(USERS.typing, ["cat"]), { stdio: ["pipe", "ignore", "ignore"] });
    children.push(typist);
    const random = mulberry32(25);
    void (async () => {
      while (!stopped) {
        for (const key of "rerun the sweep ".slice(0, 4 + Math.floor(random() * 12))) {
          typist.stdin!.write(key);
          await delay(60 + random() * 240);
        }
        await delay(2_000 + random() * 18_000);
      }
    })();

    for (const vm of FIRST) startAgent(vm, await etcFor(vm));
    const seen = Object.fromEntries(FIRST.map((vm) => [vm, [] as string[]])) as Record<Vm, string[]>;
    const details = Object.fromEntries(FIRST.map((vm) => [vm, [] as string[]])) as Record<Vm, string[]>;
    const watch = async () => {
      for (const vm of FIRST) {
        const view = await vmView(vm);
        if (view) seen[vm].push(view.state);
        if (view?.state === "StoppingPending") details[vm].push(await vmDetail(vm));
      }
    };
    await eventually(
      async () => {
        await watch();
        return FIRST.every((vm) => seen[vm].includes("Active")) ? true : undefined;
      },
      90_000,
      "all four VMs Active",
    );
    const began = Date.now();
    const gone = (vm: Vm) => seen[vm].some((state) => state === "Stopping" || state === "Stopped");
    await eventually(
      async () => {
        await watch();
        // Past idle-timeout + grace + a margin for the held ones, and both idle ones stopped.
        return gone("idle") && gone("reload") && Date.now() - began > 60_000 ? true : undefined;
      },
      240_000,
      `the idle kernel's and the reloading page's VMs to stop (seen: ${JSON.stringify(seen)})`,
    );

    // The forward to Jupyter was judged by the kernel, the reloads were a cadence.
    expect(details.idle.join("\n")).toMatch(/forward to Jupyter server \d+: judged by the kernel, idle/);
    expect(details.reload.join("\n")).toMatch(/regular traffic every [345]s \(a page reloading itself or a poller\)/);
    // They really ran: the tab polled, cells executed, the page reloaded.
    expect(idlePolls.answered()).toBeGreaterThanOrEqual(4);
    expect(executed).toBeGreaterThanOrEqual(10);
    // Executing cells and typing held their VMs: never warned.
    for (const vm of ["busy", "typing"] as const) {
      const sinceActive = seen[vm].slice(seen[vm].indexOf("Active"));
      expect(sinceActive.filter((state) => state !== "Active")).toEqual([]);
      expect((await vmView(vm))!.state).toBe("Active");
    }
  }, 420_000);

  it("issue 39: a slow page, a slot-jittered poller, a heartbeat and a page that stopped are stopped; typing beside a heartbeat is held", async () => {
    const web = await startSlowWeb(await freeLoopbackPort());
    closers.push(web.close);
    browser ??= await chromium.launch({ executablePath: CHROMIUM, headless: true });
    const open = async (vm: Vm, pagePath: string, local?: number) => {
      const port = local ?? (await forward(USERS[vm], web.port));
      const tab = await (await browser!.newContext()).newPage();
      await tab.goto(`http://127.0.0.1:${port}${pagePath}`);
    };
    await open("slow", "/page.html?every=4");
    await open("heartbeat", "/heartbeat.html?every=1");
    await open("stops", "/stops.html?every=4&left=8");
    // A poller on a schedule of slots: k·5 s ± 1.25 s, one keep-alive connection.
    const slotsLocal = await forward(USERS.slots, web.port);
    const agent = new http.Agent({ keepAlive: true });
    const random = mulberry32(39);
    let polled = 0;
    void (async () => {
      const t0 = Date.now();
      for (let slot = 1; !stopped; slot++) {
        await delay(Math.max(0, t0 + slot * 5_000 + (random() * 2 - 1) * 1_250 - Date.now()));
        http
          .get({ host: "127.0.0.1", port: slotsLocal, path: "/api/query?panel=0", agent }, (response) => {
            response.resume();
            polled++;
          })
          .on("error", () => {});
      }
    })();
    // A person typing into `cat` in a session that also carries a heartbeat page's WebSocket.
    const besideLocal = await freeLoopbackPort();
    const beside = spawn(
      SSH,
      sshd.sshNoTtyArgs(
        USERS.beside,
        ["cat"],
        ["ExitOnForwardFailure=yes", `LocalForward=${besideLocal} 127.0.0.1:${web.port}`],
      ),
      { stdio: ["pipe", "ignore", "ignore"] },
    );
    children.push(beside);
    await eventually(
      () =>
        new Promise<true | undefined>((resolve) => {
          http
            .get({ host: "127.0.0.1", port: besideLocal, path: "/" }, (response) => {
              response.resume();
              resolve(true);
            })
            .on("error", () => resolve(undefined));
        }),
      30_000,
      "the typing session's forward",
    );
    await open("beside", "/heartbeat.html?every=1", besideLocal);
    const random2 = mulberry32(2039);
    void (async () => {
      while (!stopped) {
        for (const key of "look at the loss ".slice(0, 4 + Math.floor(random2() * 12))) {
          beside.stdin!.write(key);
          await delay(60 + random2() * 240);
        }
        await delay(2_000 + random2() * 12_000);
      }
    })();

    for (const vm of ISSUE_39) startAgent(vm, await etcFor(vm));
    const seen = Object.fromEntries(ISSUE_39.map((vm) => [vm, [] as string[]])) as Record<Vm, string[]>;
    const watch = async () => {
      for (const vm of ISSUE_39) {
        const view = await vmView(vm);
        if (view) seen[vm].push(view.state);
      }
    };
    await eventually(
      async () => {
        await watch();
        return ISSUE_39.every((vm) => seen[vm].includes("Active")) ? true : undefined;
      },
      90_000,
      "issue 39's VMs Active",
    );
    const gone = (vm: Vm) => seen[vm].some((state) => state === "Stopping" || state === "Stopped");
    const machines: Vm[] = ["slow", "slots", "heartbeat", "stops"];
    await eventually(
      async () => {
        await watch();
        return machines.every(gone) ? true : undefined;
      },
      360_000,
      `the machine-traffic VMs to stop (seen: ${JSON.stringify(seen)})`,
    );
    // They really talked: the poller was answered on its slots.
    expect(polled).toBeGreaterThanOrEqual(10);
    // The person typing beside a heartbeat was never warned.
    const sinceActive = seen.beside.slice(seen.beside.indexOf("Active"));
    expect(sinceActive.filter((state) => state !== "Active")).toEqual([]);
    expect((await vmView("beside"))!.state).toBe("Active");
  }, 600_000);
});
