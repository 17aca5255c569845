/**
 * Records what the remote-sessions signal sees of real programs behind a real sshd: the session
 * process's /proc/PID/io counters once a second (sizes and times only, never content), for the
 * traffic-cadence classifier's fixtures (packages/guest-agent/test/fixtures/remote-sessions/traffic/).
 *
 *   node bench/run.mjs capture-traffic [--minutes N] [--only name,name]
 *
 * Every scenario runs at once on its own test account and its own ssh connection:
 * - reload-10s / reload-30s: `ssh -N -L` to Python's http.server, headless Chromium on a page
 *   with <meta http-equiv="refresh"> every 10 s / 30 s;
 * - poller-10s: an HTTP client through `ssh -N -L` fetching a JSON file every 10 s exactly;
 *   poller-jitter: the same every 10 s ± 2 s;
 * - typing-irregular: `ssh -T host cat` fed keys at human rates: words, bursts, pauses of
 *   seconds to minutes (a seeded generator, so a rerun types the same);
 * - typing-steady: the same session kind with a person typing at a steady rhythm for 10 minutes;
 * - keepalive: `ssh -T host cat` with nothing sent and ServerAliveInterval=15.
 * Issue 39's machine traffic, read every 100 ms (the tests resample it at every phase of the
 * agent's one-second tick), against a server that answers in 100–300 ms:
 * - slow-page-10s: Chromium on a page with <meta http-equiv="refresh" content="10">;
 * - dashboard-refresh: a Grafana-style page whose script fetches its four panels every 10 s;
 * - poller-slot-jitter: an HTTP client fetching at k·10 s ± 2.5 s (±25% per slot, gaps ±50%);
 * - heartbeat-1s: Chromium on a page holding a WebSocket (the `ws` server) that pings every
 *   second (webpack HMR, a Jupyter kernel, VS Code's port-forward keep-alives);
 * - page-stops: the 10 s page for 3 minutes, then a page that does not refresh, its
 *   keep-alive connection left open.
 * It also writes the forward's /proc files (fd links, the matching /proc/net/tcp lines) of
 * poller-10s for the forward parser's fixtures.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdirSync, readdirSync, readFileSync, readlinkSync, writeFileSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import { chromium } from "playwright-core";
import { startSlowWeb } from "../test/support/slow-web.js";
import { freeLoopbackPort, SSH, startSshd } from "../test/support/sshd.js";

const OUT = path.resolve("packages/guest-agent/test/fixtures/remote-sessions/traffic");
const argv = process.argv.slice(2);
const minutesArg = argv.indexOf("--minutes");
const minutes = minutesArg >= 0 ? Number(argv[minutesArg + 1]) : 10;
const onlyArg = argv.indexOf("--only");
const only = onlyArg >= 0 ? new Set(argv[onlyArg + 1]!.split(",")) : undefined;

interface Scenario {
  name: string;
  user: string;
  description: string;
  /** How often the session's counters are read; 1000 unless said. */
  sampleIntervalMs?: number;
  start(): Promise<() => void>;
}

const children: ChildProcess[] = [];
const stops: Array<() => void> = [];

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

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** The user's sshd session process: "sshd: USER" or "sshd: USER@notty", owned by USER. */
function sessionPid(user: string): number | undefined {
  for (const pid of readdirSync("/proc").filter((name) => /^\d+$/.test(name))) {
    try {
      const title = readFileSync(`/proc/${pid}/cmdline`, "utf8").replace(/[\0 ]+$/, "");
      if (title === `sshd: ${user}` || title === `sshd: ${user}@notty`) return Number(pid);
    } catch {}
  }
  return undefined;
}

async function waitForSession(user: string): Promise<number> {
  for (let i = 0; i < 200; i++) {
    const pid = sessionPid(user);
    if (pid !== undefined) return pid;
    await sleep(100);
  }
  throw new Error(`no sshd session process for ${user}`);
}

function readIo(pid: number): number[] {
  const fields = new Map<string, number>();
  for (const line of readFileSync(`/proc/${pid}/io`, "utf8").split("\n")) {
    const match = /^(\w+):\s+(\d+)$/.exec(line);
    if (match) fields.set(match[1]!, Number(match[2]));
  }
  return ["rchar", "wchar", "syscr", "syscw"].map((name) => fields.get(name)!);
}

