/**
 * A real VM, end to end: the project's .deb installed in a Debian bookworm guest booted under
 * QEMU, configured by cloud-init from a NoCloud seed, reporting to the shipped collector
 * (standalone) on the host, and driven the way users and the platform drive it: SSH logins on a
 * real terminal, ws-lease, systemd-inhibit, an idle stop through QMP's system_powerdown, the way
 * back through the start link (its POST runs the collector's start command) with the welcome
 * back at the next login, disk growth (QMP block_resize while running; qemu-img resize while
 * off), a seal and a clone, a start schedule set in the guest that starts it again at its minute,
 * and a learned warm start that boots a stopped VM before its owner's usual arrival.
 *
 * The scenarios run in order on five boots: vm1 (1–4, ends with the idle stop), vm1 again
 * (started through the start path in 5, then 5b and the seal of 6, on a disk grown while it was
 * off), the clone (6, then 7 sets its schedule and powers it off), the clone again (started
 * by its schedule in 7), and vm-warm (8: warm-started by a second collector that learned its
 * owner's usual arrival from configured returns, then used by a login).
 * `npm run test:vm` runs this file (scripts/test-vm.mjs); test/vm/README.md says what it proves.
 */
import { debFile } from "../packaging/lib/artifacts.js";
import { encodeReturns } from "../../packages/collector/src/comeback/warm/returns.js";
import { copyFile, mkdir, mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { PtySession } from "../support/pty.js";
import { existsSync, readFileSync } from "node:fs";
import { eventually, getText, repoRoot } from "../support/process.js";
import { zoneAwayFromMidnight } from "../support/owner-zone.js";
import { VmTestCollector, type TracedReport, type VmView } from "./collector.js";
import { Guest, ROOT_DRIVE, createOverlay, imageVirtualSize, resizeImageOffline } from "./guest.js";
import { requireHostTools, requireRoot } from "./host-tools.js";
import { ensureImage, type VmImage } from "./image.js";
import { renderSeed, writeSeedImage } from "./seed.js";
import { makeSshKey, type SshKeyPair } from "./ssh.js";

const NAMESPACE = "e2e";
const USER = "alice";
const GiB = 1024 ** 3;
const MAC_ORIGINAL = "52:54:00:00:e2:01";
const MAC_CLONE = "52:54:00:00:e2:02";
const CLONE = "vm-clone";
const WARM = "vm-warm";
const MAC_WARM = "52:54:00:00:e2:03";
/** A zone away from the host's UTC: the schedule is read in the owner's zone, not the machine's. */
const SCHEDULE_ZONE = "Europe/Berlin";
/**
 * Short timeouts so the idle stop happens within the run. Only terminal input, leases and
 * inhibitors are under test: the machine-load thresholds are off, since an emulated guest's
 * boot and the agent's own Node.js start-up would otherwise count as background work.
 */
const POLICY = {
  "idle-timeout": "75s",
  "grace-period": "30s",
  "max-keep-running": "24h",
  "cpu-busy-threshold": "off",
  "user-cpu-threshold": "off",
  "network-threshold": "off",
  "disk-threshold": "off",
};
/** Emulated (TCG) boots on a busy 2-core machine: minutes, not seconds. */
const SSH_UP_TIMEOUT_MS = 6 * 60_000;

let dir: string;
let image: VmImage;
let sshKey: SshKeyPair;
let collector: VmTestCollector;
/** Scenario 8's own collector: its config names vm-warm's returns, learned "weeks ago" relative to that scenario. */
let warmCollector: VmTestCollector | undefined;
const guests: Guest[] = [];
const timings: string[] = [];
const startedAt = Date.now();

function note(line: string): void {
  const entry = `[${Math.round((Date.now() - startedAt) / 1000)} s] ${line}`;
  timings.push(entry);
  console.log(`test:vm ${entry}`);
}

function deb(): string {
  return debFile();
}

function stopSocket(name: string): string {
  return path.join(dir, `${name}.stop.qmp`);
}

/** The file the collector's start command (start-request.mjs) appends to; the harness boots the guest then. */
function startRequest(name: string): string {
  return path.join(dir, `${name}.start-request`);
}

async function postStart(startUrl: string): Promise<number> {
  const token = new URL(startUrl).searchParams.get("t")!;
  const res = await fetch(startUrl.slice(0, startUrl.indexOf("?")), {
    method: "POST",
    body: `t=${encodeURIComponent(token)}`,
    redirect: "manual",
    headers: { "content-type": "application/x-www-form-urlencoded" },
  });
  await res.text();
  return res.status;
}

async function startPageStatus(startUrl: string): Promise<string> {
  const { body } = await getText(startUrl);
  return /id="status" data-status="([a-z]+)"/.exec(body)?.[1] ?? "";
}

async function seedFor(name: string, instanceId: string, via: VmTestCollector = collector): Promise<string> {
  const seedDir = path.join(dir, `seed-${instanceId}`);
  await mkdir(seedDir, { recursive: true });
  return writeSeedImage(
    seedDir,
    renderSeed({
      instanceId,
      hostname: name,
      user: { name: USER, sshPublicKey: sshKey.publicKey },
      agent: { collectorAddress: via.addressFromGuest, namespace: NAMESPACE, name, token: via.token(name) },
    }),
  );
}

async function boot(label: string, disk: string, seedIso: string, mac: string, vmName: string): Promise<Guest> {
  const guest = await Guest.boot({
    label,
    dir,
    image,
    disk,
    seedIso,
    mac,
    user: USER,
    sshKey: sshKey.privateKey,
    stopSocket: stopSocket(vmName),
  });
  guests.push(guest);
  note(`${label}: QEMU started (ssh on 127.0.0.1:${guest.sshPort})`);
  return guest;
}

async function sshUp(guest: Guest): Promise<number> {
  const at = await guest.waitForSsh(SSH_UP_TIMEOUT_MS);
  note(`${guest.name}: SSH up`);
  return at;
}

/** The agent's and cloud-init's side of a failure, read over SSH while the guest still runs. */
async function guestJournal(guest: Guest): Promise<string> {
  if (!guest.running) return guest.diagnostics();
  const result = await guest.ssh(
    "sudo journalctl -b --no-pager -o short-monotonic -u ws-agent -u ws-agent-grow -u cloud-init -u cloud-init-local | tail -n 60",
    60_000,
  );
  return `--- ${guest.name}: journal (ws-agent, ws-agent-grow, cloud-init):\n${result.stdout}${result.stderr}`;
}

/** Waits as eventually() does; on timeout the error carries the guest's journal and the collector's log. */
async function until<T>(
  guest: Guest,
  what: string,
  timeoutMs: number,
  check: () => Promise<T | undefined | false>,
): Promise<T> {
  try {
    return await eventually(check, timeoutMs, what);
  } catch (error) {
    const collectorLog = collector.log().split("\n").slice(-25).join("\n");
    throw new Error(
      `${(error as Error).message}\n${await guestJournal(guest)}\n--- collector log (last lines):\n${collectorLog}`,
    );
  }
}

async function view(name: string): Promise<VmView | undefined> {
  return collector.vm(name);
}

async function latestReport<T>(
  name: string,
  sinceMs: number,
  pick: (report: TracedReport) => T | undefined,
): Promise<T | undefined> {
  const reports = await collector.reportsSince(name, sinceMs);
  for (let index = reports.length - 1; index >= 0; index--) {
    const found = pick(reports[index]!);
    if (found !== undefined) return found;
  }
  return undefined;
}

async function rootFilesystemBytes(guest: Guest): Promise<number> {
  const out = await guest.sshOk("df -B1 --output=size / | tail -n 1");
  const bytes = Number(out.trim());
  if (!Number.isFinite(bytes) || bytes <= 0) throw new Error(`df printed ${JSON.stringify(out)}`);
  return bytes;
}

async function bootId(guest: Guest): Promise<string> {
  return (await guest.sshOk("cat /proc/sys/kernel/random/boot_id")).trim();
}

beforeAll(async () => {
  requireRoot();
  requireHostTools();
  image = await ensureImage({ cacheDir: path.join(repoRoot, ".cache/vm"), deb: deb(), log: note });
  dir = await mkdtemp(path.join(os.tmpdir(), "ws-vm-"));
  sshKey = await makeSshKey(dir);
  collector = await VmTestCollector.start({
    dir,
    namespace: NAMESPACE,
    policy: POLICY,
    reportInterval: "3s",
    stopSocketFor: stopSocket,
    startRequestFor: startRequest,
    // Known while off (standalone keeps no other record of a VM that powered itself off): its
    // start schedule applies. A longer idle-timeout: with POLICY's 75 s, ws's idle stop of the
    // clone raced the scenario's own poweroff, and the stop the standalone collector kept asking
    // for (it cannot see the VM is off; the stop command found no guest) met the scheduled boot.
    // The engine now cancels such a stop on the new boot's first Report (engine/decide.ts,
    // decideStopping), but a retry before that Report would still power the new boot down.
    configuredVms: { [CLONE]: { "workstation.aik8s.run/idle-timeout": "15m" } },
  });
  note(`collector on 127.0.0.1:${collector.grpcPort} (guests dial ${collector.addressFromGuest})`);
});

afterAll(async () => {
  for (const guest of guests) await guest.destroy();
  await collector?.stop();
  await warmCollector?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
  console.log(`test:vm timeline:\n  ${timings.join("\n  ")}`);
});

describe.sequential("a real VM with the packaged agent", () => {
  let vm1: Guest;
  let vm1Disk: string;
  let vm1Seed: string;
  let terminal: PtySession;
  let aliceUid: number;
  let firstBootFilesystemBytes: number;
  let vm1Again: Guest;
  let vm1OffSize: number;
  let clone: Guest | undefined;
  let cloneDisk: string;
  let cloneSeed: string;

  it("1. boots; ws-agent.service is active and the collector shows the VM connected within 60 s of SSH", async () => {
    vm1Disk = path.join(dir, "vm1.qcow2");
    await createOverlay(image.disk, vm1Disk);
    vm1Seed = await seedFor("vm1", "vm1-0001");
    vm1 = await boot("vm1-boot1", vm1Disk, vm1Seed, MAC_ORIGINAL, "vm1");
    const sshUpAt = await sshUp(vm1);

    const connected = await until(
      vm1,
      "the collector to show vm1 connected and reporting",
      Math.max(1, sshUpAt + 60_000 - Date.now()),
      async () => {
        const v = await view("vm1");
        return v?.connected && v.lastReportAtMs !== undefined ? v : undefined;
      },
    );
    note("vm1: agent connected");
    expect(connected.state).toBe("Active");
    expect((await vm1.sshOk("systemctl is-active ws-agent.service")).trim()).toBe("active");
    // Not a restart loop that happened to be up at this moment.
    expect((await vm1.sshOk("systemctl show -p NRestarts --value ws-agent.service")).trim()).toBe("0");
    // Node.js from Debian bookworm: the agent's declared floor, for real.
    expect((await vm1.sshOk("node --version")).trim()).toMatch(/^v18\./);
    aliceUid = Number((await vm1.sshOk("id -u")).trim());
    expect(aliceUid).toBeGreaterThanOrEqual(1000);
    firstBootFilesystemBytes = await rootFilesystemBytes(vm1);
  });

  it("2. an SSH login on a real terminal appears at the collector with its input age; typing resets it", async () => {
    const loginAt = Date.now();
    terminal = vm1.terminal();
    // shellTty types a command: the session's first keystrokes.
    const tty = (await terminal.shellTty({ timeoutMs: 120_000 })).replace(/^\/dev\//, "");
    expect(tty).toMatch(/^pts\/\d+$/);

    const session = await until(vm1, `a report with ${USER}'s session on ${tty}`, 90_000, () =>
      latestReport("vm1", loginAt, (r) =>
        // sshd opens the pty before it writes the utmp record: a sample taken in between shows the
        // terminal as a bare pty (kind PTY) owned by the user, and the next one as the login.
        r.sessions?.sessions?.find(
          (s) => s.tty === tty && s.user === USER && s.inputAgeSeconds !== undefined && s.kind === "SESSION_KIND_UTMP",
        ),
      ),
    );
    expect(session).toMatchObject({ kind: "SESSION_KIND_UTMP", uid: aliceUid });

    // Let the input age grow (the kernel moves a tty's atime in 8-second steps), then type.
    const idleSince = await until(vm1, "the collector to see 25 s without input", 120_000, async () => {
      const at = (await view("vm1"))?.readings?.lastActivityAtMs["tty-input"];
      return at !== undefined && Date.now() - at >= 25_000 ? at : undefined;
    });
    const typedAt = Date.now();
    const mark = terminal.output().length;
    terminal.write("echo typing-resets-the-input-age\r");
    // The answer, not the echo of the command line.
    await terminal.waitFor(/(?<!echo )typing-resets-the-input-age\r\n/, { from: mark, timeoutMs: 60_000 });
    const inputAt = await until(vm1, "a tty-input time at the collector after the typing", 60_000, async () => {
      const at = (await view("vm1"))?.readings?.lastActivityAtMs["tty-input"];
      return at !== undefined && at >= typedAt - 10_000 ? at : undefined;
    });
    expect(inputAt).toBeGreaterThan(idleSince + 10_000);
    // The idle clock was reset by the typing: the idle time is shorter than the time since the
    // quiet stretch began (an order, whatever the machine's load made of the seconds).
    const after = await view("vm1");
    expect(after?.idleSeconds ?? Infinity).toBeLessThan((Date.now() - idleSince) / 1000 - 10);
  });

  it("3. `ws-lease 2h --reason e2e` typed in that terminal is held for the user's uid; an idle inhibitor is seen", async () => {
    let mark = terminal.output().length;
    terminal.write("ws-lease 2h --reason e2e\r");
    const taken = await terminal.waitFor(/Lease (\w+) taken[^\r\n]*[\s\S]*?The collector confirmed it/, {
      from: mark,
      timeoutMs: 180_000,
    });
    const leaseId = taken[1]!;
    const lease = await until(vm1, "the lease at the collector", 60_000, async () =>
      (await view("vm1"))?.leases.find((l) => l.id === leaseId),
    );
    expect(lease).toMatchObject({ user: USER, uid: aliceUid, reason: "e2e", clamped: false });
    const remainingMs = lease.expiresAtMs - Date.now();
    expect(remainingMs).toBeGreaterThan(110 * 60_000);
    expect(remainingMs).toBeLessThanOrEqual(120 * 60_000);
    expect((await view("vm1"))?.signals.lease).toBe(true);

    const inhibitFrom = Date.now();
    mark = terminal.output().length;
    terminal.write("systemd-inhibit --what=idle --who=e2e-test --why='e2e inhibitor' sleep 600 &\r");
    await terminal.waitFor(/\[1\] \d+/, { from: mark, timeoutMs: 30_000 });
    const lock = await until(vm1, "the idle inhibitor in a report", 90_000, () =>
      latestReport("vm1", inhibitFrom, (r) => r.inhibitors?.locks?.find((l) => l.who === "e2e-test")),
    );
    expect(lock).toMatchObject({ why: "e2e inhibitor", mode: "block", uid: aliceUid });
    expect(lock.what?.split(":")).toContain("idle");
    const held = await until(vm1, "the collector to count the inhibitor", 30_000, async () => {
      const v = await view("vm1");
      return v?.signals.inhibitor ? v : undefined;
    });
    expect(held.readings?.idleInhibitors).toBe(1);
    expect(held.state).toBe("Active");
  });

  it("4. idle: the notice reaches the terminal, then the stop command powers the guest down cleanly", async () => {
    let mark = terminal.output().length;
    terminal.write("kill %1; ws-lease cancel\r");
    await terminal.waitFor(/Cancelled lease \w+ of alice \("e2e"\)/, { from: mark, timeoutMs: 120_000 });
    await until(vm1, "the lease and the inhibitor to be gone at the collector", 60_000, async () => {
      const v = await view("vm1");
      return v && v.leases.length === 0 && !v.signals.inhibitor && !v.signals.lease ? v : undefined;
    });
    note("vm1: lease and inhibitor released; idle from now on");

    mark = terminal.output().length;
    const noticeTimeoutMs = 6 * 60_000;
    const notice = await terminal.waitFor(/ws: this VM will stop in [^\r\n]*[\s\S]*?Your files are kept[^\r\n]*/, {
      from: mark,
      timeoutMs: noticeTimeoutMs,
    });
    note(`vm1: stop notice on the terminal: ${notice[0].split(/\r?\n/).slice(0, 2).join(" / ")}`);
    // The collector's reasons, passed on to the user: how long idle, and the last thing that counted.
    expect(notice[0]).toMatch(
      /Why: idle for [^\r\n]*\(idle-timeout 1m15s\)[^\r\n]*last activity: input on pts\/\d+ \(alice/,
    );
    expect(notice[0]).toMatch(/To keep it running: [^\r\n]*ws-lease 2h/);
    expect((await view("vm1"))?.state).toBe("StoppingPending");

    const exit = await vm1.waitForExit(5 * 60_000, "the stop notice");
    note("vm1: QEMU exited after the guest powered off");
    expect(exit).toEqual({ code: 0, signal: null });
    const consoleLog = vm1.serialLog();
    // systemd's own shutdown, then the kernel's power-off: the guest went down cleanly.
    expect(consoleLog).toMatch(/systemd-shutdown\[1\]: Powering off/);
    expect(consoleLog).toMatch(/reboot: Power down/);
    await expect(terminal.exited).resolves.toBeDefined();

    // The collector ran the stop command and recorded why.
    await collector.proc.waitFor(/vm1: stop accepted: [^\n]*system_powerdown sent/, 30_000);
    const idleStop = collector.log().match(/event IdleStop: [^\n]*/)?.[0];
    expect(idleStop).toMatch(
      /idle for \S+ \(idle-timeout 1m15s\) and the grace period of the notice \S+ is over with no activity, lease or other veto; last activity: input on pts\/\d+ \(alice/,
    );
    note(`collector: ${idleStop}`);
    const stopped = await until(vm1, "vm1 Stopped at the collector", 60_000, async () => {
      const v = await view("vm1");
      return v?.state === "Stopped" ? v : undefined;
    });
    expect(stopped.leases).toEqual([]);
    expect(await collector.metrics()).toMatch(/^workstation_stops_total\{reason="idle",mode="enforce"\} 1$/m);
  });

  it("5. back through the start link: POST → start command → boot → sshd; the first login shows the welcome back, once", async () => {
    // Normally already off (scenario 4); if that failed, this scenario still runs on its own.
    await vm1.destroy();
    const offSize = await imageVirtualSize(vm1Disk);
    expect(offSize).toBe(image.diskBytes);
    await resizeImageOffline(vm1Disk, offSize + GiB);
    vm1OffSize = offSize;

    // The stopped VM's page carries its start link; GET changes nothing, the POST runs the start command.
    const startUrl = await until(vm1, "the start link on vm1's page", 60_000, () => collector.startLink("vm1"));
    expect(await startPageStatus(startUrl)).toBe("stopped");
    expect(existsSync(startRequest("vm1"))).toBe(false);
    const postedAt = Date.now();
    expect(await postStart(startUrl)).toBe(303);
    const requestedAt = await eventually(
      () => (existsSync(startRequest("vm1")) ? Number(readFileSync(startRequest("vm1"), "utf8").trim()) : undefined),
      60_000,
      "the collector's start command",
    );
    // The start command asks; the harness boots the guest, as libvirt would for `virsh start`.
    vm1Again = await boot("vm1-boot2", vm1Disk, vm1Seed, MAC_ORIGINAL, "vm1");
    const qemuAt = Date.now();
    const sshAt = await sshUp(vm1Again);
    // Keep it running through these tests and the seal, as its user would (no terminal: no welcome yet).
    const leaseTaken = until(
      vm1Again,
      "a lease in the second boot",
      120_000,
      async () => (await vm1Again.ssh("ws-lease 2h --reason disk-and-seal")).code === 0,
    );
    const readyAt = await until(vm1Again, "the starting page to say ready", 3 * 60_000, async () =>
      (await startPageStatus(startUrl)) === "ready" ? Date.now() : undefined,
    );
    // The guest's own view: kernel start to sshd active, from systemd's monotonic timestamps.
    await leaseTaken;
    const sshdActiveUs = Number(
      (await vm1Again.sshOk("systemctl show -p ActiveEnterTimestampMonotonic --value ssh.service")).trim(),
    );
    const analyze = (await vm1Again.ssh("systemd-analyze 2>&1 | head -n 1")).stdout.trim();
    const s = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
    note(
      `vm1: start path: POST → start command ${s(requestedAt - postedAt)}, → QEMU started ${s(qemuAt - requestedAt)}, ` +
        `→ sshd answering ${s(sshAt - qemuAt)} (guest: kernel → sshd active ${s(sshdActiveUs / 1000)}; ${analyze}), ` +
        `→ starting page ready ${s(readyAt - sshAt)}; POST → sshd ${s(sshAt - postedAt)}, POST → ready ${s(readyAt - postedAt)}`,
    );
    expect(readFileSync(startRequest("vm1"), "utf8").trim().split("\n")).toHaveLength(1);
    await collector.proc.waitFor(/vm1: start requested by the start link via link: start command/, 30_000);

    // The first login of the new boot: why it stopped, when, how long idle, the last activity, how to keep it.
    const login = vm1Again.terminal();
    const welcome = await login.waitFor(/ws: welcome back[^\r\n]*[\s\S]*?Say so in one click: \S+/, {
      timeoutMs: 3 * 60_000,
    });
    note(
      `vm1: welcome back on the first login: ${welcome[0]
        .split(/\r?\n/)
        .map((line) => line.trim())
        .join(" / ")}`,
    );
    expect(welcome[0]).toMatch(/this VM was stopped by ws on \d{4}-\d\d-\d\d \d\d:\d\d/);
    expect(welcome[0]).toMatch(/Why: idle for [^\r\n]*\(idle-timeout 1m15s\)/);
    expect(welcome[0]).toMatch(/the last activity ws saw: input on pts\/\d+ \(alice/);
    expect(welcome[0]).toContain("ws-lease 8h");
    expect(welcome[0]).toMatch(/Say so in one click: http:\/\/127\.0\.0\.1:\d+\/start\/e2e\/vm1\?t=s1\./);
    // A second login of the same boot: not again.
    const again = vm1Again.terminal();
    const mark = again.output().length;
    await again.shellTty({ timeoutMs: 120_000 });
    again.write("echo second-login-done\r");
    await again.waitFor(/(?<!echo )second-login-done\r\n/, { from: mark, timeoutMs: 60_000 });
    expect(again.output()).not.toContain("welcome back");
    expect(await vm1Again.sshOk("sudo journalctl -b --no-pager -o cat -u ws-agent.service")).toMatch(
      /welcome stop-\d+: shown on pts\/\d+/,
    );
  });

  it("5b. disk: grown at boot after an offline resize, and online after block_resize, without a reboot", async () => {
    const offSize = vm1OffSize;

    const bootGrow = await vm1Again.sshOk("sudo journalctl -b --no-pager -o cat -u ws-agent-grow.service");
    expect(bootGrow).toMatch(/grown/);
    const afterBoot = await rootFilesystemBytes(vm1Again);
    expect(afterBoot).toBeGreaterThan(firstBootFilesystemBytes + 0.9 * GiB);
    note(`vm1: grown at boot ${(firstBootFilesystemBytes / GiB).toFixed(2)} → ${(afterBoot / GiB).toFixed(2)} GiB`);

    const bootBefore = await bootId(vm1Again);
    const qmp = await vm1Again.qmp();
    await qmp.execute("block_resize", { device: ROOT_DRIVE, size: offSize + 2 * GiB });
    const online = await until(vm1Again, "the root filesystem to grow online", 4 * 60_000, async () => {
      const bytes = await rootFilesystemBytes(vm1Again);
      return bytes > afterBoot + 0.9 * GiB ? bytes : undefined;
    });
    note(`vm1: grown online → ${(online / GiB).toFixed(2)} GiB`);
    expect(await bootId(vm1Again)).toBe(bootBefore);
    const partitionBytes = Number((await vm1Again.sshOk("lsblk -bno SIZE /dev/vda1")).trim());
    expect(partitionBytes).toBeGreaterThan(offSize + 1.9 * GiB - 2 * 1024 ** 2);
  });

  it("6. seal: the sealed image's copy boots with another MAC as a new machine, and its agent connects", async () => {
    const original = {
      machineId: (await vm1Again.sshOk("cat /etc/machine-id")).trim(),
      hostKeys: await vm1Again.hostKeys(),
      bootId: await bootId(vm1Again),
    };
    expect(original.machineId).toMatch(/^[0-9a-f]{32}$/);
    expect(original.hostKeys.length).toBeGreaterThan(0);

    // It powers off only when the sealed result verified, so the power-off is the verdict: the
    // report, written after `systemctl poweroff` returns, rarely outlives the SSH session (its
    // processes are killed as the machine goes down) and is not waited for. A refused or failed
    // seal exits 1 or 2 with the report, the machine still up.
    const seal = await vm1Again.ssh("sudo ws-agent seal --yes --poweroff", 5 * 60_000);
    expect([1, 2], `ws-agent seal exited ${seal.code}:\n${seal.stdout}${seal.stderr}`).not.toContain(seal.code);
    const exit = await vm1Again.waitForExit(5 * 60_000, "ws-agent seal --poweroff");
    expect(exit).toEqual({ code: 0, signal: null });
    note("vm1: sealed and powered off");

    // The platform copies the golden disk (a PVC clone) and boots the copy as a new VM.
    cloneDisk = path.join(dir, "vm-clone.qcow2");
    await copyFile(vm1Disk, cloneDisk);
    cloneSeed = await seedFor(CLONE, "vm-clone-0001");
    clone = await boot("vm-clone-boot1", cloneDisk, cloneSeed, MAC_CLONE, CLONE);
    const cloneBootedAt = Date.now();
    const sshUpAt = await sshUp(clone);

    // Network: the interface with the new MAC is up with its DHCP address.
    const links = await clone.sshOk("ip -o link show; ip -o -4 addr show scope global");
    expect(links).toContain(MAC_CLONE);
    expect(links).not.toContain(MAC_ORIGINAL);
    expect(links).toMatch(/inet 10\.0\.2\.15\//);
    const machineId = (await clone.sshOk("cat /etc/machine-id")).trim();
    expect(machineId).toMatch(/^[0-9a-f]{32}$/);
    expect(machineId).not.toBe(original.machineId);
    const hostKeys = await clone.hostKeys();
    expect(hostKeys.length).toBeGreaterThan(0);
    expect(hostKeys.filter((k) => original.hostKeys.includes(k))).toEqual([]);
    const cloneBootId = await bootId(clone);
    expect(cloneBootId).not.toBe(original.bootId);
    // Sealing removed the agent's state: the original's lease is not in the copy.
    expect(JSON.parse(await clone.sshOk("ws-lease list --json")).leases).toEqual([]);

    const connected = await until(
      clone,
      "the clone's agent at the collector",
      Math.max(1, sshUpAt + 60_000 - Date.now()),
      async () => {
        const v = await view("vm-clone");
        return v?.connected && v.lastReportAtMs !== undefined ? v : undefined;
      },
    );
    expect(connected.state).toBe("Active");
    const uptime = await latestReport("vm-clone", cloneBootedAt, (r) => r.system?.uptimeSeconds);
    expect(uptime).toBeLessThan((Date.now() - cloneBootedAt) / 1000 + 5);
    expect(await clone.sshOk("sudo journalctl -b --no-pager -o cat -u ws-agent.service")).toMatch(
      /connected to collector/,
    );
    note("vm-clone: agent connected");
  });

  it("7. a schedule set in the VM with ws-lease starts it, powered off, at its minute in Europe/Berlin; the wait per stage is printed", async () => {
    // The clone of 6, running; on its own (`-t "7."`) a fresh guest under the clone's name.
    let guest = clone?.running ? clone : undefined;
    if (!guest) {
      cloneDisk = path.join(dir, "vm-clone.qcow2");
      await createOverlay(image.disk, cloneDisk);
      cloneSeed = await seedFor(CLONE, "vm-clone-0001");
      guest = await boot("vm-clone-boot1", cloneDisk, cloneSeed, MAC_CLONE, CLONE);
      await sshUp(guest);
    }
    const running = guest;
    await until(running, "vm-clone's agent at the collector", 3 * 60_000, async () => (await view(CLONE))?.connected);

    // The next whole minute at least 100 s away (time to set it and power off under emulation), on Berlin's clock.
    const fireMs = Math.ceil((Date.now() + 100_000) / 60_000) * 60_000;
    const hhmm = new Intl.DateTimeFormat("en-GB", {
      timeZone: SCHEDULE_ZONE,
      hour: "2-digit",
      minute: "2-digit",
      hourCycle: "h23",
    }).format(new Date(fireMs));
    const line = `daily ${hhmm} tz ${SCHEDULE_ZONE}`;
    const set = await running.ssh(`ws-lease schedule daily ${hhmm} --tz ${SCHEDULE_ZONE} --json`, 3 * 60_000);
    expect(set.code, `ws-lease schedule: ${set.stdout}${set.stderr}`).toBe(0);
    expect(JSON.parse(set.stdout)).toMatchObject({
      message: `schedule set: ${line}`,
      schedule: { valid: true, timeZone: SCHEDULE_ZONE, nextStartMs: fireMs },
    });
    // /api/vms carries it beside the VM's view.
    expect(((await view(CLONE)) as { schedule?: unknown } | undefined)?.schedule).toMatchObject({
      line,
      valid: true,
      nextStartMs: fireMs,
    });
    await collector.proc.waitFor(/event ScheduleSet: [^\n]*with ws-lease in the VM/, 30_000);
    note(`vm-clone: schedule set in the VM: ${line} (${new Date(fireMs).toISOString()})`);

    // The guest powers itself off (an idle stop by ws may have come first: off either way).
    if (running.running) await running.ssh("sudo systemctl poweroff", 60_000);
    expect(await running.waitForExit(5 * 60_000, "systemctl poweroff")).toEqual({ code: 0, signal: null });
    await until(running, "vm-clone disconnected at the collector", 60_000, async () =>
      (await view(CLONE))?.connected === false ? true : undefined,
    );
    // Not an assertion on speed: a guest still up at its minute is not started, so the scenario would prove nothing.
    if (Date.now() >= fireMs) throw new Error(`vm-clone was still connected at its scheduled minute ${hhmm}`);
    note("vm-clone: powered off; waiting for its scheduled minute");
    const readySecondsBefore = startToReadySum(await collector.metrics());

    const requestedAt = await eventually(
      () => (existsSync(startRequest(CLONE)) ? Number(readFileSync(startRequest(CLONE), "utf8").trim()) : undefined),
      fireMs - Date.now() + 3 * 60_000,
      "the scheduled start command",
    );
    // The start command asks; the harness boots the guest, as libvirt would for `virsh start`.
    const again = await boot("vm-clone-boot2", cloneDisk, cloneSeed, MAC_CLONE, CLONE);
    const qemuAt = Date.now();
    const sshAt = await sshUp(again).catch((error: Error) => {
      throw new Error(
        `${error.message}\n--- collector log (last lines):\n${collector.log().split("\n").slice(-40).join("\n")}`,
      );
    });
    const firstReportAt = await until(again, "the new boot's first Report", 3 * 60_000, async () => {
      const first = (await collector.trace(CLONE)).find(
        (entry) => entry.report && entry.at !== undefined && Date.parse(entry.at) >= qemuAt,
      );
      return first ? Date.parse(first.at!) : undefined;
    });
    // A new boot: the idle clock starts afresh, not from where the old boot's left off (which was past POLICY's 75 s).
    const afterBoot = await view(CLONE);
    expect(afterBoot?.state, JSON.stringify(afterBoot?.explanation ?? afterBoot)).toBe("Active");
    const progress = await until(again, "the starting page to say ready", 3 * 60_000, async () => {
      const stages = await collector.startStages(CLONE);
      return stages.status === "ready" ? stages : undefined;
    });

    // At its minute, not before; through the schedule's own path, once.
    expect(requestedAt).toBeGreaterThanOrEqual(fireMs);
    expect(firstReportAt).toBeGreaterThan(fireMs);
    expect(readFileSync(startRequest(CLONE), "utf8").trim().split("\n")).toHaveLength(1);
    await collector.proc.waitFor(
      new RegExp(`vm-clone: start requested by its schedule \\(${line.replaceAll("/", "\\/")}\\) via schedule`),
      30_000,
    );
    const metrics = await collector.metrics();
    expect(metrics).toMatch(/^workstation_starts_total\{trigger="schedule"\} 1$/m);

    const s = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
    const at = (name: string) => progress.stages.find((stage) => stage.name === name)?.atMs;
    const requestedByCollector = at("requested");
    expect(requestedByCollector).toBeGreaterThanOrEqual(fireMs);
    const stageLine = progress.stages
      .map((stage) => `${stage.label} ${stage.atMs === undefined ? "-" : `+${s(stage.atMs - fireMs)}`}`)
      .join(", ");
    note(
      `vm-clone: schedule start (${line}): due → start command ${s(requestedAt - fireMs)}, → QEMU started ${s(qemuAt - requestedAt)}, ` +
        `→ sshd answering ${s(sshAt - qemuAt)}, → agent's first Report ${s(firstReportAt - sshAt)}; ` +
        `due → first Report ${s(firstReportAt - fireMs)}; workstation_start_to_ready_seconds ` +
        `${(startToReadySum(metrics) - readySecondsBefore).toFixed(1)} s; starting page (from due): ${stageLine}`,
    );
  });

  it("8. a warm start learned from its owner's returns boots the stopped VM before their usual arrival; the person who logs in finds it up (used, a zero wait); the wait per stage is printed", async () => {
    // The earlier guests are done: their CPU is this boot's.
    for (const guest of guests) await guest.destroy();
    // The owner's zone: one where the next minutes are not near midnight (the arrival is today's).
    const zone = zoneAwayFromMidnight([SCHEDULE_ZONE, "America/New_York", "Asia/Tokyo"], Date.now());
    // Three weeks of returns on this weekday, 3 minutes from now in the owner's zone, each a 60 s
    // wait: the usual arrival is then, the lead ceil((60 s + 2 min) / 1 min) = 3 min, so the warm
    // start is due at the collector's first pass (every 30 s). A daylight saving change among those
    // weeks moves one of three; the median stays. The collector learns them from its config (a
    // standalone collector keeps returns in memory), so it starts now, for this scenario.
    const arrivalMs = Date.now() + 3 * 60_000;
    const returns = [3, 2, 1].map((weeks) => ({
      atMs: arrivalMs - weeks * 7 * 24 * 3600_000,
      trigger: "link" as const,
      waitSeconds: 60,
    }));
    const warmDir = path.join(dir, "warm-collector");
    await mkdir(warmDir, { recursive: true });
    warmCollector = await VmTestCollector.start({
      dir: warmDir,
      namespace: NAMESPACE,
      policy: POLICY,
      reportInterval: "3s",
      stopSocketFor: stopSocket,
      startRequestFor: startRequest,
      configuredVms: {
        [WARM]: {
          "workstation.aik8s.run/warm-start": "on",
          "workstation.aik8s.run/warm-start-window": "5m",
          // Longer than the window: only the window applies until a person comes, so a login under
          // emulation has time; after, the VM's own.
          "workstation.aik8s.run/idle-timeout": "15m",
          "workstation.aik8s.run/time-zone": zone,
          "workstation.aik8s.run/returns": encodeReturns(returns),
        },
      },
    });
    const warm = warmCollector;
    note(
      `vm-warm: collector on 127.0.0.1:${warm.grpcPort}; usual arrival ${new Date(arrivalMs).toISOString()} (${zone})`,
    );
    const seed = await seedFor(WARM, "vm-warm-0001", warm);
    const disk = path.join(dir, "vm-warm.qcow2");
    await createOverlay(image.disk, disk);

    const requestedAt = await eventually(
      () => (existsSync(startRequest(WARM)) ? Number(readFileSync(startRequest(WARM), "utf8").trim()) : undefined),
      3 * 60_000,
      "the warm start's start command",
    ).catch((error: Error) => {
      throw new Error(`${error.message}\n--- collector log:\n${warm.log().split("\n").slice(-30).join("\n")}`);
    });
    expect(requestedAt).toBeLessThan(arrivalMs);
    await warm.proc.waitFor(
      /vm-warm: start requested by a learned warm start \(usual arrival \d\d:\d\d, ready 3 min ahead\) via warm/,
      30_000,
    );
    // The start command asks; the harness boots the guest, as libvirt would for `virsh start`.
    const guest = await boot("vm-warm-boot1", disk, seed, MAC_WARM, WARM);
    const qemuAt = Date.now();
    const sshAt = await sshUp(guest);
    const firstReportAt = await eventually(
      async () => {
        const first = (await warm.trace(WARM)).find((entry) => entry.report && entry.at !== undefined);
        return first ? Date.parse(first.at!) : undefined;
      },
      3 * 60_000,
      "vm-warm's first Report",
    );
    const progress = await eventually(
      async () => {
        const stages = await warm.startStages(WARM);
        return stages.status === "ready" ? stages : undefined;
      },
      3 * 60_000,
      "vm-warm's starting page to say ready",
    );
    // The VM page says it: warm-started, waiting for its person.
    const page = (await getText(`http://127.0.0.1:${warm.httpPort}/vm/${NAMESPACE}/${WARM}`)).body;
    expect(page).toMatch(
      /<dd id="warm-start" data-on="true">on: <strong id="warm-waiting">warm-started [^<]+, waiting for you<\/strong>/,
    );

    // The person comes: a login and a keystroke, again until a pass of the runner has seen one
    // after the boot's first Report (the engine starts every clock there; a later one is a person).
    const terminal = guest.terminal();
    await terminal.shellTty({ timeoutMs: 120_000 });
    const arrivedAt = Date.now();
    const usedLine = await eventually(
      () => {
        terminal.write("echo here\r");
        return /event WarmStartUsed: [^\n]*/.exec(warm.log())?.[0];
      },
      3 * 60_000,
      "WarmStartUsed",
      10_000,
    );
    expect(usedLine).toContain("a person came while it ran");
    const metrics = await warm.metrics();
    expect(metrics).toMatch(/^workstation_starts_total\{trigger="warm"\} 1$/m);
    expect(metrics).toMatch(/^workstation_warm_starts_total\{outcome="used"\} 1$/m);
    // Their return found it up: a zero wait, under trigger warm.
    expect(metrics).toMatch(/^workstation_return_wait_seconds_count\{trigger="warm",stage="total"\} 1$/m);
    expect(metrics).toMatch(/^workstation_return_wait_seconds_sum\{trigger="warm",stage="total"\} 0$/m);
    expect(readFileSync(startRequest(WARM), "utf8").trim().split("\n")).toHaveLength(1);
    const after = (await getText(`http://127.0.0.1:${warm.httpPort}/api/vms`)).body;
    expect(
      (JSON.parse(after) as { vms: Array<{ name: string; warmStart?: unknown }> }).vms.find((v) => v.name === WARM)
        ?.warmStart,
    ).toMatchObject({
      on: true,
      lastWeek: { used: 1, wasted: 0 },
    });

    const s = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
    // The page's requested stage is the collector's clock, the request file's a moment later.
    const signed = (ms: number) => (ms < 0 ? `−${s(-ms)}` : `+${s(ms)}`);
    const stageLine = progress.stages
      .map((stage) => `${stage.label} ${stage.atMs === undefined ? "-" : signed(stage.atMs - requestedAt)}`)
      .join(", ");
    note(
      `vm-warm: warm start (${zone}): start command ${s(arrivalMs - requestedAt)} before the usual arrival, → QEMU started ${s(qemuAt - requestedAt)}, ` +
        `→ sshd answering ${s(sshAt - qemuAt)}, → agent's first Report ${s(firstReportAt - sshAt)}; ` +
        `the person logged in ${s(arrivedAt - requestedAt)} after it was asked for and waited 0 s; starting page (from the warm start): ${stageLine}`,
    );
  });
});

/** The sum of workstation_start_to_ready_seconds: one start's seconds, read before and after it. */
function startToReadySum(metrics: string): number {
  return Number(/^workstation_start_to_ready_seconds_sum (\S+)$/m.exec(metrics)?.[1] ?? 0);
}
