// The observer the fleet is given in serve/serve.ts is a chain: given back, wrong stops and spend
// wrap the outreach. A call one wrapper does not know must still reach the outreach: the quiet
// minutes of a Report held back (the VM page's chart) were dropped by the two wrappers written
// before that call existed.
import { describe, expect, it } from "vitest";
import type { FleetObserver } from "../../src/loop/fleet-observer.js";
import type { QuietMinutePoint } from "../../src/model/quiet-minutes.js";
import { withGivenBack } from "../../src/outreach/adoption/observer.js";
import { GivenBackLedger } from "../../src/outreach/adoption/given-back.js";
import { withSpend } from "../../src/outreach/money/observer.js";
import { WrongStopLedger } from "../../src/outreach/rates/ledger.js";
import { withWrongStops } from "../../src/outreach/rates/observer.js";

const vm = { namespace: "team", name: "ws-1" };

function recording(): { observer: FleetObserver; calls: string[] } {
  const calls: string[] = [];
  return {
    calls,
    observer: {
      decided: () => calls.push("decided"),
      quietMinutes: (_vm, minutes) => calls.push(`quietMinutes:${minutes.length}`),
      stopped: () => calls.push("stopped"),
      deliversNotice: () => true,
      noticeLink: () => "https://ws.example/keep",
      owner: () => "ana",
      forget: () => calls.push("forget"),
    },
  };
}

describe("the fleet's observer chain", () => {
  it("passes every call through every wrapper to the outreach", () => {
    const { observer, calls } = recording();
    const touched: string[] = [];
    const chain = withSpend(
      withWrongStops(
        withGivenBack(
          observer,
          new GivenBackLedger(0),
          () => undefined,
          () => 0,
        ),
        new WrongStopLedger(0),
      ),
      (key) => touched.push(key.name),
    );
    const minutes: QuietMinutePoint[] = [{ atMs: 60_000, idleSeconds: 0, active: true }];
    chain.quietMinutes?.(vm, minutes, "Active");
    chain.forget(vm);
    expect(calls).toEqual(["quietMinutes:1", "forget"]);
    expect(chain.owner(vm)).toBe("ana");
    expect(chain.noticeLink(vm, "n1", 1)).toBe("https://ws.example/keep");
    expect(chain.deliversNotice("enforce", {} as never)).toBe(true);
  });
});