async function main(): Promise<void> {
  const users = [
    ...["wstest25a", "wstest25b", "wstest25c", "wstest25d", "wstest25e", "wstest25f", "wstest25g"],
    ...["wstest39a", "wstest39b", "wstest39c", "wstest39d", "wstest39e"],
  ];
  const sshd = await startSshd({ users });
  const dir = await mkdtemp(path.join(os.tmpdir(), "ws25-capture-"));
  const webRoot = path.join(dir, "web");
  mkdirSync(webRoot);
  for (const seconds of [10, 30]) {
    await writeFile(
      path.join(webRoot, `reload-${seconds}.html`),
      `<!doctype html><html><head><meta http-equiv="refresh" content="${seconds}"><title>Dashboard</title></head>` +
        `<body><h1>Training curves</h1><p>${"loss 0.123 ".repeat(200)}</p></body></html>\n`,
    );
  }
  await writeFile(
    path.join(webRoot, "status.json"),
    `${JSON.stringify({ runs: Array(40).fill({ step: 1, loss: 0.5 }) })}\n`,
  );
  const webPort = await freeLoopbackPort();
  const web = spawn(
    "/usr/bin/python3",
    ["-m", "http.server", "--protocol", "HTTP/1.1", "--bind", "127.0.0.1", "--directory", webRoot, String(webPort)],
    {
      stdio: "ignore",
    },
  );
  children.push(web);
  await sleep(1500);

  const forward = async (user: string): Promise<number> => {
    const local = await freeLoopbackPort();
    children.push(
      spawn(
        SSH,
        sshd.sshNoTtyArgs(user, [], ["ExitOnForwardFailure=yes"]).concat(["-N", "-L", `${local}:127.0.0.1:${webPort}`]),
        {
          stdio: "ignore",
        },
      ),
    );
    await waitForSession(user);
    await sleep(500);
    return local;
  };
  // A server that answers in 100–300 ms (a dashboard's queries, a page rendered per request).
  const slow = await startSlowWeb(await freeLoopbackPort());
  const slowPort = slow.port;
  const slowForward = async (user: string): Promise<number> => {
    const local = await freeLoopbackPort();
    children.push(
      spawn(
        SSH,
        sshd
          .sshNoTtyArgs(user, [], ["ExitOnForwardFailure=yes"])
          .concat(["-N", "-L", `${local}:127.0.0.1:${slowPort}`]),
        { stdio: "ignore" },
      ),
    );
    await waitForSession(user);
    await sleep(500);
    return local;
  };
  const browser = await chromium.launch({ executablePath: "/usr/bin/chromium", headless: true });

  const reload = (seconds: number, user: string): Scenario => ({
    name: `reload-${seconds}s`,
    user,
    description: `ssh -N -L to Python's http.server (HTTP/1.1, keep-alive); headless Chromium on a page with <meta http-equiv="refresh" content="${seconds}">`,
    async start() {
      const local = await forward(user);
      const context = await browser.newContext();
      const page = await context.newPage();
      await page.goto(`http://127.0.0.1:${local}/reload-${seconds}.html`);
      return () => void context.close();
    },
  });
  const poller = (name: string, user: string, jitterMs: number): Scenario => ({
    name,
    user,
    description:
      jitterMs === 0
        ? "ssh -N -L to Python's http.server (HTTP/1.1, keep-alive); an HTTP client (keep-alive agent) fetching a JSON file every 10 s exactly"
        : `the same poller every 10 s ± ${jitterMs / 1000} s (uniform)`,
    async start() {
      const local = await forward(user);
      const agent = new http.Agent({ keepAlive: true });
      const random = mulberry32(25);
      let stopped = false;
      const fetchOnce = () =>
        http
          .get({ host: "127.0.0.1", port: local, path: "/status.json", agent }, (response) => response.resume())
          .on("error", () => {});
      if (jitterMs === 0) {
        fetchOnce();
        const timer = setInterval(fetchOnce, 10_000);
        return () => clearInterval(timer);
      }
      const loop = async () => {
        while (!stopped) {
          fetchOnce();
          await sleep(10_000 + (random() * 2 - 1) * jitterMs);
        }
      };
      void loop();
      return () => {
        stopped = true;
      };
    },
  });
  const typing = (
    name: string,
    user: string,
    description: string,
    keys: (random: () => number) => Generator<[string, number]>,
  ): Scenario => ({
    name,
    user,
    description,
    async start() {
      const child = spawn(SSH, sshd.sshNoTtyArgs(user, ["cat"]), { stdio: ["pipe", "ignore", "ignore"] });
      children.push(child);
      await waitForSession(user);
      let stopped = false;
      const loop = async () => {
        for (const [key, pauseMs] of keys(mulberry32(2025))) {
          if (stopped) return;
          child.stdin!.write(key);
          await sleep(pauseMs);
        }
      };
      void loop();
      return () => {
        stopped = true;
      };
    },
  });
  const slowBrowserPage = (name: string, user: string, page: string, description: string): Scenario => ({
    name,
    user,
    description,
    sampleIntervalMs: 100,
    async start() {
      const local = await slowForward(user);
      const context = await browser.newContext();
      const tab = await context.newPage();
      await tab.goto(`http://127.0.0.1:${local}${page}`);
      return () => void context.close();
    },
  });
  const slotJitterPoller: Scenario = {
    name: "poller-slot-jitter",
    user: "wstest39c",
    description:
      "an HTTP client (keep-alive agent) through ssh -N -L fetching a JSON answer at k·10 s ± 2.5 s (uniform per slot: gaps 5–15 s) from a server answering in 100–300 ms",
    sampleIntervalMs: 100,
    async start() {
      const local = await slowForward("wstest39c");
      const agent = new http.Agent({ keepAlive: true });
      const random = mulberry32(3939);
      const t0 = performance.now();
      let stopped = false;
      const loop = async () => {
        for (let slot = 0; !stopped; slot++) {
          const at = t0 + slot * 10_000 + (random() * 2 - 1) * 2_500;
          await sleep(Math.max(0, at - performance.now()));
          if (stopped) return;
          http
            .get({ host: "127.0.0.1", port: local, path: "/api/query?panel=0", agent }, (r) => r.resume())
            .on("error", () => {});
        }
      };
      void loop();
      return () => {
        stopped = true;
      };
    },
  };
  const words = "the model converges after warmup so lower the learning rate and rerun the sweep tonight".split(" ");
  const scenarios: Scenario[] = [
    reload(10, "wstest25a"),
    reload(30, "wstest25b"),
    poller("poller-10s", "wstest25c", 0),
    poller("poller-jitter", "wstest25d", 2000),
    typing(
      "typing-irregular",
      "wstest25e",
      "ssh -T host cat; keys 60–300 ms apart in words, 1–4 words a burst, pauses between bursts: 60% 2–10 s, 30% 10–60 s, 10% 1–3 min",
      function* (random) {
        for (;;) {
          const count = 1 + Math.floor(random() * 4);
          for (let w = 0; w < count; w++) {
            for (const key of `${words[Math.floor(random() * words.length)]} `) yield [key, 60 + random() * 240];
            yield ["", 150 + random() * 450];
          }
          const roll = random();
          const pause =
            roll < 0.6
              ? 2_000 + random() * 8_000
              : roll < 0.9
                ? 10_000 + random() * 50_000
                : 60_000 + random() * 120_000;
          yield ["\n", pause];
        }
      },
    ),
    typing(
      "typing-steady",
      "wstest25f",
      "ssh -T host cat; a person typing at a steady rhythm for the whole capture: a key every 180 ms ± 20%, a 1.5 s pause after each ~60-key sentence",
      function* (random) {
        let typed = 0;
        for (;;) {
          for (const key of `${words[Math.floor(random() * words.length)]} `) {
            typed++;
            yield [key, 180 * (0.8 + random() * 0.4)];
          }
          if (typed >= 60) {
            typed = 0;
            yield ["\n", 1_500];
          }
        }
      },
    ),
    {
      name: "keepalive",
      user: "wstest25g",
      description: "ssh -T -o ServerAliveInterval=15 host cat with nothing sent",
      async start() {
        children.push(
          spawn(SSH, sshd.sshNoTtyArgs("wstest25g", ["cat"], ["ServerAliveInterval=15"]), {
            stdio: ["pipe", "ignore", "ignore"],
          }),
        );
        await waitForSession("wstest25g");
        return () => {};
      },
    },
    slowBrowserPage(
      "slow-page-10s",
      "wstest39a",
      "/page.html?every=10",
      'ssh -N -L to a server answering in 100–300 ms; headless Chromium on a page with <meta http-equiv="refresh" content="10">',
    ),
    slowBrowserPage(
      "dashboard-refresh",
      "wstest39b",
      "/dashboard.html?every=10",
      "ssh -N -L to a server answering in 100–300 ms; headless Chromium on a Grafana-style page fetching its four panels every 10 s",
    ),
    slotJitterPoller,
    slowBrowserPage(
      "heartbeat-1s",
      "wstest39d",
      "/heartbeat.html?every=1",
      "ssh -N -L to the `ws` WebSocket server; headless Chromium on a page sending a ping every second, answered by a pong",
    ),
    slowBrowserPage(
      "page-stops",
      "wstest39e",
      "/stops.html?every=10&left=18",
      "ssh -N -L to a server answering in 100–300 ms; Chromium reloading the page every 10 s for 3 minutes, then a page that does not refresh, its keep-alive connection left open",
    ),
  ].filter((scenario) => !only || only.has(scenario.name));

  mkdirSync(OUT, { recursive: true });
  const durationMs = minutes * 60_000;
  await Promise.all(
    scenarios.map(async (scenario) => {
      const stop = await scenario.start();
      stops.push(stop);
      const pid = await waitForSession(scenario.user);
      const samples: number[][] = [];
      const t0 = performance.now();
      const forwardSnapshotAt = scenario.name === "poller-10s" ? 15_000 : -1;
      let snapped = false;
      while (performance.now() - t0 < durationMs) {
        samples.push([Math.round(performance.now() - t0), ...readIo(pid)]);
        if (!snapped && forwardSnapshotAt >= 0 && performance.now() - t0 > forwardSnapshotAt) {
          snapped = true;
          snapshotForward(pid, webPort, web.pid!);
        }
        const next = t0 + samples.length * (scenario.sampleIntervalMs ?? 1000);
        await sleep(Math.max(0, next - performance.now()));
      }
      stop();
      writeFileSync(
        path.join(OUT, `${scenario.name}.json`),
        `${JSON.stringify({
          name: scenario.name,
          description: scenario.description,
          captured: new Date().toISOString().slice(0, 10),
          machine: `${os.cpus().length} CPUs shared with other work, loopback, ${readFileSync("/proc/version", "utf8").split(" ").slice(0, 3).join(" ")}`,
          sampleIntervalMs: scenario.sampleIntervalMs ?? 1000,
          columns: ["monotonicMs", "rchar", "wchar", "syscr", "syscw"],
          samples,
        })}\n`,
      );
      console.log(`${scenario.name}: ${samples.length} samples`);
    }),
  );
  await browser.close();
  slow.close();
  for (const child of children) child.kill("SIGTERM");
  await sshd.stop();
  await rm(dir, { recursive: true, force: true });
}

