// ws-lease as people use it: typed into a real shell, in a real
// pseudo-terminal, as normal users; the agent's service in this process.
import { execFile } from "node:child_process";
import { rm } from "node:fs/promises";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Answer, WireLease } from "../../src/lease/wire.js";
import { bundleLeaseCli, type LeaseCliBundle } from "./support/bundle.js";
import { startHarness, type Harness } from "./support/harness.js";
import { PtyShell } from "./support/pty-shell.js";
import { ensureUser, type TestUser } from "./support/users.js";

const run = promisify(execFile);

let bundle: LeaseCliBundle;
let h: Harness;
let alice: TestUser;
let bob: TestUser;
let aliceShell: PtyShell;
let bobShell: PtyShell;

function shellEnv(): Record<string, string> {
  return { PATH: `${bundle.dir}:/usr/local/bin:/usr/bin:/bin`, WS_AGENT_SOCKET: h.socketPath, TZ: "UTC" };
}

/** Runs the bundled CLI as `user` (no terminal), for its JSON output. */
async function cliAs(
  user: TestUser | "root",
  args: string[],
): Promise<{ stdout: string; stderr: string; code: number }> {
  const ids = user === "root" ? {} : { uid: user.uid, gid: user.gid };
  try {
    const { stdout, stderr } = await run(process.execPath, [bundle.cli, ...args], {
      ...ids,
      env: { WS_AGENT_SOCKET: h.socketPath, PATH: "/usr/bin:/bin" },
    });
    return { stdout, stderr, code: 0 };
  } catch (error) {
    const failure = error as { stdout: string; stderr: string; code: number };
    return { stdout: failure.stdout, stderr: failure.stderr, code: failure.code };
  }
}

async function listAs(user: TestUser | "root"): Promise<WireLease[]> {
  const result = await cliAs(user, ["list", "--json"]);
  expect(result.code, result.stderr).toBe(0);
  return (JSON.parse(result.stdout) as { leases: WireLease[] }).leases;
}

/** One raw request line, sent as `user` by a process that answers the identity challenge honestly. */
async function rawAs(user: TestUser, request: Record<string, unknown>): Promise<Answer> {
  const { stdout } = await run(process.execPath, [bundle.rawRequest, h.socketPath, JSON.stringify(request)], {
    uid: user.uid,
    gid: user.gid,
  });
  return JSON.parse(stdout.trim()) as Answer;
}

beforeAll(async () => {
  [alice, bob] = await Promise.all([ensureUser("wslease1"), ensureUser("wslease2")]);
  bundle = await bundleLeaseCli();
  h = await startHarness();
  aliceShell = await PtyShell.start(alice, shellEnv());
  bobShell = await PtyShell.start(bob, shellEnv());
});

afterAll(async () => {
  aliceShell?.close();
  bobShell?.close();
  await h?.remove();
  if (bundle) await rm(bundle.dir, { recursive: true, force: true });
});

