/**
 * The sessions signal against the real thing: OpenSSH's sshd on a loopback port, logins through
 * pseudo-terminals driven by node-pty, and the machine's own /run/utmp, /dev and /proc.
 *
 * The kernel moves a tty's atime/mtime only when the clock enters a new 8-second slot, so the
 * tests wait for an age of 9 s or more before typing: the keystroke then always lands in a
 * later slot and must move the time. No test asserts a duration, only orderings.
 */
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import pty from "node-pty";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SessionKind } from "@ws/protocol";
import { systemClock } from "../../src/clock.js";
import { defaultRoots, type Roots } from "../../src/roots.js";
import { createSessionsSignal, type SessionSignalValue } from "../../src/signals/sessions.js";
import type { SignalContext } from "../../src/signals/types.js";
import { loadUsers } from "../../src/users.js";
import { pollUntil, spawnPty, spawnUserTerminal, type PtySession } from "../../../../test/support/pty.js";
import { SSH, startSshd, type RunningSshd } from "../../../../test/support/sshd.js";

type Session = NonNullable<SessionSignalValue["sessions"]>[number];

let sshd: RunningSshd;
const terminals: PtySession[] = [];
const scratch: string[] = [];

beforeAll(async () => {
  sshd = await startSshd({ users: ["wstest1", "wstest2"] });
});

afterAll(async () => {
  for (const terminal of terminals) await terminal.close();
  await sshd?.stop();
  for (const dir of scratch) await rm(dir, { recursive: true, force: true });
});

async function context(roots: Roots = defaultRoots): Promise<SignalContext> {
  return { roots, clock: systemClock, users: await loadUsers(roots), signal: new AbortController().signal };
}

async function sessionOn(tty: string, roots?: Roots): Promise<Session | undefined> {
  const outcome = await createSessionsSignal().collect(await context(roots));
  if (outcome.state !== "ok") throw new Error(`sessions signal ${outcome.state}: ${outcome.message}`);
  return outcome.value.sessions?.find((session) => session.tty === tty);
}

