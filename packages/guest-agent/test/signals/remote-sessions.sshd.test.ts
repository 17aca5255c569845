/**
 * The remote-sessions signal against OpenSSH's sshd (test/support/sshd.ts) with sessions that
 * have no pty, as IDEs open them: `ssh -T host cat` fed 1 KiB every half second (an IDE's
 * exchange), the same with keep-alives only (ServerAliveInterval=1), and sftp. Then the shipped
 * agent's `probe --json`, and the collector's engine deciding on what the signal reported.
 *
 * The machine is shared with other tests: only this file's users (wstest16a/b/c) are looked at.
 * No test asserts a duration, only orderings of ages and the engine's transitions.
 */
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { promisify } from "node:util";
import { chmod, copyFile, mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { create, fromJson } from "@bufbuild/protobuf";
import { ReportSchema, SourceState, type Report } from "@ws/protocol";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { decide } from "../../../collector/src/engine/decide.js";
import { BUILTIN_DEFAULT_POLICY } from "../../../collector/src/engine/policy.js";
import type { Decision, Policy, VmRecord } from "../../../collector/src/engine/types.js";
import { systemClock } from "../../src/clock.js";
import { defaultRoots } from "../../src/roots.js";
import { createRemoteSessionsSignal, type RemoteSessionSignalValue } from "../../src/signals/remote-sessions.js";
import { loadUsers } from "../../src/users.js";
import { agentBundle, requireBundles } from "../../../../test/support/process.js";
import { SSH, startSshd, type RunningSshd } from "../../../../test/support/sshd.js";

const execFileAsync = promisify(execFile);

type Session = NonNullable<RemoteSessionSignalValue["sessions"]>[number];

const KEEPALIVE_USER = "wstest16a";
const TYPING_USER = "wstest16b";
const SFTP_USER = "wstest16c";

let sshd: RunningSshd;
let scratch: string;
const children: ChildProcess[] = [];
const timers: NodeJS.Timeout[] = [];

beforeAll(async () => {
  sshd = await startSshd({ users: [KEEPALIVE_USER, TYPING_USER, SFTP_USER] });
  scratch = await mkdtemp(path.join(os.tmpdir(), "ws16-remote-"));
  // A keep-alive-only session: cat waits on a stdin nobody writes to.
  children.push(
    spawn(SSH, sshd.sshNoTtyArgs(KEEPALIVE_USER, ["cat"], ["ServerAliveInterval=1"]), {
      stdio: ["pipe", "ignore", "pipe"],
    }),
  );
  // An IDE-like session: 1 KiB every half second, echoed back.
  const typing = spawn(SSH, sshd.sshNoTtyArgs(TYPING_USER, ["cat"]), { stdio: ["pipe", "ignore", "pipe"] });
  children.push(typing);
  timers.push(setInterval(() => typing.stdin!.write(`${"x".repeat(1023)}\n`), 500));
}, 120_000);

afterAll(async () => {
  for (const timer of timers) clearInterval(timer);
  for (const child of children) child.kill("SIGTERM");
  await sshd?.stop();
  if (scratch) await rm(scratch, { recursive: true, force: true });
});

async function sample(signal = createRemoteSessionsSignal()): Promise<Session[]> {
  const outcome = await signal.collect({
    roots: defaultRoots,
    clock: systemClock,
    users: await loadUsers(defaultRoots),
    signal: new AbortController().signal,
  });
  if (outcome.state !== "ok") throw new Error(`remote_sessions ${outcome.state}: ${outcome.message}`);
  return outcome.value.sessions ?? [];
}

const of = (sessions: Session[], user: string) => sessions.find((session) => session.user === user);

async function until<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}\nsshd log:\n${sshd.log().slice(-2000)}`);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

const delay = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("remote sessions with a real sshd", () => {
  it("reports the port the real sshd listens on (its LISTEN socket), the entry service being up", async () => {
    const outcome = await createRemoteSessionsSignal().collect({
      roots: defaultRoots,
      clock: systemClock,
      users: await loadUsers(defaultRoots),
      signal: new AbortController().signal,
    });
    if (outcome.state !== "ok") throw new Error(`remote_sessions ${outcome.state}: ${outcome.message}`);
    expect(outcome.value.sshdListeningPorts).toContain(sshd.port);
  }, 60_000);

  it("finds sessions without a pty with owner, peer, program and age; tells traffic from keep-alives", async () => {
    const signal = createRemoteSessionsSignal();
    // sshd's session process exists a moment before it starts the command: wait for both.
    const first = await until("both sessions running cat", async () => {
      const sessions = await sample(signal);
      return of(sessions, KEEPALIVE_USER)?.command === "cat" && of(sessions, TYPING_USER)?.command === "cat"
        ? sessions
        : undefined;
    });
    const users = await loadUsers(defaultRoots);
    expect(of(first, KEEPALIVE_USER)).toMatchObject({
      uid: users.byName(KEEPALIVE_USER)!.uid,
      remoteHost: "127.0.0.1",
      command: "cat",
    });
    // A sample in between: the typing session's traffic is then placed after it, well after the
    // keep-alive session opened (placed against `first` alone, the two can tie when that session
    // opened just before it).
    await delay(1_500);
    await sample(signal);
    await delay(3_000);
    const later = await sample(signal);
    const keepalive = of(later, KEEPALIVE_USER)!;
    const typing = of(later, TYPING_USER)!;
    // Keep-alives only: the last interaction is still the opening.
    expect(keepalive.interactionAgeSeconds).toBeGreaterThanOrEqual(keepalive.loginAgeSeconds! - 0.5);
    expect(keepalive.interactionAgeSeconds).toBeGreaterThan(2);
    // Traffic in the interval: an interaction since the opening, more recent than the keep-alive
    // session's (an order, not a time: a busy machine delays both samples alike).
    expect(typing.interactionAgeSeconds).toBeLessThan(typing.loginAgeSeconds!);
    expect(typing.interactionAgeSeconds).toBeLessThan(keepalive.interactionAgeSeconds!);
    expect(typing.trafficBytes! > of(first, TYPING_USER)!.trafficBytes!).toBe(true);
  }, 120_000);

  it("counts an sftp transfer as interaction, and an idle sftp session as open only", async () => {
    const payload = path.join(scratch, "payload.bin");
    await writeFile(payload, Buffer.alloc(2 * 1024 * 1024, 7));
    const target = `/tmp/ws16-sftp-${process.pid}.bin`;
    const sftp = spawn("/usr/bin/sftp", sshd.sftpArgs(SFTP_USER), { stdio: ["pipe", "pipe", "pipe"] });
    children.push(sftp);
    const signal = createRemoteSessionsSignal();
    const opened = await until("the sftp session", async () => {
      const session = of(await sample(signal), SFTP_USER);
      return session?.command === "sftp-server" ? session : undefined;
    });
    expect(opened.command).toBe("sftp-server");
    await delay(2_500);
    const idle = of(await sample(signal), SFTP_USER)!;
    expect(idle.interactionAgeSeconds).toBeGreaterThan(2);
    sftp.stdin!.write(`put ${payload} ${target}\n`);
    await until("the upload", async () =>
      (await stat(target).catch(() => undefined))?.size === 2 * 1024 * 1024 ? true : undefined,
    );
    // The transfer's burst is judged once it is complete (a second of silence read after it): the
    // next samples show it.
    const transferred = await until("the transfer counted as interaction", async () => {
      const session = of(await sample(signal), SFTP_USER)!;
      return session.interactionAgeSeconds! < idle.interactionAgeSeconds! ? session : undefined;
    });
    expect(transferred.interactionAgeSeconds).toBeLessThan(idle.interactionAgeSeconds!);
    sftp.stdin!.end("bye\n");
    await rm(target, { force: true });
  }, 120_000);

  it("a user's own processes named sshd, titled as a session and its monitor, are not a session", async () => {
    // comm "sshd" (a copy of bash by that name) and the titles sshd gives, all owned by the user:
    // the parent is no root monitor, so nothing here may be reported.
    const bin = path.join(scratch, "impostor");
    await mkdir(bin, { recursive: true });
    await chmod(scratch, 0o755);
    await chmod(bin, 0o755);
    await copyFile("/bin/bash", path.join(bin, "sshd"));
    await chmod(path.join(bin, "sshd"), 0o755);
    const sshdCopy = path.join(bin, "sshd");
    const inner = `exec -a "sshd: ${SFTP_USER}@notty" ${sshdCopy} -c "sleep 60; true"`;
    const impostor = spawn(
      "/usr/sbin/runuser",
      [
        "-u",
        SFTP_USER,
        "--",
        "/bin/bash",
        "-c",
        `exec -a "sshd: ${SFTP_USER} [priv]" ${sshdCopy} -c '${inner} & wait'`,
      ],
      // Its own process group: the test ends it whole (runuser, both titled shells, the sleep).
      { stdio: "ignore", detached: true },
    );
    try {
      const titled = await until("the impostor's session-titled process", async () => {
        for (const name of await readdir("/proc")) {
          if (!/^\d+$/.test(name)) continue;
          const cmdline = await readFile(`/proc/${name}/cmdline`, "utf8").catch(() => "");
          if (cmdline.startsWith(`sshd: ${SFTP_USER}@notty\0`)) return Number(name);
        }
        return undefined;
      });
      expect((await readFile(`/proc/${titled}/comm`, "utf8")).trim()).toBe("sshd");
      const sessions = await sample();
      expect(sessions.map((session) => session.pid)).not.toContain(titled);
    } finally {
      process.kill(-impostor.pid!, "SIGKILL");
    }
  }, 60_000);

  it("shows in the shipped agent's probe --json: the typing session interacts, the keep-alive one is open only", async () => {
    requireBundles();
    // Asynchronously: this process keeps typing into its session meanwhile. The window is longer
    // than any exchange (3 s): a burst still going is judged once it could no longer be a request
    // awaiting its answer (traffic-cadence.ts, issue 39).
    const { stdout } = await execFileAsync(process.execPath, [agentBundle, "probe", "--json", "--window", "5s"], {
      timeout: 60_000,
      env: { ...process.env, WS_AGENT_CONFIG: "/dev/null" },
    }).catch((error: { stdout?: string }) => ({ stdout: error.stdout ?? "" }));
    const report = fromJson(ReportSchema, JSON.parse(stdout));
    expect(report.sources.find((s) => s.source === "remote_sessions")?.state).toBe(SourceState.OK);
    const sessions = report.remoteSessions?.sessions ?? [];
    const keepalive = of(sessions, KEEPALIVE_USER)!;
    const typing = of(sessions, TYPING_USER)!;
    expect(keepalive.interactionAgeSeconds).toBeGreaterThanOrEqual(keepalive.loginAgeSeconds! - 0.5);
    expect(typing.interactionAgeSeconds).toBeLessThan(typing.loginAgeSeconds!);
    expect(typing.interactionAgeSeconds).toBeLessThan(keepalive.interactionAgeSeconds!);
  }, 120_000);

  it("the collector's engine stops the VM of the keep-alive-only session and keeps the one with traffic", async () => {
    // Short timings, as the collector's own config may set them (docs/policy.md).
    const policy: Policy = {
      ...BUILTIN_DEFAULT_POLICY,
      autostopEnabled: true,
      idleTimeoutSeconds: 8,
      gracePeriodSeconds: 4,
      weakActivityMaxSeconds: 2,
      reportIntervalSeconds: 1,
      agentLostAfterSeconds: 60,
    };
    const signal = createRemoteSessionsSignal();
    const vms = {
      [KEEPALIVE_USER]: { record: undefined as VmRecord | undefined, decisions: [] as Decision[] },
      [TYPING_USER]: { record: undefined as VmRecord | undefined, decisions: [] as Decision[] },
    };
    const startedAt = Date.now();
    while (Date.now() - startedAt < 20_000) {
      const sessions = await sample(signal);
      for (const [user, vm] of Object.entries(vms)) {
        // Each VM sees only its own user's session (the machine is shared with other tests).
        const report: Report = create(ReportSchema, {
          sources: [{ source: "remote_sessions", state: SourceState.OK }],
          remoteSessions: { sessions: sessions.filter((session) => session.user === user) },
        });
        const now = Date.now();
        const decision = decide(
          now,
          policy,
          { agentConnected: true, latestReport: { report, receivedAtMs: now } },
          vm.record,
        );
        vm.record = decision.next;
        vm.decisions.push(decision);
      }
      await delay(1_000);
    }
    const kept = vms[TYPING_USER];
    const stopped = vms[KEEPALIVE_USER];
    expect(stopped.decisions.map((d) => d.next.state)).toContain("Stopping");
    // What the keep-alive VM saw: an open session (weak), and no traffic after its opening.
    const seen = stopped.decisions.flatMap((d) => d.explanation.readings);
    expect(seen).toContainEqual(
      expect.objectContaining({
        signal: "remote-connected",
        strength: "weak",
        detail: "SSH session without a terminal is open (wstest16a from 127.0.0.1, running cat)",
      }),
    );
    expect(seen.filter((r) => r.signal === "remote-session" && r.counted)).toEqual([]);
    expect(kept.decisions.every((d) => d.next.state === "Active")).toBe(true);
    const strong = kept.decisions.at(-1)!.explanation.readings.find((r) => r.signal === "remote-session");
    expect(strong).toMatchObject({ strength: "strong" });
  }, 120_000);
});
