// A Notice from the collector, handed to the agent's lease service, reaches a
// user's real terminal and the notice file; `ws-lease status` in that
// terminal shows it; its cancellation reaches the terminal too.
import { readFile, rm, stat } from "node:fs/promises";
import { create } from "@bufbuild/protobuf";
import { DirectiveSchema, PolicyMode, VmState } from "@ws/protocol";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bundleLeaseCli, type LeaseCliBundle } from "../lease/support/bundle.js";
import { eventually, startHarness, type Harness } from "../lease/support/harness.js";
import { PtyShell } from "../lease/support/pty-shell.js";
import { ensureUser, type TestUser } from "../lease/support/users.js";

let bundle: LeaseCliBundle;
let h: Harness;
let user: TestUser;
let shell: PtyShell;

beforeAll(async () => {
  user = await ensureUser("wslease2");
  bundle = await bundleLeaseCli();
  h = await startHarness();
  shell = await PtyShell.start(user, { PATH: `${bundle.dir}:/usr/bin:/bin`, WS_AGENT_SOCKET: h.socketPath, TZ: "UTC" });
  h.terminals.push({ tty: shell.tty, uid: user.uid, user: user.name });
});
afterAll(async () => {
  shell?.close();
  await h?.remove();
  if (bundle) await rm(bundle.dir, { recursive: true, force: true });
});

describe("a stop notice through the agent", () => {
  it("reaches the terminal, the notice file and ws-lease status; its cancellation too", async () => {
    const from = shell.text.length;
    h.service.setCollectorConnected(true, "collector.example:8443");
    h.service.applyDirective(
      create(DirectiveSchema, {
        status: {
          state: VmState.STOPPING_PENDING,
          idleSeconds: 7200,
          stopInSeconds: 600,
          explanation: "idle for 2h",
          mode: PolicyMode.ENFORCE,
        },
        notice: {
          id: "vm-7-stop-1",
          stopInSeconds: 600,
          reason: "no activity for 2h",
          keepRunningHint: "",
          idleSeconds: 7200,
          mode: PolicyMode.ENFORCE,
        },
      }),
    );
    await shell.waitFor(
      (screen) => /\*\*\* ws: this VM will stop in 10 minutes \(at \d\d:\d\d\) \*\*\*/.test(screen.slice(from)),
      30_000,
      "the notice on the terminal",
    );
    expect(shell.text.slice(from)).toContain("`ws-lease 2h`");
    await eventually(
      async () => (await readFile(h.noticeFile, "utf8").catch(() => "")).includes('"vm-7-stop-1"'),
      "the notice file",
    );

    const status = await shell.run("ws-lease status");
    expect(status.exitCode).toBe(0);
    expect(status.output).toMatch(/STOP PENDING: this VM will stop in (10|9) minutes \(at \d\d:\d\d\)/);
    expect(status.output).toContain("To keep it running: ws-lease 2h");

    const beforeCancel = shell.text.length;
    h.service.applyDirective(
      create(DirectiveSchema, { noticeCleared: { id: "vm-7-stop-1", reason: "a lease by wslease2" } }),
    );
    await shell.waitFor(
      (screen) => screen.slice(beforeCancel).includes("the pending stop of this VM is cancelled"),
      30_000,
      "the cancellation on the terminal",
    );
    await eventually(
      async () =>
        stat(h.noticeFile).then(
          () => false,
          () => true,
        ),
      "the notice file to go",
    );
    const after = await shell.run("ws-lease status");
    expect(after.output).not.toContain("STOP PENDING");
  });
});
