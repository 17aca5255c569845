/**
 * The sessions signal over fixture root trees: the captured utmp files under run/, tty nodes
 * under dev/ with owners and times set by the test, live pids as proc/<pid> directories.
 */
import { copyFile, mkdir, mkdtemp, rm, utimes, writeFile, chown } from "node:fs/promises";
import { readFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeEach, describe, expect, it } from "vitest";
import { SessionKind } from "@ws/protocol";
import { manualClock } from "../../src/clock.js";
import type { Roots } from "../../src/roots.js";
import { createSessionsSignal } from "../../src/signals/sessions.js";
import { buildSessions, isSafeTtyName, userLogins } from "../../src/signals/sessions-parse.js";
import type { SignalContext } from "../../src/signals/types.js";
import { usersFrom } from "../../src/users.js";
import { parseUtmp } from "../../src/signals/utmp.js";

const fixtures = path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "fixtures", "utmp");
const users = usersFrom([
  { name: "root", uid: 0, gid: 0, home: "/root", shell: "/bin/bash" },
  { name: "wstest1", uid: 1001, gid: 1001, home: "/home/wstest1", shell: "/bin/bash" },
  { name: "wstest2", uid: 1002, gid: 1002, home: "/home/wstest2", shell: "/bin/bash" },
  { name: "nobody", uid: 65534, gid: 65534, home: "/nonexistent", shell: "/usr/sbin/nologin" },
]);
// The login times in the captured utmp are 1795962770.068 and 1795962770.348.
const NOW_MS = 1795962770_000 + 3600_000;

const scratch: string[] = [];
afterAll(async () => {
  for (const dir of scratch) await rm(dir, { recursive: true, force: true });
});

interface TtyNode {
  uid: number;
  inputAgoS: number;
  outputAgoS: number;
}

/** A root tree with dev/pts nodes, live pids in proc/, and optionally a utmp fixture in run/. */
async function rootTree(options: {
  utmp?: string;
  pids?: number[];
  ttys?: Record<string, TtyNode>;
  pts?: boolean;
  /** Where dev/ sits below the tree's root. */
  devDir?: string;
}): Promise<Roots> {
  const root = await mkdtemp(path.join(os.tmpdir(), "ws-sessions-"));
  scratch.push(root);
  const roots: Roots = {
    proc: path.join(root, "proc"),
    sys: path.join(root, "sys"),
    dev: path.join(root, options.devDir ?? "dev"),
    run: path.join(root, "run"),
    home: path.join(root, "home"),
    etc: path.join(root, "etc"),
    state: path.join(root, "state"),
  };
  await mkdir(roots.run, { recursive: true });
  await mkdir(roots.proc, { recursive: true });
  await mkdir(roots.dev, { recursive: true });
  if (options.pts !== false) {
    await mkdir(path.join(roots.dev, "pts"));
    await writeFile(path.join(roots.dev, "pts", "ptmx"), "");
  }
  if (options.utmp) await copyFile(path.join(fixtures, options.utmp), path.join(roots.run, "utmp"));
  for (const pid of options.pids ?? []) await mkdir(path.join(roots.proc, String(pid)));
  for (const [name, node] of Object.entries(options.ttys ?? {})) {
    const file = path.join(roots.dev, name);
    await mkdir(path.dirname(file), { recursive: true });
    await writeFile(file, "");
    await chown(file, node.uid, node.uid);
    await utimes(file, (NOW_MS - node.inputAgoS * 1000) / 1000, (NOW_MS - node.outputAgoS * 1000) / 1000);
  }
  return roots;
}

function context(roots: Roots): SignalContext {
  return { roots, users, clock: manualClock(NOW_MS), signal: new AbortController().signal };
}

const LIVE_PIDS = [14293, 14304];
const TTYS: Record<string, TtyNode> = {
  "pts/1": { uid: 1001, inputAgoS: 30, outputAgoS: 5 },
  "pts/3": { uid: 1002, inputAgoS: 600, outputAgoS: 600 },
  // Not in utmp: a tmux pane of wstest2.
  "pts/5": { uid: 1002, inputAgoS: 12, outputAgoS: 2 },
  // Not in utmp and not a person's: root's and nobody's terminals are not sessions.
  "pts/7": { uid: 0, inputAgoS: 1, outputAgoS: 1 },
  "pts/9": { uid: 65534, inputAgoS: 1, outputAgoS: 1 },
};

