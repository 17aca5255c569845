import { describe, expect, it } from "vitest";
import { deriveLinkKey, signKeepLink, verifyKeepLink } from "../../../src/links/keep-token.js";
import { entryFor, parseStartConfig } from "../../../src/comeback/start/config.js";
import type { StartFacts } from "../../../src/comeback/start/platform.js";
import { startProgress } from "../../../src/comeback/start/progress.js";
import { entryReadiness } from "../../../src/comeback/start/readiness.js";
import { create } from "@bufbuild/protobuf";
import { ReportSchema } from "@ws/protocol";
import { deriveStartLinkKey, signStartLink, startLinkUrl, verifyStartLink } from "../../../src/links/start-token.js";
import { answersCurrentStop, type RunView, StartTracker } from "../../../src/comeback/start/tracker.js";

const tokenKey = Buffer.alloc(48, 7);
const key = deriveStartLinkKey(tokenKey);
const vm = { namespace: "users", name: "alice-gpu" };
const T0 = Date.parse("2026-12-01T10:00:00Z");

describe("start links", () => {
  it("work again and again until they expire, for their VM only", () => {
    const url = startLinkUrl("https://ws.example.com", key, vm, T0, 14 * 24 * 3600);
    expect(url).toMatch(/^https:\/\/ws\.example\.com\/start\/users\/alice-gpu\?t=s1\./);
    const token = new URL(url).searchParams.get("t")!;
    for (const at of [T0, T0 + 3600_000, T0 + 13 * 24 * 3600_000])
      expect(verifyStartLink(key, token, vm, at)).toMatchObject({ ok: true });
    expect(verifyStartLink(key, token, vm, T0 + 14 * 24 * 3600_000)).toMatchObject({ ok: false, problem: "expired" });
    expect(verifyStartLink(key, token, { namespace: "users", name: "bob" }, T0)).toMatchObject({
      ok: false,
      problem: "other-vm",
    });
    const tampered = `${token.slice(0, -2)}${token.endsWith("AA") ? "BB" : "AA"}`;
    expect(verifyStartLink(key, tampered, vm, T0)).toMatchObject({ ok: false, problem: "tampered" });
    expect(verifyStartLink(key, "s1.x", vm, T0)).toMatchObject({ ok: false, problem: "malformed" });
  });

  it("end when the token key rotates, and are never keep-running links (nor the other way round)", () => {
    const token = signStartLink(key, { ...vm, expiresAtMs: T0 + 1000 });
    expect(verifyStartLink(deriveStartLinkKey(Buffer.alloc(48, 8)), token, vm, T0)).toMatchObject({
      problem: "tampered",
    });
    const keepKey = deriveLinkKey(tokenKey);
    const keep = signKeepLink(keepKey, { ...vm, noticeId: "n1", expiresAtMs: T0 + 1000 });
    expect(verifyStartLink(key, keep, vm, T0)).toMatchObject({ ok: false, problem: "malformed" });
    expect(verifyKeepLink(keepKey, token, vm, T0)).toMatchObject({ ok: false, problem: "malformed" });
    // The keep link's own format is unchanged by sharing links/signed.ts.
    expect(keep.startsWith("k1.")).toBe(true);
    expect(verifyKeepLink(keepKey, keep, vm, T0)).toMatchObject({ ok: true, claims: { noticeId: "n1" } });
  });
});

const stopped: StartFacts = {
  owner: "alice",
  runStrategy: "Halted",
  status: "Stopped",
  allocates: ["8 CPU", "64Gi memory", "1 × nvidia.com/A100"],
  wantsToRun: false,
  instance: null,
  lastStop: { atMs: T0 - 3600_000, reason: "idle for 2h" },
  labels: {},
  annotations: {},
};
const notReady = { ready: false, detail: "waiting for sshd or Jupyter to answer" };

