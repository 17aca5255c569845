/**
 * The inhibitors signal against a real systemd-logind: the test starts a private D-Bus system
 * bus and logind in its own mount namespace whose /run is a temporary directory, so locks are
 * taken with the real `systemd-inhibit` and logind writes the real files, without touching the
 * machine's /run or any logind already running. Needs root (a mount namespace).
 */
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { systemClock } from "../../src/clock.js";
import { defaultRoots, type Roots } from "../../src/roots.js";
import { createInhibitorsSignal, type InhibitorSignalValue } from "../../src/signals/inhibitors.js";
import type { SignalContext, SignalOutcome } from "../../src/signals/types.js";
import { usersFrom } from "../../src/users.js";
import { pollUntil } from "../../../../test/support/pty.js";

const execFileAsync = promisify(execFile);

const LOGIND_CANDIDATES = ["/usr/lib/systemd/systemd-logind", "/lib/systemd/systemd-logind"];
const REQUIRED: Array<[string, string]> = [
  ["/usr/bin/systemd-inhibit", "systemd"],
  ["/usr/bin/dbus-daemon", "dbus-daemon"],
  ["/usr/bin/unshare", "util-linux"],
];

let scratch: string;
let runDir: string;
let busAddress: string;
let dbus: ChildProcess | undefined;
let logind: ChildProcess | undefined;
let logindLog = "";
const holders: ChildProcess[] = [];

beforeAll(async () => {
  for (const [binary, pkg] of REQUIRED) {
    if (!existsSync(binary)) throw new Error(`${binary} is missing: install the Debian package ${pkg}`);
  }
  const logindBinary = LOGIND_CANDIDATES.find((candidate) => existsSync(candidate));
  if (!logindBinary) throw new Error("systemd-logind is missing: install the Debian package systemd");

  scratch = await mkdtemp(path.join(os.tmpdir(), "ws-logind-"));
  runDir = path.join(scratch, "run");
  await mkdir(path.join(runDir, "dbus"), { recursive: true });
  await mkdir(path.join(runDir, "systemd", "logind.conf.d"), { recursive: true });
  // This logind must never act on the machine: no VTs, no power keys, no idle action.
  await writeFile(
    path.join(runDir, "systemd", "logind.conf.d", "ws-test.conf"),
    [
      "[Login]",
      "NAutoVTs=0",
      "ReserveVT=0",
      "KillUserProcesses=no",
      "RemoveIPC=no",
      "IdleAction=ignore",
      "HandlePowerKey=ignore",
      "HandleRebootKey=ignore",
      "HandleSuspendKey=ignore",
      "HandleHibernateKey=ignore",
      "HandleLidSwitch=ignore",
      "HandleLidSwitchExternalPower=ignore",
      "HandleLidSwitchDocked=ignore",
      "",
    ].join("\n"),
  );

  const socket = path.join(runDir, "dbus", "system_bus_socket");
  busAddress = `unix:path=${socket}`;
  const busConfig = path.join(scratch, "system-bus.conf");
  await writeFile(
    busConfig,
    `<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>${busAddress}</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <allow own="*"/>
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
  </policy>
</busconfig>
`,
  );
  dbus = spawn("/usr/bin/dbus-daemon", [`--config-file=${busConfig}`, "--nofork", "--nopidfile", "--print-address=1"], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  let dbusLog = "";
  dbus.stdout!.on("data", (chunk: Buffer) => (dbusLog += chunk.toString()));
  dbus.stderr!.on("data", (chunk: Buffer) => (dbusLog += chunk.toString()));
  await pollUntil(
    `dbus-daemon to listen (log: ${dbusLog})`,
    () => (dbusLog.includes("unix:path=") ? true : undefined),
    {
      timeoutMs: 30_000,
    },
  );

  // logind writes /run/systemd/...: give it a /run of its own. The script is fixed; the paths
  // come in as arguments.
  logind = spawn(
    "/usr/bin/unshare",
    [
      "--mount",
      "--propagation",
      "private",
      "--",
      "/bin/sh",
      "-c",
      'mount --bind -- "$1" /run && exec "$2"',
      "sh",
      runDir,
      logindBinary,
    ],
    { stdio: ["ignore", "pipe", "pipe"], env: { PATH: "/usr/sbin:/usr/bin:/sbin:/bin", SYSTEMD_LOG_LEVEL: "info" } },
  );
  logind.stdout!.on("data", (chunk: Buffer) => (logindLog += chunk.toString()));
  logind.stderr!.on("data", (chunk: Buffer) => (logindLog += chunk.toString()));
  await pollUntil(
    "systemd-logind to answer on the private bus",
    async () => {
      if (logind!.exitCode !== null) {
        throw new Error(
          `systemd-logind exited (${logind!.exitCode}); it needs root for its mount namespace:\n${logindLog}`,
        );
      }
      await execFileAsync("/usr/bin/systemd-inhibit", ["--list", "--no-pager"], { env: busEnv() });
      return true;
    },
    { timeoutMs: 60_000 },
  ).catch((error: Error) => {
    throw new Error(`${error.message}\nlogind log:\n${logindLog}`);
  });
});

afterAll(async () => {
  for (const holder of holders) killGroup(holder);
  await stop(logind);
  await stop(dbus);
  if (scratch) await rm(scratch, { recursive: true, force: true });
});

function busEnv(): NodeJS.ProcessEnv {
  return { PATH: "/usr/sbin:/usr/bin:/sbin:/bin", LANG: "C.UTF-8", DBUS_SYSTEM_BUS_ADDRESS: busAddress };
}

/** Takes a lock with systemd-inhibit holding `sleep` (in its own process group, to end both). */
async function takeLock(options: { what: string; who: string; why: string; mode?: string }): Promise<ChildProcess> {
  const before = await lockFiles();
  const holder = spawn(
    "/usr/bin/systemd-inhibit",
    [
      `--what=${options.what}`,
      `--who=${options.who}`,
      `--why=${options.why}`,
      `--mode=${options.mode ?? "block"}`,
      "sleep",
      "infinity",
    ],
    { env: busEnv(), stdio: ["ignore", "ignore", "pipe"], detached: true },
  );
  let stderr = "";
  holder.stderr!.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  holders.push(holder);
  await pollUntil(`logind to write the lock for ${options.who}`, async () => {
    if (holder.exitCode !== null) throw new Error(`systemd-inhibit exited ${holder.exitCode}: ${stderr}`);
    return (await lockFiles()).length > before.length ? true : undefined;
  });
  return holder;
}

async function lockFiles(): Promise<string[]> {
  const entries = await readdir(path.join(runDir, "systemd", "inhibit")).catch(() => []);
  return entries.filter((name) => !name.endsWith(".ref"));
}

function roots(): Roots {
  return { ...defaultRoots, run: runDir };
}

async function collect(): Promise<SignalOutcome<InhibitorSignalValue>> {
  const ctx: SignalContext = {
    roots: roots(),
    clock: systemClock,
    users: usersFrom([]),
    signal: new AbortController().signal,
  };
  return createInhibitorsSignal().collect(ctx);
}

async function locks() {
  const outcome = await collect();
  if (outcome.state !== "ok") throw new Error(`inhibitors signal ${outcome.state}: ${outcome.message}`);
  return outcome.value.locks ?? [];
}

function killGroup(child: ChildProcess): void {
  if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return;
  try {
    process.kill(-child.pid, "SIGTERM");
  } catch {
    // Already gone.
  }
}

async function stop(child: ChildProcess | undefined): Promise<void> {
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once("exit", resolve));
  child.kill("SIGTERM");
  const timer = setTimeout(() => child.kill("SIGKILL"), 5_000);
  await exited;
  clearTimeout(timer);
}

