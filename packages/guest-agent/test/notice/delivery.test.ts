// NoticeDelivery against real pseudo-terminals owned by a test user, with a
// clock and timers the test moves by hand.
import { mkdtemp, readFile, rm, stat } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { create } from "@bufbuild/protobuf";
import { NoticeClearedSchema, NoticeSchema, PolicyMode } from "@ws/protocol";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { manualClock } from "../../src/clock.js";
import { NoticeDelivery, type Broadcast } from "../../src/notice/delivery.js";
import { writeToTerminal, type TerminalTarget } from "../../src/notice/terminals.js";
import { defaultRoots, type Roots } from "../../src/roots.js";
import { loadUsers } from "../../src/users.js";
import { PtyShell } from "../lease/support/pty-shell.js";
import { ensureUser, type TestUser } from "../lease/support/users.js";
import { ManualScheduler } from "./support/manual-scheduler.js";

let user: TestUser;
let shell: PtyShell;
let base: string;
let roots: Roots;
const extraShells: PtyShell[] = [];

beforeAll(async () => {
  user = await ensureUser("wslease1");
  shell = await PtyShell.start(user, { PATH: "/usr/bin:/bin" });
  base = await mkdtemp(path.join(os.tmpdir(), "ws-notice-"));
  roots = { ...defaultRoots, run: path.join(base, "run"), state: path.join(base, "state") };
});
afterAll(async () => {
  shell?.close();
  for (const extra of extraShells) extra.close();
  if (base) await rm(base, { recursive: true, force: true });
});

let counter = 0;
async function delivery(terminals: () => TerminalTarget[], noticeFile = path.join(base, `notice-${++counter}.json`)) {
  const clock = manualClock(); // 2023-11-14T22:13:20Z
  const scheduler = new ManualScheduler(clock);
  const logs: string[] = [];
  const broadcasts: Broadcast[] = [];
  const notices = new NoticeDelivery({
    roots,
    users: await loadUsers(roots),
    clock,
    scheduler,
    log: (line) => logs.push(line),
    listTerminals: async () => terminals(),
    noticeFile,
    timeZone: "UTC",
    desktop: false,
  });
  notices.onBroadcast = (broadcast) => broadcasts.push(broadcast);
  return { clock, scheduler, logs, broadcasts, notices, noticeFile };
}

const target = (): TerminalTarget => ({ tty: shell.tty, uid: user.uid, user: user.name });
const notice = (id: string, stopInSeconds: number) =>
  create(NoticeSchema, {
    id,
    stopInSeconds,
    reason: "no activity for 2h",
    keepRunningHint: "ws-lease 2h",
    idleSeconds: 7200,
    mode: PolicyMode.ENFORCE,
  });

afterEach(() => {
  // Each test waits for its own text; a marker line keeps them apart on the shared screen.
  return writeToTerminal(defaultRoots.dev, shell.tty, `\r\n--- next test ---\r\n`).then(() => undefined);
});

