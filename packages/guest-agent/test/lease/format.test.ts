import { readFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { formatAuditLine } from "../../src/lease/audit.js";
import {
  formatLeaseDuration,
  formatLeaseList,
  formatOverCap,
  formatStatus,
  formatTaken,
  formatWhen,
  leaseState,
} from "../../src/lease/format.js";
import { newLease } from "../../src/lease/leases.js";
import type { WireLease, StatusView } from "../../src/lease/wire.js";

// Tuesday 2023-11-14 22:13:20 UTC
const NOW = 1_700_000_000_000;
const moment = { nowMs: NOW, timeZone: "UTC" };
const iso = (offsetSeconds: number): string => new Date(NOW + offsetSeconds * 1000).toISOString();

function view(overrides: Partial<WireLease> = {}): WireLease {
  return {
    id: "3f9a0c21",
    uid: 1001,
    user: "alice",
    reason: "training resnet50",
    requestedSeconds: 8 * 3600,
    holdSeconds: 8 * 3600,
    ageSeconds: 0,
    remainingSeconds: 8 * 3600,
    takenAt: iso(0),
    expiresAt: iso(8 * 3600),
    confirmed: false,
    clamped: false,
    refused: false,
    ...overrides,
  };
}

describe("durations and times", () => {
  it("says 24h, not 1d; 1h30m; 3d", () => {
    expect(formatLeaseDuration(86400)).toBe("24h");
    expect(formatLeaseDuration(5400)).toBe("1h30m");
    expect(formatLeaseDuration(1800)).toBe("30m");
    expect(formatLeaseDuration(3 * 86400)).toBe("3d");
    expect(formatLeaseDuration(30 * 86400)).toBe("30d");
  });

  it("today as HH:MM, this week with the day, later with the date", () => {
    expect(formatWhen(NOW + 3600_000, moment)).toBe("23:13");
    expect(formatWhen(NOW + 8 * 3600_000, moment)).toBe("Wed 06:13");
    expect(formatWhen(NOW + 10 * 86400_000, moment)).toBe("Fri 24 Nov 22:13");
  });
});

describe("what ws-lease prints", () => {
  it("a new lease, by where the collector stands", () => {
    expect(formatTaken(view(), false, moment)).toBe(
      'Lease 3f9a0c21 taken: this VM keeps running until Wed 06:13 (8h), for "training resnet50".\n' +
        "The collector is not reachable right now: the lease is recorded on this VM and will be confirmed when it reconnects.\n" +
        "Cancel it early with: ws-lease cancel 3f9a0c21\n",
    );
    expect(formatTaken(view(), true, moment)).toContain("has not confirmed it yet");
    expect(formatTaken(view({ confirmed: true }), true, moment)).toContain("The collector confirmed it.");
    const clamped = formatTaken(
      view({
        confirmed: true,
        clamped: true,
        holdSeconds: 4 * 3600,
        remainingSeconds: 4 * 3600,
        expiresAt: iso(4 * 3600),
        maxKeepRunningSeconds: 4 * 3600,
      }),
      true,
      moment,
    );
    expect(clamped).toContain("until Wed 02:13 (4h)");
    expect(clamped).toContain("The collector clamped it: you asked for 8h, this VM's max-keep-running is 4h.");
  });

  it("a refusal over the cap names the cap and where it comes from", () => {
    expect(formatOverCap(30 * 86400, 86400, "default")).toBe(
      "ws-lease: 30d is longer than this VM allows: a lease can last at most 24h (the default max-keep-running; the collector has not sent this VM's policy yet).\n" +
        "Ask for 24h or less (ws-lease 24h), and take a new lease when it runs out if you still need the VM.\n",
    );
    expect(formatOverCap(10 * 3600, 4 * 3600, "policy")).toContain("at most 4h (max-keep-running in this VM's policy)");
  });

  it("the list, as a table; escape sequences in reasons are not passed on", () => {
    const text = formatLeaseList(
      [
        view(),
        view({
          id: "0badf00d",
          user: "bob",
          uid: 1002,
          reason: "x\u001b[2Jy",
          confirmed: true,
          clamped: true,
          maxKeepRunningSeconds: 14400,
        }),
      ],
      moment,
    );
    expect(text).toBe(
      "ID        USER   UNTIL      LEFT  STATE                     REASON\n" +
        "3f9a0c21  alice  Wed 06:13  8h    not yet confirmed         training resnet50\n" +
        "0badf00d  bob    Wed 06:13  8h    clamped to 4h (asked 8h)  x [2Jy\n",
    );
    expect(formatLeaseList([], moment)).toContain("No leases");
    expect(leaseState(view({ refused: true, confirmed: true, message: "leases are off" }))).toBe(
      "refused by the collector: leases are off",
    );
  });

  it("status: the stop pending first, with how to keep the VM; then activity, collector, leases, cap", () => {
    const status: StatusView = {
      now: iso(0),
      collector: { connected: false, address: "collector:8443", sinceSeconds: 300 },
      vm: {
        state: "StoppingPending",
        idleSeconds: 7260,
        activeSignals: [],
        stopInSeconds: 540,
        stopAt: iso(540),
        explanation: "idle for 2h: no input",
        mode: "enforce",
        ageSeconds: 30,
      },
      policy: {
        autostopEnabled: true,
        mode: "enforce",
        profile: "",
        idleTimeoutSeconds: 7200,
        gracePeriodSeconds: 600,
        maxKeepRunningSeconds: 86400,
      },
      capSeconds: 86400,
      capSource: "policy",
      leases: [],
      notice: {
        id: "n1",
        stopInSeconds: 540,
        stopAt: iso(540),
        reason: "no activity for 2h",
        keepRunningHint: "",
        idleSeconds: 7260,
        mode: "enforce",
      },
    };
    expect(formatStatus(status, moment)).toBe(
      [
        "STOP PENDING: this VM will stop in 9 minutes (at 22:22).",
        "  Why: no activity for 2h.",
        "  To keep it running: ws-lease 2h (or any activity: type in a terminal, run a notebook cell).",
        "",
        "VM:          idle, stop pending",
        "Activity:    idle for 2h 1m (no signal shows use)",
        "Stop:        would stop in 9 minutes (at 22:22) if nothing changes",
        "             idle for 2h: no input",
        "Policy:      stops after 2h idle, with a 10m warning",
        "Collector:   NOT connected (collector:8443) for 5m: leases are recorded here and confirmed when it reconnects",
        "",
        "Leases:      none",
        "Cap:         a lease lasts at most 24h (max-keep-running in this VM's policy)",
        "",
        'Keep this VM running: ws-lease 8h --reason "what you are running"    More: ws-lease --help',
        "",
      ].join("\n"),
    );
  });

  it("status: in use, by which signals; leases with owner and state; observe mode", () => {
    const text = formatStatus(
      {
        now: iso(0),
        collector: { connected: true, address: "collector:8443", sinceSeconds: 7200 },
        vm: {
          state: "Active",
          idleSeconds: 0,
          activeSignals: ["lease", "tty"],
          explanation: "a lease by alice holds it",
          mode: "observe",
          ageSeconds: 5,
        },
        capSeconds: 86400,
        capSource: "default",
        leases: [view({ confirmed: true })],
      },
      moment,
    );
    expect(text).toContain("VM:          in use — observe mode: nothing is ever stopped");
    expect(text).toContain("Activity:    seen in use now by: lease, tty");
    expect(text).toContain("Stop:        none scheduled");
    expect(text).toContain("Collector:   connected to collector:8443 for 2h");
    expect(text).toContain('  3f9a0c21  alice (uid 1001)  until Wed 06:13 (8h left)  confirmed  "training resnet50"');
    expect(text).not.toContain("STOP PENDING");
  });
});

describe("the audit log", () => {
  it("one logfmt line per event, as the service writes them", async () => {
    const fixture = await readFile(
      path.join(path.dirname(fileURLToPath(import.meta.url)), "fixtures", "lease-audit.log"),
      "utf8",
    );
    const first = fixture.split("\n")[0]!;
    const lease = newLease(
      { id: "60bf025d", uid: 0, user: "root", reason: "training resnet50", requestedSeconds: 28800 },
      { wallMs: Date.parse("2026-11-29T14:38:21.511Z"), monoMs: 0 },
    );
    expect(formatAuditLine({ action: "granted", lease }, Date.parse("2026-11-29T14:38:21.511Z"))).toBe(`${first}\n`);
    const byRoot = formatAuditLine(
      { action: "cancelled", lease: { ...lease, uid: 1001, user: "alice" }, byUid: 0, byUser: "root" },
      NOW,
    );
    expect(byRoot).toMatch(/action=cancelled id=60bf025d uid=1001 user=alice .* by_uid=0 by_user=root\n$/);
  });
});