describe("sessions signal over a fixture root tree", () => {
  let signal = createSessionsSignal();
  beforeEach(() => {
    signal = createSessionsSignal();
  });

  it("reports utmp logins with tty ages and user-owned ptys outside utmp", async () => {
    const roots = await rootTree({ utmp: "two-ssh-logins.utmp", pids: LIVE_PIDS, ttys: TTYS });
    const outcome = await signal.collect(context(roots));
    expect(outcome).toEqual({
      state: "ok",
      value: {
        sessions: [
          {
            kind: SessionKind.UTMP,
            user: "wstest1",
            uid: 1001,
            tty: "pts/1",
            remoteHost: "127.0.0.1",
            pid: 14293,
            loginAgeSeconds: 3599.932,
            inputAgeSeconds: 30,
            outputAgeSeconds: 5,
          },
          {
            kind: SessionKind.UTMP,
            user: "wstest2",
            uid: 1002,
            tty: "pts/3",
            remoteHost: "127.0.0.1",
            pid: 14304,
            loginAgeSeconds: 3599.652,
            inputAgeSeconds: 600,
            outputAgeSeconds: 600,
          },
          { kind: SessionKind.PTY, user: "wstest2", uid: 1002, tty: "pts/5", inputAgeSeconds: 12, outputAgeSeconds: 2 },
        ],
      },
    });
  });

  it("drops a utmp record whose process is gone; its pts, reused, counts as a pty", async () => {
    const roots = await rootTree({ utmp: "two-ssh-logins.utmp", pids: [14293], ttys: TTYS });
    const outcome = await signal.collect(context(roots));
    expect(outcome.state).toBe("ok");
    if (outcome.state !== "ok") return;
    expect(outcome.message).toMatch(/ignored 1 stale record/);
    expect(outcome.value.sessions!.map((s) => [s.kind, s.tty, s.user])).toEqual([
      [SessionKind.UTMP, "pts/1", "wstest1"],
      [SessionKind.PTY, "pts/3", "wstest2"],
      [SessionKind.PTY, "pts/5", "wstest2"],
    ]);
  });

  it("ignores DEAD_PROCESS slots of closed sessions", async () => {
    const roots = await rootTree({ utmp: "one-logged-out.utmp", pids: LIVE_PIDS, ttys: { "pts/1": TTYS["pts/1"]! } });
    const outcome = await signal.collect(context(roots));
    expect(outcome.state === "ok" && outcome.value.sessions!.map((s) => s.tty)).toEqual(["pts/1"]);
  });

  it("still reports ptys when utmp is absent, and says so", async () => {
    const roots = await rootTree({ pids: LIVE_PIDS, ttys: TTYS });
    const outcome = await signal.collect(context(roots));
    expect(outcome.state).toBe("ok");
    if (outcome.state !== "ok") return;
    expect(outcome.message).toMatch(/utmp absent/);
    expect(outcome.value.sessions!.map((s) => [s.kind, s.tty, s.user])).toEqual([
      [SessionKind.PTY, "pts/1", "wstest1"],
      [SessionKind.PTY, "pts/3", "wstest2"],
      [SessionKind.PTY, "pts/5", "wstest2"],
    ]);
  });

  it("uses the complete records of a truncated utmp and notes the cut", async () => {
    const roots = await rootTree({ utmp: "truncated.utmp", pids: LIVE_PIDS, ttys: { "pts/1": TTYS["pts/1"]! } });
    const outcome = await signal.collect(context(roots));
    expect(outcome.state).toBe("ok");
    if (outcome.state !== "ok") return;
    expect(outcome.message).toMatch(/truncated trailing record \(200 bytes\)/);
    expect(outcome.value.sessions!.map((s) => [s.kind, s.tty])).toEqual([[SessionKind.UTMP, "pts/1"]]);
  });

  it("survives malformed records without leaving dev/ for a hostile tty name", async () => {
    const roots = await rootTree({
      utmp: "malformed.utmp",
      pids: [...LIVE_PIDS, 424242, 424243],
      ttys: TTYS,
      devDir: "a/dev",
    });
    // What "../../etc/shadow" below dev/ would reach: it exists, and must not be timed.
    await mkdir(roots.etc, { recursive: true });
    await writeFile(path.join(roots.etc, "shadow"), "");
    expect(path.join(roots.dev, "../../etc/shadow")).toBe(path.join(roots.etc, "shadow"));
    const outcome = await signal.collect(context(roots));
    expect(outcome.state).toBe("ok");
    if (outcome.state !== "ok") return;
    const sessions = outcome.value.sessions!;
    const traversal = sessions.find((s) => s.tty === "../../etc/shadow");
    expect(traversal).toMatchObject({ kind: SessionKind.UTMP, user: "wstest1", pid: 424242 });
    expect(traversal!.inputAgeSeconds).toBeUndefined();
    const display = sessions.find((s) => s.tty === ":0");
    expect(display).toMatchObject({ kind: SessionKind.UTMP, remoteHost: ":0" });
    expect(display!.inputAgeSeconds).toBeUndefined();
    // Unknown type, pid -1 (no process) and the empty user are not logins.
    expect(sessions.filter((s) => s.kind === SessionKind.UTMP).map((s) => s.tty)).toEqual([
      "pts/1",
      "../../etc/shadow",
      ":0",
      "pts/1",
    ]);
  });

  it("fails, with what it could not read, when neither utmp nor /dev/pts exist", async () => {
    const roots = await rootTree({ pts: false });
    const outcome = await signal.collect(context(roots));
    expect(outcome.state).toBe("failed");
    expect(outcome.message).toMatch(/utmp absent.*pts/);
  });
});