describe("NoticeDelivery", () => {
  it("announces on the user's terminal, writes the notice file, repeats at 5 and 1 minutes, and cancels", async () => {
    const d = await delivery(() => [target()]);
    const from = shell.text.length;
    await d.notices.deliver(notice("stop-1", 600), d.clock.monotonicMs());
    await shell.waitFor(
      (screen) => screen.slice(from).includes("*** ws: this VM will stop in 10 minutes (at 22:23) ***"),
      30_000,
      "the notice",
    );
    expect(shell.text.slice(from)).toContain("To keep it running: ws-lease 2h.");

    const file = JSON.parse(await readFile(d.noticeFile, "utf8"));
    expect(file).toMatchObject({
      id: "stop-1",
      stopInSeconds: 600,
      stopAt: "2023-11-14T22:23:20.000Z",
      reason: "no activity for 2h",
      mode: "enforce",
    });
    expect((await stat(d.noticeFile)).mode & 0o777).toBe(0o644);
    expect(d.scheduler.pendingDelaysMs()).toEqual([300_000, 540_000]);

    // The collector repeats the same notice each Directive: no second announcement.
    d.clock.advance(15_000);
    await d.notices.deliver(notice("stop-1", 585), d.clock.monotonicMs());
    expect(d.broadcasts.map((b) => b.kind)).toEqual(["notice"]);
    expect(d.notices.pending()).toMatchObject({ id: "stop-1", stopInSeconds: 585 });

    const beforeReminder = shell.text.length;
    expect(d.scheduler.fireNext()).toBe(true);
    await shell.waitFor(
      (screen) => screen.slice(beforeReminder).includes("will stop in 5 minutes (at 22:23)"),
      30_000,
      "the 5-minute reminder",
    );
    expect(d.scheduler.fireNext()).toBe(true);
    await shell.waitFor(
      (screen) => screen.slice(beforeReminder).includes("will stop in 1 minute (at 22:23)"),
      30_000,
      "the 1-minute reminder",
    );

    const beforeCancel = shell.text.length;
    await d.notices.clear(create(NoticeClearedSchema, { id: "stop-1", reason: "a lease by wslease1" }));
    await shell.waitFor(
      (screen) => screen.slice(beforeCancel).includes("*** ws: the pending stop of this VM is cancelled ***"),
      30_000,
      "the cancellation",
    );
    expect(shell.text.slice(beforeCancel)).toContain("Why: a lease by wslease1. Nothing to do.");
    await expect(stat(d.noticeFile)).rejects.toThrow(/ENOENT/);
    expect(d.scheduler.pendingDelaysMs()).toEqual([]);
    expect(d.notices.pending()).toBeUndefined();
    expect(d.broadcasts.map((b) => b.kind)).toEqual(["notice", "reminder", "reminder", "cancelled"]);
  });

  it("a new notice replaces the pending one and its reminders", async () => {
    const d = await delivery(() => [target()]);
    await d.notices.deliver(notice("stop-a", 1800), d.clock.monotonicMs());
    expect(d.scheduler.pendingDelaysMs()).toHaveLength(3);
    await d.notices.deliver(notice("stop-b", 120), d.clock.monotonicMs());
    expect(d.scheduler.pendingDelaysMs()).toEqual([60_000]);
    expect(d.broadcasts.map((b) => `${b.kind}:${b.id}`)).toEqual(["notice:stop-a", "notice:stop-b"]);
    // A cancellation for a notice that is no longer pending changes nothing.
    await d.notices.clear(create(NoticeClearedSchema, { id: "stop-a", reason: "" }));
    expect(d.notices.pending()?.id).toBe("stop-b");
  });

  it("cancels a notice a previous run of the agent announced (the notice file is still there)", async () => {
    const first = await delivery(() => [target()]);
    await first.notices.deliver(notice("stop-old", 600), first.clock.monotonicMs());
    await first.notices.close();
    const second = await delivery(() => [target()], first.noticeFile);
    const from = shell.text.length;
    await second.notices.clear(create(NoticeClearedSchema, { id: "stop-old", reason: "terminal input on pts/0" }));
    await shell.waitFor(
      (screen) => screen.slice(from).includes("Why: terminal input on pts/0. Nothing to do."),
      30_000,
      "the cancellation",
    );
    await expect(stat(first.noticeFile)).rejects.toThrow(/ENOENT/);

    // Nothing was announced and there is no file: nothing to take back.
    const third = await delivery(() => [target()]);
    await third.notices.clear(create(NoticeClearedSchema, { id: "never-sent", reason: "" }));
    expect(third.broadcasts).toEqual([]);
  });

  it("a frozen terminal loses the message; the others still get it, and nothing hangs", async () => {
    const frozen = await PtyShell.start(user, { PATH: "/usr/bin:/bin" });
    extraShells.push(frozen);
    frozen.freeze();
    // Fill its buffers until a write, tried again after the kernel had time to move data along, still finds no room.
    const chunk = "x".repeat(4096);
    let filled = false;
    for (let i = 0; i < 4096 && !filled; i++) {
      const outcome = await writeToTerminal(defaultRoots.dev, frozen.tty, chunk);
      if (outcome.ok) continue;
      expect(outcome.error).toBe("EAGAIN");
      await new Promise((resolve) => setTimeout(resolve, 100));
      filled = !(await writeToTerminal(defaultRoots.dev, frozen.tty, "x")).ok;
    }
    expect(filled, "the frozen terminal's buffer never filled").toBe(true);

    const d = await delivery(() => [{ tty: frozen.tty, uid: user.uid, user: user.name }, target()]);
    const from = shell.text.length;
    await d.notices.deliver(notice("stop-frozen", 600), d.clock.monotonicMs());
    await shell.waitFor(
      (screen) => screen.slice(from).includes("will stop in 10 minutes"),
      30_000,
      "the notice on the live terminal",
    );
    const outcomes = d.broadcasts[0]!.terminals;
    expect(outcomes).toContainEqual({ tty: shell.tty, ok: true });
    expect(outcomes.find((outcome) => outcome.tty === frozen.tty)).toMatchObject({ ok: false });
    expect(d.logs.some((line) => line.includes(`not to ${frozen.tty}`))).toBe(true);
  });
});
