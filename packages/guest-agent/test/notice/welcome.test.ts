import { describe, expect, it } from "vitest";
import { parseShown, welcomeText } from "../../src/notice/welcome.js";

const STOP = Date.parse("2026-12-01T18:00:00Z");

describe("the welcome back text (notice/welcome.ts)", () => {
  it("says when, why, how long idle, the last activity, how to keep it, and where to dispute", () => {
    const text = welcomeText(
      {
        stoppedAtMs: STOP,
        reason: "idle for 2h10m (idle-timeout 2h)",
        idleSeconds: 7800,
        lastActivity: "input on pts/0 (alice)",
        lastActivityAtMs: STOP - 7800_000,
        keepHint: 'ws-lease 8h --reason "what you are running"',
        disputeUrl: "https://ws.example.com/start/users/vm?t=s1.abc",
      },
      "UTC",
    );
    expect(text.title).toBe("ws: welcome back — this VM was stopped by ws on 2026-12-01 18:00");
    expect(text.lines).toEqual([
      "Why: idle for 2h10m (idle-timeout 2h).",
      "It had been idle 2h10m; the last activity ws saw: input on pts/0 (alice) (at 15:50).",
      'To keep it running next time: run `ws-lease 8h --reason "what you are running"` in a terminal here before you leave it running.',
      "Was this stop a mistake (you were working)? Say so in one click: https://ws.example.com/start/users/vm?t=s1.abc",
    ]);
  });

  it("says how long the start waited to be placed and why, before how to keep it; escapes stripped", () => {
    const text = welcomeText(
      {
        stoppedAtMs: STOP,
        reason: "idle for 2h10m (idle-timeout 2h)",
        lastActivity: "",
        keepHint: "ws-lease 8h",
        disputeUrl: "",
        placementWaitSeconds: 725,
        placementMessage: "0/3 nodes are available: 3 Insufficient nvidia.com/gpu.\u001b[2J",
      },
      "UTC",
    );
    expect(text.lines).toEqual([
      "Why: idle for 2h10m (idle-timeout 2h).",
      "This start waited 12m5s for the cluster to place it (the scheduler said: 0/3 nodes are available: 3 Insufficient nvidia.com/gpu. [2J); ws holds no GPU for a stopped VM, so a start can wait for one to be free.",
      "To keep it running next time: run `ws-lease 8h` in a terminal here before you leave it running.",
    ]);
  });

  it("carries no terminal escapes from the collector, and no link that is not http(s)", () => {
    const text = welcomeText(
      {
        stoppedAtMs: STOP,
        reason: "idle\u001b]0;owned\u0007",
        lastActivity: "",
        keepHint: "",
        disputeUrl: "javascript:alert(1)",
      },
      "UTC",
    );
    expect(JSON.stringify(text)).not.toMatch(/\\u001b|\\u0007/);
    expect(text.lines.join("\n")).not.toContain("javascript:");
    expect(text.lines).toContain(
      "To keep it running next time: run `ws-lease 8h` in a terminal here before you leave it running.",
    );
  });

  it("reads the shown ids as stored, and nothing from anything else", () => {
    expect(parseShown('{"shown":["stop-1","stop-2",3]}')).toEqual(["stop-1", "stop-2"]);
    expect(parseShown("not json")).toEqual([]);
    expect(parseShown('{"shown":"stop-1"}')).toEqual([]);
  });
});