describe("ws-lease typed by users in real terminals", () => {
  let trainingId = "";

  it("a user types `ws-lease 8h --reason training`: the lease is theirs, by the uid the kernel reports", async () => {
    const typed = await aliceShell.run("ws-lease 8h --reason training");
    expect(typed.exitCode, typed.output).toBe(0);
    const match = /Lease ([0-9a-f]{8}) taken: this VM keeps running until .* \(8h\), for "training"/.exec(typed.output);
    expect(match, typed.output).not.toBeNull();
    trainingId = match![1]!;
    expect(typed.output).toContain("not reachable right now");

    const leases = await listAs(alice);
    const lease = leases.find((candidate) => candidate.id === trainingId);
    expect(lease).toMatchObject({
      uid: alice.uid,
      user: "wslease1",
      reason: "training",
      requestedSeconds: 8 * 3600,
      confirmed: false,
    });

    const listed = await aliceShell.run("ws-lease list");
    expect(listed.exitCode).toBe(0);
    // UNTIL is "HH:MM", or "Mon HH:MM" when the lease ends on another day (8 h from the afternoon on).
    expect(listed.output).toMatch(new RegExp(`${trainingId}\\s+wslease1\\s+(?:\\S+ )?\\d\\d:\\d\\d\\s+(?:7h 59m|8h)`));
    expect(listed.output).toContain("not yet confirmed");
  });

  it("a request that lies about its uid still gets the caller's own uid", async () => {
    const answer = await rawAs(bob, { op: "take", seconds: 3600, reason: "pretending", uid: 0, user: "root" });
    expect(answer.ok).toBe(true);
    if (!answer.ok || answer.op !== "take") throw new Error("unexpected answer");
    expect(answer.lease.uid).toBe(bob.uid);
    expect(answer.lease.user).toBe("wslease2");
    const leases = await listAs("root");
    expect(leases.find((lease) => lease.id === answer.lease.id)).toMatchObject({ uid: bob.uid, user: "wslease2" });

    // Nor does claiming to be the owner let bob cancel alice's lease.
    const lyingCancel = await rawAs(bob, { op: "cancel", id: trainingId, uid: alice.uid, user: "wslease1" });
    expect(lyingCancel).toMatchObject({ ok: false, error: { code: "forbidden" } });
  });

  it("another user cannot cancel it; the message names the owner", async () => {
    const attempt = await bobShell.run(`ws-lease cancel ${trainingId}`);
    expect(attempt.exitCode).toBe(1);
    expect(attempt.output).toContain(
      `lease ${trainingId} belongs to wslease1 (uid ${alice.uid}): only wslease1 or root may cancel it`,
    );
    expect((await listAs(bob)).some((lease) => lease.id === trainingId)).toBe(true);

    // --all only reaches bob's own leases.
    const all = await bobShell.run("ws-lease cancel --all");
    expect(all.exitCode).toBe(0);
    const left = await listAs(bob);
    expect(left.some((lease) => lease.id === trainingId)).toBe(true);
    expect(left.some((lease) => lease.uid === bob.uid)).toBe(false);
  });

  it("the lease survives an agent restart", async () => {
    await h.restart();
    const leases = await listAs(alice);
    expect(leases.find((lease) => lease.id === trainingId)).toMatchObject({ uid: alice.uid, reason: "training" });
  });

  it("root can cancel it", async () => {
    const cancelled = await cliAs("root", ["cancel", trainingId]);
    expect(cancelled.code, cancelled.stderr).toBe(0);
    expect(cancelled.stdout).toContain(`Cancelled lease ${trainingId} of wslease1`);
    expect((await listAs(alice)).some((lease) => lease.id === trainingId)).toBe(false);
  });

  it("`ws-lease 30d` is refused, naming the cap", async () => {
    const refused = await aliceShell.run("ws-lease 30d");
    expect(refused.exitCode).toBe(1);
    expect(refused.output).toContain("30d is longer than this VM allows: a lease can last at most 24h");
    expect(refused.output).toContain("ws-lease 24h");
  });

  it("the owner cancels their own lease without naming it", async () => {
    const taken = await aliceShell.run("ws-lease 90m");
    expect(taken.exitCode, taken.output).toBe(0);
    const cancelled = await aliceShell.run("ws-lease cancel");
    expect(cancelled.exitCode, cancelled.output).toBe(0);
    expect(cancelled.output).toMatch(/Cancelled lease [0-9a-f]{8} of wslease1/);
  });

  it("status reads well and says the collector is not connected", async () => {
    const status = await aliceShell.run("ws-lease status");
    expect(status.exitCode, status.output).toBe(0);
    expect(status.output).toContain("Collector:   NOT connected");
    expect(status.output).toContain("a lease lasts at most 24h");
    const json = await cliAs(alice, ["status", "--json"]);
    expect(JSON.parse(json.stdout)).toMatchObject({
      collector: { connected: false },
      capSeconds: 86400,
      capSource: "default",
    });
  });

  it("--man is a manual page; bad usage exits 2", async () => {
    const help = await aliceShell.run("ws-lease --man");
    expect(help.exitCode).toBe(0);
    for (const section of ["SYNOPSIS", "DESCRIPTION", "EXAMPLES", "EXIT STATUS"])
      expect(help.output).toContain(section);
    const bad = await aliceShell.run("ws-lease 8 hours");
    expect(bad.exitCode).toBe(2);
    expect(bad.output).toContain("ws-lease:");
  });

  it("the agent not running: a plain message, how to check, exit 1", async () => {
    const missing = path.join(h.base, "no-agent", "agent.sock");
    const result = await aliceShell.run(`WS_AGENT_SOCKET=${missing} ws-lease status`);
    expect(result.exitCode).toBe(1);
    expect(result.output).toContain("the ws agent is not running on this VM");
    expect(result.output).toContain("systemctl status ws-agent");
  });
});