describe("pure parts", () => {
  const records = parseUtmp(readFileSync(path.join(fixtures, "malformed.utmp")));

  it("userLogins keeps USER_PROCESS records with a user, in file order", () => {
    expect(userLogins(records).map((r) => r.line)).toEqual([
      "pts/1",
      "../../etc/shadow",
      ":0",
      `pts/${"9".repeat(28)}`,
      "pts/1",
    ]);
  });

  it("isSafeTtyName accepts device names and refuses anything that could leave /dev", () => {
    for (const name of ["pts/0", "pts/17", "tty1", "ttyS0", "hvc0", "console"]) expect(isSafeTtyName(name)).toBe(true);
    for (const name of ["", ":0", "../etc/shadow", "pts/../../x", "/etc/passwd", "pts/", "pts//1", ".."]) {
      expect(isSafeTtyName(name)).toBe(false);
    }
  });

  it("buildSessions gives an unknown uid's pty its number as the user, and a login without a tty no ages", () => {
    const [login] = userLogins(parseUtmp(readFileSync(path.join(fixtures, "two-ssh-logins.utmp"))));
    const sessions = buildSessions(
      {
        logins: [{ ...login!, user: "ldapuser" }],
        ttys: new Map([
          ["pts/1", { uid: 5000, atimeMs: NOW_MS - 1000, mtimeMs: NOW_MS }],
          ["pts/2", { uid: 4242, atimeMs: NOW_MS + 60_000, mtimeMs: NOW_MS }],
          ["pts/10", { uid: 4242, atimeMs: NOW_MS, mtimeMs: NOW_MS }],
        ]),
        ptsNames: ["pts/10", "pts/2", "pts/1"],
      },
      users,
      NOW_MS,
    );
    expect(sessions).toEqual([
      // Not in passwd (a directory-service account): the uid comes from the pts owner.
      expect.objectContaining({
        kind: SessionKind.UTMP,
        user: "ldapuser",
        uid: 5000,
        inputAgeSeconds: 1,
        outputAgeSeconds: 0,
      }),
      // A time in the future (clock stepped back) is age 0, never negative.
      { kind: SessionKind.PTY, user: "4242", uid: 4242, tty: "pts/2", inputAgeSeconds: 0, outputAgeSeconds: 0 },
      { kind: SessionKind.PTY, user: "4242", uid: 4242, tty: "pts/10", inputAgeSeconds: 0, outputAgeSeconds: 0 },
    ]);
  });
});