/** The forward's /proc files as the agent reads them: fd links, and the lines of /proc/net/tcp for those sockets and the listener. */
function snapshotForward(pid: number, webPort: number, webPid: number): void {
  const fixtures = path.resolve("packages/guest-agent/test/fixtures/remote-sessions");
  const links = readdirSync(`/proc/${pid}/fd`).map((fd) => {
    try {
      return `${fd} ${readlinkSync(`/proc/${pid}/fd/${fd}`)}`;
    } catch {
      return `${fd} ?`;
    }
  });
  writeFileSync(path.join(fixtures, "forward-session.fd"), `${links.join("\n")}\n`);
  const inodes = new Set(links.map((line) => /socket:\[(\d+)\]/.exec(line)?.[1]).filter(Boolean));
  const listenerLinks = readdirSync(`/proc/${webPid}/fd`).map((fd) => {
    try {
      return `${fd} ${readlinkSync(`/proc/${webPid}/fd/${fd}`)}`;
    } catch {
      return `${fd} ?`;
    }
  });
  writeFileSync(path.join(fixtures, "forward-listener.fd"), `${listenerLinks.join("\n")}\n`);
  for (const line of listenerLinks) {
    const inode = /socket:\[(\d+)\]/.exec(line)?.[1];
    if (inode) inodes.add(inode);
  }
  const portHex = webPort.toString(16).toUpperCase().padStart(4, "0");
  for (const name of ["tcp", "tcp6"]) {
    const [header, ...lines] = readFileSync(`/proc/net/${name}`, "utf8").split("\n");
    const kept = lines.filter((line) => {
      const fields = line.trim().split(/\s+/);
      return inodes.has(fields[9]!) || fields[1]?.endsWith(`:${portHex}`) || fields[2]?.endsWith(`:${portHex}`);
    });
    writeFileSync(path.join(fixtures, `forward-net-${name}`), `${[header, ...kept].join("\n")}\n`);
  }
  writeFileSync(
    path.join(fixtures, "forward-meta.json"),
    `${JSON.stringify({ sessionPid: pid, listenerPid: webPid, destinationPort: webPort })}\n`,
  );
}

main().then(
  () => process.exit(0),
  (error) => {
    console.error(error);
    for (const stop of stops) stop();
    for (const child of children) child.kill("SIGTERM");
    process.exit(1);
  },
);
