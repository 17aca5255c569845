/**
 * A Jupyter terminal that prints every second and nobody types into it is not a person: a real
 * Jupyter Server (run as a test user, as a user's own server runs) with two terminals, each
 * printing the date every second from a background loop; one is left alone, the other gets a
 * keystroke (Enter) every two seconds through the terminal websocket, as a browser tab sends it.
 * The agent's jupyter and sessions signals read them; the collector's engine decides for two
 * simulated VMs, each seeing its own terminal and its pty. The untouched one is stopped after
 * idle-timeout + grace; the typed one stays Active.
 *
 * The machine is shared: each VM sees only its own terminal and pty. No duration is asserted.
 */
import { chmod, chown, mkdir, mkdtemp, readFile, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { create } from "@bufbuild/protobuf";
import { JupyterSignalSchema, ReportSchema, SourceState } from "@ws/protocol";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { decide } from "../../../collector/src/engine/decide.js";
import { BUILTIN_DEFAULT_POLICY } from "../../../collector/src/engine/policy.js";
import type { Decision, Policy, VmRecord } from "../../../collector/src/engine/types.js";
import { systemClock } from "../../src/clock.js";
import { defaultRoots, type Roots } from "../../src/roots.js";
import { createJupyterSignal, type JupyterSignalValue } from "../../src/signals/jupyter.js";
import { createSessionsSignal, type SessionSignalValue } from "../../src/signals/sessions.js";
import type { SignalContext } from "../../src/signals/types.js";
import { loadUsers } from "../../src/users.js";
import {
  connectTerminal,
  startJupyterServer,
  startTerminal,
  type RunningJupyter,
  type TerminalSession,
} from "../../../../test/support/jupyter.js";
import { ensureTestUser } from "../../../../test/support/sshd.js";

const USER = "wstest16d";
let scratch: string;
let server: RunningJupyter;
const terminals: Array<{ name: string; tab: TerminalSession; pty: string }> = [];
const timers: NodeJS.Timeout[] = [];

async function openTerminal(marker: string): Promise<{ name: string; tab: TerminalSession; pty: string }> {
  const { name } = await startTerminal(server);
  const tab = await connectTerminal(server, name);
  const ttyFile = path.join(scratch, `tty-${marker}`);
  tab.type(`tty > ${ttyFile}; (while :; do date; sleep 1; done) &\r`);
  const deadline = Date.now() + 30_000;
  for (;;) {
    const pty = (await readFile(ttyFile, "utf8").catch(() => "")).trim();
    if (/^\/dev\/pts\/\d+$/.test(pty)) return { name, tab, pty: pty.slice("/dev/".length) };
    if (Date.now() > deadline)
      throw new Error(
        `terminal ${name} did not run its command; it printed:\n${tab.output()}\nserver log:\n${server.log()}`,
      );
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

beforeAll(async () => {
  const account = await ensureTestUser(USER);
  scratch = await mkdtemp(path.join(os.tmpdir(), "ws16-jterm-"));
  await mkdir(path.join(scratch, "runtime"));
  await chmod(scratch, 0o777);
  server = await startJupyterServer({
    runtimeDir: path.join(scratch, "runtime"),
    runAs: { uid: account.uid, gid: account.gid },
    shell: "/bin/bash",
  });
  await chown(path.join(scratch, "runtime"), account.uid, account.gid);
  terminals.push(await openTerminal("alone"), await openTerminal("typed"));
}, 180_000);

afterAll(async () => {
  for (const timer of timers) clearInterval(timer);
  for (const terminal of terminals) terminal.tab.close();
  await server?.stop();
  if (scratch) await rm(scratch, { recursive: true, force: true });
});

describe("a Jupyter terminal's output is not a person", () => {
  it("stops the VM whose terminal only prints, keeps the one someone types into", async () => {
    const [alone, typed] = terminals as [(typeof terminals)[0], (typeof terminals)[0]];
    timers.push(setInterval(() => typed.tab.type("\r"), 2_000));
    // Short timings, as the collector's own config may set them (docs/policy.md).
    const policy: Policy = {
      ...BUILTIN_DEFAULT_POLICY,
      autostopEnabled: true,
      idleTimeoutSeconds: 20,
      gracePeriodSeconds: 5,
      weakActivityMaxSeconds: 5,
      reportIntervalSeconds: 1,
      agentLostAfterSeconds: 60,
    };
    const empty = path.join(scratch, "empty");
    await mkdir(empty);
    // Only the configured server is read; sessions from /dev, without utmp.
    const roots: Roots = { ...defaultRoots, home: empty, run: empty };
    const context: SignalContext = {
      roots,
      clock: systemClock,
      users: await loadUsers(defaultRoots),
      signal: new AbortController().signal,
    };
    const jupyter = createJupyterSignal({ urls: [`${server.url}?token=${server.token}`], timeoutMs: 10_000 });
    const sessions = createSessionsSignal();
    const vms = new Map(
      terminals.map((terminal) => [
        terminal.name,
        { terminal, record: undefined as VmRecord | undefined, decisions: [] as Decision[] },
      ]),
    );
    const startedAt = Date.now();
    while (Date.now() - startedAt < 60_000 && vms.get(alone.name)!.record?.state !== "Stopping") {
      const [j, s] = await Promise.all([jupyter.collect(context), sessions.collect(context)]);
      if (j.state !== "ok" || s.state !== "ok")
        throw new Error(`signals: jupyter ${j.state} ${j.message ?? ""}; sessions ${s.state} ${s.message ?? ""}`);
      const jValue = create(JupyterSignalSchema, j.value as JupyterSignalValue);
      const sValue = s.value as SessionSignalValue;
      for (const vm of vms.values()) {
        const report = create(ReportSchema, {
          sources: [
            { source: "jupyter", state: SourceState.OK },
            { source: "sessions", state: SourceState.OK },
          ],
          jupyter: {
            servers: jValue.servers.map((entry) => ({
              ...entry,
              terminals: entry.terminals.filter((t) => t.name === vm.terminal.name),
            })),
          },
          sessions: { sessions: (sValue.sessions ?? []).filter((session) => session.tty === vm.terminal.pty) },
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
      await new Promise((resolve) => setTimeout(resolve, 1_000));
    }
    const stopped = vms.get(alone.name)!;
    const kept = vms.get(typed.name)!;
    expect(alone.tab.output()).toMatch(/\d\d:\d\d:\d\d/); // it did print, every second
    expect(stopped.decisions.map((d) => d.next.state)).toEqual(expect.arrayContaining(["StoppingPending", "Stopping"]));
    // The terminal's fresh last_activity was never taken for use.
    expect(
      stopped.decisions.flatMap((d) => d.explanation.readings).filter((r) => r.signal === "jupyter-terminal"),
    ).toEqual([]);
    expect(kept.decisions.every((d) => d.next.state === "Active")).toBe(true);
    expect(kept.decisions.at(-1)!.explanation.lastActivity).toBe(`input on ${typed.pty} (${USER})`);
  }, 180_000);
});
