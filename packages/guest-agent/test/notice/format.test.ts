import { describe, expect, it } from "vitest";
import {
  cancellationText,
  formatLocalTime,
  formatSpan,
  formatStopIn,
  noticeText,
  terminalBytes,
} from "../../src/notice/format.js";

// 2023-11-14T22:13:20Z
const NOW = 1_700_000_000_000;

describe("notice text", () => {
  it("says when in minutes and in local time", () => {
    expect(formatLocalTime(NOW, "UTC")).toBe("22:13");
    expect(formatLocalTime(NOW, "Europe/Paris")).toBe("23:13");
    expect(formatLocalTime(NOW + 2 * 3600_000, "UTC")).toBe("00:13");
    expect(formatStopIn(600)).toBe("in 10 minutes");
    expect(formatStopIn(61)).toBe("in 1 minute");
    expect(formatStopIn(59.6)).toBe("in 1 minute");
    expect(formatStopIn(40)).toBe("in 40 seconds");
    expect(formatStopIn(1)).toBe("in 1 second");
    expect(formatStopIn(0.2)).toBe("now");
    expect(formatStopIn(3900)).toBe("in 1 hour 5 minutes");
    expect(formatStopIn(7200)).toBe("in 2 hours");
    expect(formatSpan(7300)).toBe("2h 1m");
    expect(formatSpan(45)).toBe("45s");
    expect(formatSpan(90000)).toBe("1d 1h");
  });

  it("a notice: when, why, and the exact command that keeps the VM", () => {
    const text = noticeText(
      { stopInSeconds: 600, reason: "no activity for 2h", keepRunningHint: "", idleSeconds: 7200, observeMode: false },
      NOW,
      "UTC",
    );
    expect(text.title).toBe("ws: this VM will stop in 10 minutes (at 22:23)");
    expect(text.lines[0]).toBe("Why: no activity for 2h.");
    expect(text.lines[1]).toContain("`ws-lease 2h`");
    expect(text.lines[1]).toContain("or just use it");
  });

  it("uses the collector's hint when it names ws-lease, and makes up a reason from the idle time when there is none", () => {
    const text = noticeText(
      {
        stopInSeconds: 300,
        reason: "",
        keepRunningHint: "run ws-lease 4h, or type in a terminal",
        idleSeconds: 7500,
        observeMode: false,
      },
      NOW,
      "UTC",
    );
    expect(text.lines[0]).toBe("Why: no activity for 2h 5m.");
    expect(text.lines[1]).toBe("To keep it running: run ws-lease 4h, or type in a terminal.");
  });

  it("observe mode says nothing will be stopped", () => {
    const text = noticeText(
      { stopInSeconds: 600, reason: "idle", keepRunningHint: "", idleSeconds: 0, observeMode: true },
      NOW,
      "UTC",
    );
    expect(text.title).toContain("would stop in 10 minutes (at 22:23)");
    expect(text.title).toContain("nothing will be stopped");
  });

  it("never passes escape sequences from the collector to terminals", () => {
    const text = noticeText(
      { stopInSeconds: 60, reason: "\u001b[31mred", keepRunningHint: "", idleSeconds: 0, observeMode: false },
      NOW,
      "UTC",
    );
    expect(terminalBytes(text)).not.toContain("\u001b");
  });

  it("frames terminal output like wall: bell, CR LF, blank lines around", () => {
    const bytes = terminalBytes(cancellationText("terminal input on pts/0"));
    expect(bytes).toBe(
      "\r\n\u0007*** ws: the pending stop of this VM is cancelled ***\r\n    Why: terminal input on pts/0. Nothing to do.\r\n\r\n",
    );
    expect(cancellationText("").lines).toEqual(["Nothing to do."]);
  });
});
