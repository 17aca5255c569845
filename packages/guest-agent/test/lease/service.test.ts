// The lease service in this process, driven over its real unix socket.
import { mkdir, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { connect, type Socket } from "node:net";
import path from "node:path";
import { create } from "@bufbuild/protobuf";
import { DirectiveSchema, PolicyMode, VmState } from "@ws/protocol";
import { afterEach, describe, expect, it } from "vitest";
import { manualClock } from "../../src/clock.js";
import { callAgent } from "../../src/lease/client.js";
import { rootSocketFor } from "../../src/lease/peer-proof.js";
import type { Answer, WireLease } from "../../src/lease/wire.js";
import { eventually, rawLines, startHarness, type Harness } from "./support/harness.js";

const harnesses: Harness[] = [];
afterEach(async () => {
  for (const harness of harnesses.splice(0)) await harness.remove();
});

async function harness(options: Parameters<typeof startHarness>[0] = {}): Promise<Harness> {
  const started = await startHarness(options);
  harnesses.push(started);
  return started;
}

function expectOk<T extends Answer>(answer: Answer, op: string): Extract<T, { ok: true }> {
  if (!answer.ok) throw new Error(`expected ${op} to succeed, got ${answer.error.code}: ${answer.error.message}`);
  expect(answer.op).toBe(op);
  return answer as Extract<T, { ok: true }>;
}

async function take(h: Harness, seconds: number, reason = "work"): Promise<WireLease> {
  const answer = await callAgent(h.socketPath, { op: "take", seconds, reason });
  return expectOk<Extract<Answer, { op: "take" }>>(answer, "take").lease;
}

describe("LeaseService", () => {
  it("grants a lease to the caller the kernel names, reports it as an age, audits it", async () => {
    const h = await harness();
    const lease = await take(h, 8 * 3600, "training");
    expect(lease.uid).toBe(0);
    expect(lease.user).toBe("root");
    expect(lease.reason).toBe("training");
    expect(lease.confirmed).toBe(false);
    expect(lease.id).toMatch(/^[0-9a-f]{8}$/);

    const report = h.service.reportLeases();
    expect(report.leases).toHaveLength(1);
    expect(report.leases?.[0]).toMatchObject({
      id: lease.id,
      uid: 0,
      user: "root",
      reason: "training",
      requestedSeconds: 28800,
      confirmed: false,
    });
    expect(report.leases?.[0]?.ageSeconds).toBeGreaterThanOrEqual(0);

    await eventually(
      async () =>
        (await readFile(path.join(h.stateDir, "lease-audit.log"), "utf8").catch(() => "")).includes("action=granted"),
      "the audit line",
    );
    const auditNow = await readFile(path.join(h.stateDir, "lease-audit.log"), "utf8");
    expect(auditNow).toMatch(
      new RegExp(`action=granted id=${lease.id} uid=0 user=root requested=8h holds=8h .*reason=training`),
    );
  });

  it("socket 0666 in a 0755 directory; proof directory 1733; state file 0600", async () => {
    const h = await harness();
    await take(h, 3600);
    expect((await stat(h.socketPath)).mode & 0o777).toBe(0o666);
    expect((await stat(path.dirname(h.socketPath))).mode & 0o777).toBe(0o755);
    expect((await stat(path.join(path.dirname(h.socketPath), "proof"))).mode & 0o7777).toBe(0o1733);
    expect((await stat(path.join(h.stateDir, "leases.json"))).mode & 0o777).toBe(0o600);
  });

  it("applies the collector's decisions: confirmed, clamped to max-keep-running, refused", async () => {
    const h = await harness();
    const a = await take(h, 8 * 3600);
    const b = await take(h, 3600);
    const c = await take(h, 600);
    h.service.applyDirective(
      create(DirectiveSchema, {
        leaseDecisions: [
          {
            id: a.id,
            accepted: true,
            clamped: true,
            effectiveRemainingSeconds: 4 * 3600,
            maxKeepRunningSeconds: 4 * 3600,
          },
          { id: b.id, accepted: true, clamped: false, effectiveRemainingSeconds: 3600 },
          { id: c.id, accepted: false, message: "leases are disabled for this VM" },
          { id: "ffffffff", accepted: true },
        ],
      }),
    );
    const list = expectOk<Extract<Answer, { op: "list" }>>(
      await callAgent(h.socketPath, { op: "list" }),
      "list",
    ).leases;
    const byId = new Map(list.map((lease) => [lease.id, lease]));
    expect(byId.get(a.id)).toMatchObject({
      confirmed: true,
      clamped: true,
      maxKeepRunningSeconds: 14400,
      requestedSeconds: 28800,
    });
    expect(byId.get(a.id)!.holdSeconds).toBeLessThanOrEqual(4 * 3600 + 5);
    expect(byId.get(a.id)!.remainingSeconds).toBeLessThanOrEqual(4 * 3600);
    expect(byId.get(b.id)).toMatchObject({ confirmed: true, clamped: false, refused: false });
    expect(byId.get(c.id)).toMatchObject({
      confirmed: true,
      refused: true,
      message: "leases are disabled for this VM",
    });
    expect(h.service.reportLeases().leases?.every((lease) => lease.confirmed)).toBe(true);
    await eventually(async () => {
      const text = await readFile(path.join(h.stateDir, "lease-audit.log"), "utf8");
      return (
        text.includes(`action=clamped id=${a.id}`) &&
        text.includes(`action=refused id=${c.id}`) &&
        text.includes(`action=confirmed id=${b.id}`)
      );
    }, "clamped, refused and confirmed audit lines");
  });

  it("refuses a lease over the cap, naming it: the default 24h, then the policy's", async () => {
    const h = await harness();
    const over = await callAgent(h.socketPath, { op: "take", seconds: 30 * 86400, reason: "" });
    expect(over).toMatchObject({ ok: false, error: { code: "over_cap", capSeconds: 86400, capSource: "default" } });
    if (!over.ok) expect(over.error.message).toContain("24h");

    h.service.applyDirective(
      create(DirectiveSchema, {
        policy: { maxKeepRunningSeconds: 4 * 3600, mode: PolicyMode.ENFORCE, autostopEnabled: true },
      }),
    );
    const overPolicy = await callAgent(h.socketPath, { op: "take", seconds: 5 * 3600, reason: "" });
    expect(overPolicy).toMatchObject({
      ok: false,
      error: { code: "over_cap", capSeconds: 14400, capSource: "policy" },
    });
    await take(h, 4 * 3600);

    // The cap learnt from the policy survives a restart, before any collector speaks again.
    await h.restart();
    const afterRestart = await callAgent(h.socketPath, { op: "take", seconds: 5 * 3600, reason: "" });
    expect(afterRestart).toMatchObject({
      ok: false,
      error: { code: "over_cap", capSeconds: 14400, capSource: "policy" },
    });
  });

  it("keeps leases across a restart", async () => {
    const h = await harness();
    const lease = await take(h, 2 * 3600, "overnight");
    h.service.applyDirective(
      create(DirectiveSchema, {
        leaseDecisions: [{ id: lease.id, accepted: true, effectiveRemainingSeconds: 2 * 3600 }],
      }),
    );
    await h.restart();
    const list = expectOk<Extract<Answer, { op: "list" }>>(
      await callAgent(h.socketPath, { op: "list" }),
      "list",
    ).leases;
    expect(list).toHaveLength(1);
    expect(list[0]).toMatchObject({ id: lease.id, reason: "overnight", uid: 0, confirmed: true });
    expect(list[0]!.remainingSeconds).toBeGreaterThan(3600);
    expect(h.logs.some((line) => line.includes("restored 1 lease"))).toBe(true);
  });

  it("a truncated state file: starts anyway, moves it aside, logs it", async () => {
    const h = await harness();
    await take(h, 3600);
    await h.stop();
    const file = path.join(h.stateDir, "leases.json");
    const full = await readFile(file, "utf8");
    await writeFile(file, full.slice(0, Math.floor(full.length / 2)));
    await h.restart();
    const list = expectOk<Extract<Answer, { op: "list" }>>(
      await callAgent(h.socketPath, { op: "list" }),
      "list",
    ).leases;
    expect(list).toEqual([]);
    const files = await readdir(h.stateDir);
    const aside = files.filter((name) => name.startsWith("leases.json.corrupt-"));
    expect(aside).toHaveLength(1);
    expect(await readFile(path.join(h.stateDir, aside[0]!), "utf8")).toBe(full.slice(0, Math.floor(full.length / 2)));
    expect(h.logs.some((line) => line.includes("is corrupt") && line.includes(aside[0]!))).toBe(true);
    // And it goes on working.
    await take(h, 600);
  });

  it("expires leases on the monotonic clock and audits it; a wall-clock step changes nothing", async () => {
    const clock = manualClock();
    const h = await harness({ clock });
    const lease = await take(h, 3600);
    clock.advance(30 * 60 * 1000);
    expect(h.service.reportLeases().leases?.[0]?.ageSeconds).toBe(1800);
    clock.advance(31 * 60 * 1000);
    expect(h.service.reportLeases().leases).toEqual([]);
    await eventually(
      async () =>
        (await readFile(path.join(h.stateDir, "lease-audit.log"), "utf8")).includes(`action=expired id=${lease.id}`),
      "the expired audit line",
    );
  });

  it("answers malformed requests with errors and keeps serving", async () => {
    const h = await harness();
    const answers = await rawLines(
      h.socketPath,
      [
        "not json",
        "[1,2]",
        JSON.stringify({ op: "explode" }),
        JSON.stringify({ op: "take", seconds: -5 }),
        JSON.stringify({ op: "cancel" }),
        JSON.stringify({ op: "status" }),
      ],
      6,
    );
    const parsed = answers.slice(1).map((line) => JSON.parse(line) as Answer);
    expect(parsed.slice(0, 5).map((answer) => (answer.ok ? "ok" : answer.error.code))).toEqual([
      "bad_request",
      "bad_request",
      "bad_request",
      "bad_duration",
      "bad_request",
    ]);
    expect(parsed[5]).toMatchObject({ ok: true, op: "status" });

    const huge = await rawLines(h.socketPath, ["x".repeat(40_000)], 1);
    expect(JSON.parse(huge[1]!)).toMatchObject({ ok: false, error: { code: "bad_request" } });

    // No proof file: who the caller is cannot be established, so nothing is granted.
    const unproven = await rawLines(h.socketPath, [JSON.stringify({ op: "take", seconds: 60, uid: 1234 })], 1);
    expect(JSON.parse(unproven[1]!)).toMatchObject({ ok: false, error: { code: "unverified" } });
    expect(h.service.reportLeases().leases).toEqual([]);

    expectOk(await callAgent(h.socketPath, { op: "status" }), "status");
  });

  it("connections held open without a request lock nobody out: the oldest are pushed out, root has its own socket", async () => {
    const h = await harness();
    const held: Socket[] = [];
    const pushedOut: string[] = [];
    try {
      // More silent connections than the agent lets wait (512).
      for (let i = 0; i < 520; i++) {
        const socket = connect(h.socketPath);
        socket.on("error", () => undefined);
        socket.on("data", (chunk) => {
          if (chunk.toString().includes('"busy"')) pushedOut.push(String(i));
        });
        held.push(socket);
        await new Promise<void>((resolve) => socket.once("data", () => resolve()));
      }
      // A newcomer on the shared socket is served (it pushes out the oldest silent one) ...
      const served = await rawLines(h.socketPath, [JSON.stringify({ op: "status" })], 1);
      expect(JSON.parse(served[1]!)).toMatchObject({ ok: true, op: "status" });
      await eventually(async () => pushedOut.length >= 9, "the oldest silent connections to be pushed out");
      expect(pushedOut.slice(0, 9)).toEqual(["0", "1", "2", "3", "4", "5", "6", "7", "8"]);
      // ... and root goes through its own socket (0600: the kernel admits root alone).
      expect((await stat(rootSocketFor(h.socketPath))).mode & 0o777).toBe(0o600);
      expectOk(await callAgent(h.socketPath, { op: "status" }), "status");
    } finally {
      for (const socket of held) socket.destroy();
    }
  });

  it("counts connections per proven uid: the ninth open one of the same caller is told to close some", async () => {
    const h = await harness();
    const held: Socket[] = [];
    try {
      // Callers without a proof share one bucket (uid -1), limited like any uid.
      for (let i = 0; i < 8; i++) {
        const socket = connect(h.socketPath);
        held.push(socket);
        const answered = new Promise<void>((resolve) => {
          let lines = 0;
          socket.on("data", (chunk) => {
            lines += chunk.toString().split("\n").length - 1;
            if (lines >= 2) resolve();
          });
        });
        socket.write(`${JSON.stringify({ op: "status" })}\n`);
        await answered;
      }
      const refused = await rawLines(h.socketPath, [JSON.stringify({ op: "status" })], 1);
      expect(JSON.parse(refused[1]!)).toMatchObject({
        ok: false,
        error: { code: "busy", message: expect.stringContaining("already hold 8 connections") },
      });
    } finally {
      for (const socket of held) socket.destroy();
    }
    await eventually(
      async () => JSON.parse((await rawLines(h.socketPath, [JSON.stringify({ op: "status" })], 1))[1]!).ok === true,
      "the agent to serve again",
    );
  });

  it("cancel: by id, unknown id, --all; reports the change", async () => {
    let changes = 0;
    const h = await harness({ onLeasesChanged: () => changes++ });
    const a = await take(h, 600);
    await take(h, 700);
    await take(h, 800);
    expect(changes).toBe(3);
    expect(await callAgent(h.socketPath, { op: "cancel", id: "00000000" })).toMatchObject({
      ok: false,
      error: { code: "not_found" },
    });
    const one = expectOk<Extract<Answer, { op: "cancel" }>>(
      await callAgent(h.socketPath, { op: "cancel", id: a.id }),
      "cancel",
    );
    expect(one.cancelled.map((lease) => lease.id)).toEqual([a.id]);
    const all = expectOk<Extract<Answer, { op: "cancel" }>>(
      await callAgent(h.socketPath, { op: "cancel", all: true }),
      "cancel",
    );
    expect(all.cancelled).toHaveLength(2);
    expect(h.service.reportLeases().leases).toEqual([]);
    expect(changes).toBe(5);
  });

  it("a take waits briefly for the collector's answer when connected, and shows the clamp", async () => {
    let service: Harness["service"] | undefined;
    const h = await harness({
      // The agent sends a Report at once; here the "collector" answers it on the spot.
      onLeasesChanged: () =>
        setImmediate(() => {
          const leases = service!.reportLeases().leases ?? [];
          service!.applyDirective(
            create(DirectiveSchema, {
              leaseDecisions: leases.map((lease) => ({
                id: lease.id,
                accepted: true,
                clamped: true,
                effectiveRemainingSeconds: 7200,
                maxKeepRunningSeconds: 7200,
              })),
            }),
          );
        }),
    });
    service = h.service;
    h.service.setCollectorConnected(true, "collector.example:8443");
    const answer = expectOk<Extract<Answer, { op: "take" }>>(
      await callAgent(h.socketPath, { op: "take", seconds: 5 * 3600, reason: "", wait: 10 }),
      "take",
    );
    expect(answer.collectorConnected).toBe(true);
    expect(answer.lease).toMatchObject({ confirmed: true, clamped: true, maxKeepRunningSeconds: 7200 });

    h.service.setCollectorConnected(false, "collector.example:8443");
    const offline = expectOk<Extract<Answer, { op: "take" }>>(
      await callAgent(h.socketPath, { op: "take", seconds: 600, reason: "", wait: 10 }),
      "take",
    );
    expect(offline.collectorConnected).toBe(false);
  });

  it("a socket that cannot be opened does not stop the agent: leases are still reported, the socket comes when it can", async () => {
    const h = await harness({
      beforeOpen: async (socketPath) => {
        await mkdir(path.dirname(socketPath), { recursive: true });
        await writeFile(socketPath, "in the way");
      },
    });
    expect(h.logs.some((line) => line.includes("cannot serve") && line.includes("is not a socket"))).toBe(true);
    expect(h.service.reportLeases()).toEqual({ leases: [] });
    await rm(h.socketPath);
    await eventually(
      async () => (await callAgent(h.socketPath, { op: "status" }).catch(() => ({ ok: false }))).ok,
      "the socket to be served",
    );
    // The socket can answer before listen() has returned to log it (the server accepts while it finishes setting up).
    await eventually(async () => h.logs.some((line) => line.includes("now serving")), "the 'now serving' line");
  });

  it("status carries the collector's view, the policy, the connection and the pending notice", async () => {
    const h = await harness();
    h.service.setCollectorConnected(true, "collector.example:8443");
    h.service.applyDirective(
      create(DirectiveSchema, {
        policy: {
          autostopEnabled: true,
          mode: PolicyMode.ENFORCE,
          idleTimeoutSeconds: 7200,
          gracePeriodSeconds: 600,
          maxKeepRunningSeconds: 86400,
        },
        status: {
          state: VmState.STOPPING_PENDING,
          idleSeconds: 7300,
          activeSignals: [],
          stopInSeconds: 500,
          explanation: "idle for 2h",
          mode: PolicyMode.ENFORCE,
        },
        notice: {
          id: "n-1",
          stopInSeconds: 500,
          reason: "no activity for 2h",
          keepRunningHint: "ws-lease 2h",
          idleSeconds: 7300,
          mode: PolicyMode.ENFORCE,
        },
      }),
    );
    const status = expectOk<Extract<Answer, { op: "status" }>>(
      await callAgent(h.socketPath, { op: "status" }),
      "status",
    ).status;
    expect(status.collector).toMatchObject({ connected: true, address: "collector.example:8443" });
    expect(status.vm).toMatchObject({ state: "StoppingPending", explanation: "idle for 2h", mode: "enforce" });
    expect(status.vm!.stopInSeconds).toBeLessThanOrEqual(500);
    expect(status.policy).toMatchObject({ idleTimeoutSeconds: 7200, gracePeriodSeconds: 600 });
    expect(status.notice).toMatchObject({ id: "n-1", reason: "no activity for 2h", mode: "enforce" });
    expect(status.capSource).toBe("policy");
    await eventually(
      async () => (await readFile(h.noticeFile, "utf8").catch(() => "")).includes('"n-1"'),
      "the notice file",
    );
  });
});