describe("the stages of a start", () => {
  it("a stopped VM with no start asked: nothing is in motion", () => {
    const p = startProgress(stopped, undefined, { readiness: notReady }, T0);
    expect(p.status).toBe("stopped");
    expect(p.stages.map((s) => s.state)).toEqual(["waiting", "waiting", "waiting", "waiting", "waiting"]);
  });

  it("walks requested → scheduled (node) → running → agent → ready", () => {
    const attempt = { requestedAtMs: T0, by: "alice", trigger: "link", result: { ok: true, message: "ok" } };
    let p = startProgress({ ...stopped, wantsToRun: true }, attempt, { readiness: notReady }, T0 + 500);
    expect(p.status).toBe("starting");
    expect(p.stages.map((s) => s.state)).toEqual(["done", "current", "waiting", "waiting", "waiting"]);
    const instance = {
      phase: "Running",
      nodeName: "gpu-node-3",
      createdAtMs: T0 + 1000,
      phaseTimes: { Pending: T0 + 1000, Scheduled: T0 + 4000, Running: T0 + 9000 },
      unschedulable: null,
    };
    p = startProgress({ ...stopped, wantsToRun: true, instance }, attempt, { readiness: notReady }, T0 + 10_000);
    expect(p.stages.map((s) => [s.name, s.state, s.atMs])).toEqual([
      ["requested", "done", T0],
      ["scheduled", "done", T0 + 4000],
      ["running", "done", T0 + 9000],
      ["agent", "current", undefined],
      ["ready", "waiting", undefined],
    ]);
    expect(p.stages[1]!.detail).toBe("on node gpu-node-3");
    // An agent stream older than the start is the previous boot's: not this start's.
    p = startProgress(
      { ...stopped, wantsToRun: true, instance },
      attempt,
      { connectedAtMs: T0 - 60_000, readiness: notReady },
      T0 + 10_000,
    );
    expect(p.stages[3]!.state).toBe("current");
    p = startProgress(
      { ...stopped, wantsToRun: true, instance },
      attempt,
      {
        connectedAtMs: T0 + 20_000,
        latestReportAtMs: T0 + 25_000,
        readiness: { ready: true, detail: "sshd listening on 22" },
      },
      T0 + 26_000,
    );
    expect(p.status).toBe("ready");
    expect(p.stages[4]).toMatchObject({ state: "done", atMs: T0 + 25_000, detail: "sshd listening on 22" });
  });

  it("an unschedulable VMI shows the scheduler's message and how long it has waited", () => {
    const message = "0/3 nodes are available: 3 Insufficient nvidia.com/gpu.";
    const p = startProgress(
      {
        ...stopped,
        wantsToRun: true,
        instance: {
          phase: "Scheduling",
          nodeName: null,
          createdAtMs: T0 + 1000,
          phaseTimes: {},
          unschedulable: { reason: "Unschedulable", message, sinceMs: T0 + 2000 },
        },
      },
      { requestedAtMs: T0, by: "alice", trigger: "link", result: { ok: true, message: "" } },
      { readiness: notReady },
      T0 + 125_000,
    );
    expect(p.status).toBe("unschedulable");
    expect(p.stages[1]!.state).toBe("blocked");
    expect(p.unschedulable).toEqual({ reason: "Unschedulable", message, waitedSeconds: 125 });
  });

  it("a failed start request says why", () => {
    const p = startProgress(
      stopped,
      { requestedAtMs: T0, by: "a", trigger: "link", result: { ok: false, message: "403" } },
      { readiness: notReady },
      T0,
    );
    expect([p.status, p.failure]).toEqual(["failed", "403"]);
  });
});

/** The platform's view of a stopped VM, ws's last stop an hour before T0. */
const STOPPED: RunView = { running: false, lastStopAtMs: T0 - 3600_000 };