describe("inhibitors signal with a real systemd-logind", () => {
  it("is ok and empty while nobody holds a lock, though logind makes its inhibit directory only with the first lock", async () => {
    expect(existsSync(path.join(runDir, "systemd", "inhibit"))).toBe(false);
    expect(await locks()).toEqual([]);
  });

  it("reports an idle lock taken with systemd-inhibit: who, why, what, mode, uid and the holder's pid", async () => {
    const holder = await takeLock({ what: "idle", who: 'trainer "ws"', why: "epoch 3\tof 10 — ümlaut $HOME" });
    const reported = await locks();
    expect(reported).toEqual([
      {
        who: 'trainer "ws"',
        why: "epoch 3\tof 10 — ümlaut $HOME",
        what: "idle",
        mode: "block",
        uid: 0,
        pid: holder.pid,
      },
    ]);
  });

  it("reads locks on other things but reports only those that include idle", async () => {
    await takeLock({ what: "sleep", who: "ws-sleep", why: "delay sleep", mode: "delay" });
    await takeLock({ what: "handle-lid-switch", who: "ws-lid", why: "lid" });
    const combined = await takeLock({ what: "sleep:idle", who: "ws-combined", why: "both" });
    const reported = await locks();
    expect(reported.map((lock) => lock.who).sort()).toEqual(['trainer "ws"', "ws-combined"]);
    expect(reported.find((lock) => lock.who === "ws-combined")).toMatchObject({
      what: "sleep:idle",
      pid: combined.pid,
    });
  });

  it("drops a lock once its holder lets go: logind deletes the file", async () => {
    const holder = holders.find((child) => child.spawnargs.includes("--who=ws-combined"))!;
    killGroup(holder);
    await pollUntil("the released lock to disappear", async () =>
      (await locks()).some((lock) => lock.who === "ws-combined") ? undefined : true,
    );
    expect((await locks()).map((lock) => lock.who)).toEqual(['trainer "ws"']);
  });

  it("ignores a lock file left behind by a stopped logind once its holder is gone", async () => {
    await stop(logind);
    const holder = holders.find((child) => child.spawnargs.includes('--who=trainer "ws"'))!;
    // logind is gone, so the file stays; the holder still runs, so the lock still counts.
    expect((await locks()).map((lock) => lock.who)).toEqual(['trainer "ws"']);
    killGroup(holder);
    const outcome = await pollUntil("the stale lock to be ignored", async () => {
      const result = await collect();
      return result.state === "ok" && result.value.locks?.length === 0 ? result : undefined;
    });
    expect(outcome.message).toMatch(/ignored stale idle lock\(s\) \d+: holder process gone/);
    expect((await lockFiles()).length).toBeGreaterThan(0);
  });
});