async function sshLogin(user: string): Promise<{ terminal: PtySession; tty: string }> {
  const terminal = spawnPty(SSH, sshd.sshArgs(user));
  terminals.push(terminal);
  const tty = (await terminal.shellTty({ timeoutMs: 60_000 })).replace(/^\/dev\//, "");
  return { terminal, tty };
}

describe("sessions signal with a real sshd", () => {
  it("lists an ssh login made through a pseudo-terminal with its tty, user and remote host", async () => {
    const { tty } = await sshLogin("wstest1");
    const session = await pollUntil(`utmp session on ${tty}`, () => sessionOn(tty));
    expect(session).toMatchObject({
      kind: SessionKind.UTMP,
      user: "wstest1",
      tty,
      remoteHost: "127.0.0.1",
    });
    expect(session.uid).toBe((await context()).users.byName("wstest1")!.uid);
    expect(session.pid).toBeGreaterThan(0);
    expect(session.loginAgeSeconds).toBeGreaterThanOrEqual(0);
    expect(session.inputAgeSeconds).toBeGreaterThanOrEqual(0);
    expect(session.outputAgeSeconds).toBeGreaterThanOrEqual(0);
  });

  it("lets the input age grow in silence and resets it on a keystroke", async () => {
    const { terminal, tty } = await sshLogin("wstest2");
    const first = await pollUntil(`utmp session on ${tty}`, () => sessionOn(tty));
    const quiet = await pollUntil(
      "the input age to pass 9 s without typing",
      async () => {
        const session = await sessionOn(tty);
        return session && session.inputAgeSeconds! >= 9 ? session : undefined;
      },
      { timeoutMs: 90_000, intervalMs: 500 },
    );
    expect(quiet.inputAgeSeconds).toBeGreaterThan(first.inputAgeSeconds!);

    terminal.write("x");
    const typed = await pollUntil(
      "the keystroke to reset the input age",
      async () => {
        const session = await sessionOn(tty);
        return session && session.inputAgeSeconds! < quiet.inputAgeSeconds! ? session : undefined;
      },
      { timeoutMs: 30_000 },
    );
    expect(typed.inputAgeSeconds).toBeLessThan(quiet.inputAgeSeconds!);
    terminal.write("\x7f");
  });

  it("reports output separately: a command printing long after the last keystroke has a younger output age", async () => {
    const { terminal, tty } = await sshLogin("wstest1");
    await pollUntil(`utmp session on ${tty}`, () => sessionOn(tty));
    const from = terminal.output().length;
    // Sleeping past one 8-second slot guarantees the echo moves mtime past the keystrokes' slot.
    terminal.write("sleep 10; echo WS_DONE_$((6*7))\r");
    await terminal.waitFor("WS_DONE_42", { from, timeoutMs: 60_000 });
    const session = await pollUntil(`utmp session on ${tty}`, () => sessionOn(tty));
    expect(session.outputAgeSeconds).toBeLessThan(session.inputAgeSeconds!);
  });

  it("still reports the ssh login, as a pty, when utmp is absent", async () => {
    const { tty } = await sshLogin("wstest1");
    const emptyRun = await mkdtemp(path.join(os.tmpdir(), "ws-no-utmp-"));
    scratch.push(emptyRun);
    const roots = { ...defaultRoots, run: emptyRun };
    const outcome = await createSessionsSignal().collect(await context(roots));
    expect(outcome.state).toBe("ok");
    if (outcome.state !== "ok") return;
    expect(outcome.message).toMatch(/utmp absent/);
    expect(outcome.value.sessions?.find((s) => s.tty === tty)).toMatchObject({
      kind: SessionKind.PTY,
      user: "wstest1",
    });
  });
});

describe("sessions signal with pseudo-terminals outside utmp", () => {
  it("counts a terminal that wstest2's own program opened (as tmux or an IDE does) as a pty session", async () => {
    const terminal = await spawnUserTerminal("wstest2");
    terminals.push(terminal);
    const tty = (await terminal.shellTty({ timeoutMs: 60_000 })).replace(/^\/dev\//, "");
    const session = await pollUntil(`pty session on ${tty}`, () => sessionOn(tty));
    expect(session).toMatchObject({ kind: SessionKind.PTY, user: "wstest2", tty });
    expect(session.uid).toBe((await context()).users.byName("wstest2")!.uid);
    expect(session.loginAgeSeconds).toBeUndefined();
    expect(session.inputAgeSeconds).toBeGreaterThanOrEqual(0);
  });

  it("does not give wstest2 a shell that root's node-pty started with uid/gid: devpts made that pts root's", async () => {
    const { uid, gid } = (await context()).users.byName("wstest2")!;
    const asUser = pty.spawn("/bin/bash", ["--noprofile", "--norc", "-i"], {
      name: "xterm",
      cols: 80,
      rows: 24,
      cwd: "/tmp",
      env: { PATH: "/usr/bin:/bin", HOME: "/tmp" },
      uid,
      gid,
    });
    let output = "";
    asUser.onData((data) => (output += data));
    try {
      asUser.write("echo WS_ID=$(id -u) WS_TTY=$(tty)\r");
      const match = await pollUntil(
        "the uid/gid shell to answer",
        () => /WS_ID=(\d+) WS_TTY=\/dev\/(pts\/\d+)/.exec(output) ?? undefined,
      );
      expect(Number(match[1])).toBe(uid);
      const outcome = await createSessionsSignal().collect(await context());
      expect(outcome.state).toBe("ok");
      if (outcome.state !== "ok") return;
      expect(outcome.value.sessions?.some((s) => s.tty === match[2])).toBe(false);
    } finally {
      asUser.kill("SIGKILL");
    }
  });
});