describe("one start per VM at a time", () => {
  it("two requests at once make one start; the second shares its answer", async () => {
    const tracker = new StartTracker();
    let calls = 0;
    let finish: (v: { ok: true; already: false; message: string }) => void = () => {};
    const start = () => {
      calls++;
      return new Promise<{ ok: true; already: false; message: string }>((resolve) => (finish = resolve));
    };
    const first = tracker.request(vm, { by: "tab 1", trigger: "link" }, T0, STOPPED, start);
    const second = tracker.request(vm, { by: "tab 2", trigger: "link" }, T0 + 10, STOPPED, start);
    finish({ ok: true, already: false, message: "accepted" });
    const [a, b] = await Promise.all([first, second]);
    expect(calls).toBe(1);
    expect([a.started, b.started]).toEqual([true, false]);
    // Accepted and not ready yet: a third press joins it too.
    expect((await tracker.request(vm, { by: "tab 3", trigger: "ssh" }, T0 + 5000, STOPPED, start)).started).toBe(false);
    expect(tracker.startsTotal.get("link")).toBe(1);
    expect(tracker.pending(T0 + 6000)).toEqual([vm]);
    expect(tracker.markReady(vm, T0 + 42_000)?.readyAtMs).toBe(T0 + 42_000);
    expect(tracker.drainReadySeconds()).toEqual([42]);
    expect(tracker.pending(T0 + 43_000)).toEqual([]);
    // Once ready, the next stop's start is a new one.
    expect(
      (
        await tracker.request(vm, { by: "x", trigger: "link" }, T0 + 50_000, STOPPED, async () => ({
          ok: true,
          already: false,
          message: "",
        }))
      ).started,
    ).toBe(true);
  });

  it("a learned warm start's own boot is nobody's wait; a person who came to the warm VM without asking is a zero wait, trigger warm", async () => {
    const tracker = new StartTracker();
    const accepted = async () => ({ ok: true as const, already: false, message: "accepted" });
    await tracker.request(vm, { by: "a learned warm start", trigger: "warm" }, T0, STOPPED, accepted);
    expect(tracker.markReady(vm, T0 + 90_000)?.trigger).toBe("warm");
    expect(tracker.startsTotal.get("warm")).toBe(1);
    expect(tracker.drainReadySeconds()).toEqual([90]);
    expect(tracker.drainWaits()).toEqual([]);
    tracker.foundWarm(T0 + 10 * 60_000);
    expect(tracker.drainWaits()).toEqual([
      { trigger: "warm", split: { placement: 0, boot: 0, guest: 0, report: 0, total: 0 } },
    ]);
    expect(tracker.recent().map((w) => w.trigger)).toEqual(["warm"]);
  });

  it("a start answers one stop: a second stop (by ws or anyone) within the half hour is a new way back (issue 40)", async () => {
    const accepted = async () => ({ ok: true as const, already: false, message: "accepted" });
    const running: RunView = { running: true, lastStopAtMs: STOPPED.lastStopAtMs! };
    for (const second of [
      // The user's own `virtctl stop`, a shutdown in the guest: ws keeps no record of it.
      { who: "anyone", view: STOPPED, afterMs: 20 * 60_000 },
      // ws stopped it again (a short teaching timeout): its record is newer than the start.
      { who: "ws", view: { running: false, lastStopAtMs: T0 + 10 * 60_000 }, afterMs: 11 * 60_000 },
    ]) {
      const tracker = new StartTracker();
      await tracker.request(vm, { by: "alice", trigger: "link" }, T0, STOPPED, accepted);
      // The platform has not caught up with the start yet: still this start, not a stop.
      expect(tracker.get(vm, T0 + 500, STOPPED)?.requestedAtMs).toBe(T0);
      expect(tracker.get(vm, T0 + 30_000, running)?.requestedAtMs).toBe(T0);
      tracker.markReady(vm, T0 + 60_000);
      expect(tracker.get(vm, T0 + 5 * 60_000, running)?.readyAtMs).toBe(T0 + 60_000);
      // Stopped again: the page no longer shows the previous start, so it offers Start.
      const afterStop = T0 + second.afterMs;
      const attempt = tracker.get(vm, afterStop, second.view);
      expect(attempt, second.who).toBeUndefined();
      expect(
        startProgress(
          { ...stopped, lastStop: { atMs: second.view.lastStopAtMs!, reason: "x" } },
          attempt,
          { readiness: notReady },
          afterStop,
        ).status,
      ).toBe("stopped");
      // …and a press (the page's, or the ssh helper's) starts the VM again instead of joining the old start.
      const again = await tracker.request(vm, { by: "alice", trigger: "ssh" }, afterStop + 1000, second.view, accepted);
      expect([again.started, again.attempt.requestedAtMs]).toEqual([true, afterStop + 1000]);
    }
  });

  it("answersCurrentStop: only a stop after the request, or a stopped VM that ran since, ends a start", () => {
    const asked = { requestedAtMs: T0, by: "a", trigger: "link" };
    expect(answersCurrentStop(asked, { running: false, lastStopAtMs: T0 - 1 })).toBe(true);
    expect(answersCurrentStop(asked, { running: false })).toBe(true);
    expect(answersCurrentStop(asked, { running: true, lastStopAtMs: T0 + 1 })).toBe(false);
    expect(answersCurrentStop({ ...asked, ranSinceMs: T0 + 5 }, { running: false })).toBe(false);
    expect(answersCurrentStop({ ...asked, readyAtMs: T0 + 5 }, { running: true })).toBe(true);
    expect(answersCurrentStop({ ...asked, readyAtMs: T0 + 5 }, { running: false })).toBe(false);
  });

  it("a failed start can be asked again", async () => {
    const tracker = new StartTracker();
    await tracker.request(vm, { by: "a", trigger: "link" }, T0, STOPPED, async () => ({ ok: false, message: "boom" }));
    const again = await tracker.request(vm, { by: "a", trigger: "link" }, T0 + 1, STOPPED, async () => ({
      ok: true,
      already: false,
      message: "",
    }));
    expect(again.started).toBe(true);
  });
});

