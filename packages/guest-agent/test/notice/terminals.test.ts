// Writing to terminals: the pure choice of ptys, and real writes to real
// pseudo-terminals owned by a test user.
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import {
  isTerminalName,
  listUserPtys,
  listUtmpTerminals,
  mergeTerminals,
  userPtys,
  utmpTerminals,
  writeToTerminal,
} from "../../src/notice/terminals.js";
import { parseUtmp } from "../../src/signals/utmp.js";
import { loadUsers, usersFrom } from "../../src/users.js";
import { defaultRoots } from "../../src/roots.js";
import { PtyShell } from "../lease/support/pty-shell.js";
import { ensureUser, type TestUser } from "../lease/support/users.js";

const users = usersFrom([
  { name: "alice", uid: 1001, gid: 1001, home: "/home/alice", shell: "/bin/bash" },
  { name: "nobody", uid: 65534, gid: 65534, home: "/nonexistent", shell: "/usr/sbin/nologin" },
]);

describe("which terminals", () => {
  it("human-owned /dev/pts entries, named for their owner; not root's, not nobody's, not ptmx", () => {
    const targets = userPtys(
      [
        { name: "ptmx", uid: 0, isCharacterDevice: true },
        { name: "0", uid: 0, isCharacterDevice: true },
        { name: "12", uid: 1001, isCharacterDevice: true },
        { name: "3", uid: 1001, isCharacterDevice: true },
        { name: "4", uid: 65534, isCharacterDevice: true },
        { name: "5", uid: 1002, isCharacterDevice: true },
        { name: "6", uid: 1001, isCharacterDevice: false },
      ],
      users,
    );
    expect(targets).toEqual([
      { tty: "pts/3", uid: 1001, user: "alice" },
      { tty: "pts/5", uid: 1002, user: "1002" },
      { tty: "pts/12", uid: 1001, user: "alice" },
    ]);
  });

  it("only names a login can have", () => {
    for (const name of ["pts/0", "pts/123", "tty1", "ttyS0", "hvc0", "console"])
      expect(isTerminalName(name)).toBe(true);
    for (const name of ["../etc/passwd", "pts/../../etc/shadow", "pts/", "sda", "/dev/pts/1", "null", "pts/1/x"])
      expect(isTerminalName(name)).toBe(false);
  });

  it("utmp login sessions (captured from a real sshd): live logins only, never a line outside /dev", async () => {
    const utmpFixtures = path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "fixtures", "utmp");
    const fixture = (name: string): Promise<Buffer> => readFile(path.join(utmpFixtures, name));
    const known = usersFrom([{ name: "wstest1", uid: 2001, gid: 2001, home: "/nonexistent", shell: "/bin/bash" }]);
    expect(utmpTerminals(parseUtmp(await fixture("two-ssh-logins.utmp")), known)).toEqual([
      { tty: "pts/1", uid: 2001, user: "wstest1" },
      { tty: "pts/3", uid: -1, user: "wstest2" },
    ]);
    expect(utmpTerminals(parseUtmp(await fixture("one-logged-out.utmp")), known)).toEqual([
      { tty: "pts/1", uid: 2001, user: "wstest1" },
    ]);
    const hostile = utmpTerminals(parseUtmp(await fixture("malformed.utmp")), known).map((target) => target.tty);
    expect(hostile.every((tty) => isTerminalName(tty))).toBe(true);
    expect(hostile).not.toContain("../../etc/shadow");
    expect(await listUtmpTerminals(path.join(utmpFixtures, "missing"), known)).toEqual([]);
  });

  it("merges sources, each terminal once", () => {
    expect(
      mergeTerminals(
        [{ tty: "pts/1", uid: 1001, user: "alice" }],
        [
          { tty: "pts/1", uid: 1001, user: "alice" },
          { tty: "tty1", uid: 0, user: "root" },
        ],
      ),
    ).toEqual([
      { tty: "pts/1", uid: 1001, user: "alice" },
      { tty: "tty1", uid: 0, user: "root" },
    ]);
  });
});

describe("real terminals", () => {
  let user: TestUser;
  let shell: PtyShell;
  let scratch: string;

  beforeAll(async () => {
    user = await ensureUser("wslease1");
    shell = await PtyShell.start(user, { PATH: "/usr/bin:/bin" });
    scratch = await mkdtemp(path.join(os.tmpdir(), "ws-notice-tty-"));
  });
  afterAll(async () => {
    shell?.close();
    if (scratch) await rm(scratch, { recursive: true, force: true });
  });

  it("finds a user's pseudo-terminal in /dev/pts, with its owner", async () => {
    const found = await listUserPtys(defaultRoots.dev, await loadUsers(defaultRoots));
    expect(found).toContainEqual({ tty: shell.tty, uid: user.uid, user: user.name });
  });

  it("writes to it: the text appears on the terminal's screen", async () => {
    const outcome = await writeToTerminal(defaultRoots.dev, shell.tty, "\r\nhello from the agent\r\n");
    expect(outcome).toEqual({ tty: shell.tty, ok: true });
    await shell.waitFor((screen) => screen.includes("hello from the agent"), 30_000, "the message on the screen");
  });

  it("refuses what is not a terminal, and reports a missing one without throwing", async () => {
    expect(await writeToTerminal(defaultRoots.dev, "../etc/passwd", "x")).toMatchObject({
      ok: false,
      error: "not a terminal name",
    });
    expect(await writeToTerminal(defaultRoots.dev, "pts/9999999", "x")).toMatchObject({ ok: false, error: "ENOENT" });
    // A regular file planted where a terminal should be is not written.
    await writeFile(path.join(scratch, "console"), "");
    expect(await writeToTerminal(scratch, "console", "x")).toMatchObject({
      ok: false,
      error: "not a character device",
    });
  });
});
