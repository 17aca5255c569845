// `whatif --returns FILE` (issue 36 item 2): learned warm starts replayed on the recorded returns.
import { describe, expect, it } from "vitest";
import { encodeReturns, type ReturnRecord } from "../../../src/comeback/warm/returns.js";
import { whatifCommand } from "../../../src/offline/whatif/command.js";
import { sink } from "../replay/sink.js";

/** Weekday returns at 08:50 UTC for four weeks from Monday 2026-11-02; a 120 s boot each. */
function fourWeeks(): ReturnRecord[] {
  const out: ReturnRecord[] = [];
  for (let day = 0; day < 28; day++) {
    const at = Date.UTC(2026, 10, 2 + day, 8, 50);
    const weekday = new Date(at).getUTCDay();
    if (weekday !== 0 && weekday !== 6) out.push({ atMs: at, trigger: "ssh", waitSeconds: 120 });
  }
  return out;
}

describe("whatif --returns", () => {
  const document = JSON.stringify({
    kind: "VirtualMachineList",
    items: [
      {
        metadata: {
          namespace: "users",
          name: "h36w-ada",
          annotations: { "workstation.aik8s.run/returns": encodeReturns(fourWeeks()) },
        },
      },
      { metadata: { namespace: "users", name: "h36w-none", annotations: {} } },
    ],
  });

  it("prints per VM what learned warm starts would have saved and cost", async () => {
    const out = sink();
    const err = sink();
    const code = await whatifCommand(["--returns", "vms.json", "--json"], {
      stdout: out,
      stderr: err,
      readFile: () => document,
    });
    expect(err.text).toBe("");
    expect(code).toBe(0);
    const { warmStarts } = JSON.parse(out.text) as { warmStarts: Array<Record<string, unknown>> };
    // Weeks 1–3 teach each weekday (3 days needed); week 4's five weekdays get a warm start each,
    // all used (the person came at 08:50 as always), each sparing the 120 s boot.
    expect(warmStarts).toEqual([
      {
        vm: "users/h36w-ada",
        returns: 20,
        warmStarts: 5,
        used: 5,
        wasted: 0,
        savedSeconds: 600,
        costSeconds: expect.any(Number),
      },
    ]);
    const text = sink();
    await whatifCommand(["--returns=-", "--time-zone", "Europe/Berlin"], {
      stdout: text,
      stderr: err,
      readFile: () => document,
    });
    expect(text.text).toContain("users/h36w-ada: 20 returns, 5 warm starts (5 used, 0 wasted), wait saved 10m");
  });

  it("refuses a bad time zone, and --prometheus with it", async () => {
    const err = sink();
    const io = { stdout: sink(), stderr: err, readFile: () => document };
    expect(await whatifCommand(["--returns", "f", "--time-zone", "Mars/Olympus"], io)).toBe(2);
    expect(await whatifCommand(["--returns", "f", "--prometheus", "http://127.0.0.1:1", "--from", "now-1d"], io)).toBe(
      2,
    );
    expect(err.text).toContain('--time-zone: "Mars/Olympus" is not a time zone');
    expect(err.text).toContain("--returns replays the recorded returns: not with --prometheus");
  });
});