describe("entry points and readiness", () => {
  it("reads the start section, with profiles and per-VM annotations over them", () => {
    const problems: string[] = [];
    const config = parseStartConfig(
      {
        linkTtl: "7d",
        entryUrl: "https://{name}.{namespace}.ws.example.com/",
        profiles: { gpu: { entryUrl: "https://jupyter.example.com/user/{owner}/", entryService: "jupyter" } },
      },
      problems,
    );
    expect(problems).toEqual([]);
    expect(config.linkTtlSeconds).toBe(7 * 24 * 3600);
    const meta = { annotations: {}, profile: "", owner: "alice" };
    expect(entryFor(config, vm, meta, "p/")).toEqual({
      url: "https://alice-gpu.users.ws.example.com/",
      service: "any",
    });
    expect(entryFor(config, vm, { ...meta, profile: "gpu" }, "p/")).toEqual({
      url: "https://jupyter.example.com/user/alice/",
      service: "jupyter",
    });
    const annotated = entryFor(
      config,
      vm,
      { ...meta, annotations: { "p/entry-url": "https://novnc.example.com/{name}", "p/entry-service": "sshd" } },
      "p/",
    );
    expect(annotated).toEqual({ url: "https://novnc.example.com/alice-gpu", service: "sshd" });
    const bad = entryFor(config, vm, { ...meta, annotations: { "p/entry-url": "javascript:alert(1)" } }, "p/");
    expect(bad.url).toBe("https://alice-gpu.users.ws.example.com/");
    expect(bad.problem).toMatch(/not an http\(s\) URL/);
  });

  it("refuses a bad start section, naming each problem", () => {
    const problems: string[] = [];
    parseStartConfig(
      {
        linkTtl: "10s",
        entryUrl: "https://{user}.x/",
        entryService: "vnc",
        other: 1,
        timeZone: "Europe/Berln",
        schedulePass: "10m",
      },
      problems,
    );
    expect(problems).toEqual([
      'start: unknown setting "other" (known: linkTtl, entryUrl, entryService, profiles, leaderUrl, wakeListen, timeZone, schedulePass, probePort)',
      "start.linkTtl: must be between 1m and 366d",
      "start.entryUrl: unknown placeholder {user} (known: {namespace}, {name}, {owner})",
      "start.entryService: expected one of any, sshd, jupyter",
      'start.timeZone: "Europe/Berln" is not an IANA time zone (such as Europe/Berlin)',
      "start.schedulePass: must be between 1s and 5m",
    ]);
  });

  it("is ready when the entry service answers as the agent reports it, not when the VMI runs", () => {
    expect(entryReadiness(undefined, "any")).toEqual({ ready: false, detail: "no report from the agent yet" });
    const bare = create(ReportSchema, {});
    expect(entryReadiness(bare, "any").ready).toBe(false);
    const sshd = create(ReportSchema, { remoteSessions: { sshdListeningPorts: [22] } });
    expect(entryReadiness(sshd, "any")).toEqual({ ready: true, detail: "sshd listening on 22" });
    expect(entryReadiness(sshd, "jupyter")).toEqual({
      ready: false,
      detail: "waiting for the Jupyter server to answer",
    });
    const jupyter = create(ReportSchema, {
      jupyter: { servers: [{ url: "http://127.0.0.1:8888/", reachable: true }] },
    });
    expect(entryReadiness(jupyter, "jupyter")).toEqual({
      ready: true,
      detail: "Jupyter at http://127.0.0.1:8888/ answers",
    });
  });
});

describe("the fixed address", () => {
  it("finds the VM by host and the longest path prefix of its entry URL", async () => {
    const { vmAtAddress, safeNext, requestedHost } = await import("../../../src/comeback/start/address.js");
    const a = { namespace: "u", name: "a" };
    const b = { namespace: "u", name: "b" };
    const candidates = [
      { vm: a, entryUrl: "https://hub.example.com/user/alice/" },
      { vm: b, entryUrl: "https://hub.example.com/user/bob/" },
      { vm: { namespace: "u", name: "c" }, entryUrl: "https://c.ws.example.com/" },
    ];
    expect(vmAtAddress(candidates, "hub.example.com", "/user/alice/lab?x=1")).toEqual(a);
    expect(vmAtAddress(candidates, "hub.example.com", "/user/bob")).toEqual(b);
    expect(vmAtAddress(candidates, "hub.example.com", "/user/bobby/")).toBeUndefined();
    expect(vmAtAddress(candidates, "c.ws.example.com", "/anything")).toEqual({ namespace: "u", name: "c" });
    expect(vmAtAddress(candidates, "evil.example.com", "/")).toBeUndefined();
    // X-Forwarded-Host from a trusted proxy (issue 34: from anyone else, Host): first value, no port, lower case.
    const identity = { userHeader: "X-Auth-Request-User", adminGroups: [], trustedProxies: ["10.0.0.5"] };
    const forwarded = { "x-forwarded-host": "C.WS.example.com:443, proxy", host: "x" };
    expect(requestedHost(forwarded, identity, "10.0.0.5")).toBe("c.ws.example.com");
    expect(requestedHost(forwarded, identity, "10.0.0.6")).toBe("x");
    for (const bad of ["//evil.example.com/", "https://evil/", "\\\\evil", "", undefined])
      expect(safeNext(bad)).toBe("/");
    expect(safeNext("/tree?x=1")).toBe("/tree?x=1");
  });
});
