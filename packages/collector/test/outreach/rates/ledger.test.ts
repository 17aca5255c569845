import { describe, expect, it } from "vitest";
import { WrongStopLedger } from "../../../src/outreach/rates/ledger.js";
import { ratesSection } from "../../../src/web/rates-section.js";

const MIN = 60_000;
const DAY = 86_400_000;
const T0 = Date.parse("2026-11-01T00:00:00Z");
const vm = (name: string) => ({ namespace: "lab", name });

describe("how often ws is wrong, per profile", () => {
  it("counts a return within 15 minutes of ws's stop once, a later one not, and disputes per profile", () => {
    const ledger = new WrongStopLedger(T0);
    ledger.stopped(vm("ada"), "teaching", T0 + MIN);
    ledger.active(vm("ada"), T0 + 10 * MIN); // back within 15 minutes
    ledger.active(vm("ada"), T0 + 11 * MIN); // still active: not a second return
    ledger.stopped(vm("bob"), "teaching", T0 + 2 * MIN);
    ledger.active(vm("bob"), T0 + 20 * MIN); // back after 18 minutes: not counted
    ledger.stopped(vm("cy"), "", T0 + 3 * MIN);
    ledger.disputed("teaching", T0 + 30 * MIN);
    const now = T0 + DAY;
    expect(ledger.rates(now)).toEqual([
      {
        profile: "",
        window: "7d",
        stops: 1,
        quickReturns: 0,
        disputes: 0,
        quickReturnsPer100: 0,
        disputesPer100: 0,
        sinceMs: T0,
      },
      {
        profile: "",
        window: "30d",
        stops: 1,
        quickReturns: 0,
        disputes: 0,
        quickReturnsPer100: 0,
        disputesPer100: 0,
        sinceMs: T0,
      },
      {
        profile: "teaching",
        window: "7d",
        stops: 2,
        quickReturns: 1,
        disputes: 1,
        quickReturnsPer100: 50,
        disputesPer100: 50,
        sinceMs: T0,
      },
      {
        profile: "teaching",
        window: "30d",
        stops: 2,
        quickReturns: 1,
        disputes: 1,
        quickReturnsPer100: 50,
        disputesPer100: 50,
        sinceMs: T0,
      },
    ]);
  });

  it("a stop older than 7 days leaves the 7-day window but stays in the 30-day one; a window with no stops has no rate", () => {
    const ledger = new WrongStopLedger(T0);
    ledger.stopped(vm("ada"), "", T0);
    ledger.disputed("", T0 + MIN);
    const [week, month] = ledger.rates(T0 + 8 * DAY);
    expect(week).toMatchObject({ window: "7d", stops: 0, disputes: 0, quickReturnsPer100: null, disputesPer100: null });
    expect(month).toMatchObject({ window: "30d", stops: 1, disputes: 1, disputesPer100: 100 });
    expect(ledger.rates(T0 + 31 * DAY)).toEqual([]);
  });

  it("the page marks a rate over the budget and says since when a short window counts", () => {
    const ledger = new WrongStopLedger(T0);
    ledger.stopped(vm("ada"), "teaching", T0 + MIN);
    ledger.active(vm("ada"), T0 + 2 * MIN);
    const html = ratesSection(ledger.rates(T0 + DAY), T0 + DAY);
    expect(html).toContain('<tr data-profile="teaching" data-window="7d">');
    expect(html).toContain(
      '<td class="returns over" title="over 1 per 100 stops: tune"><strong>100</strong> <small>(1)</small></td>',
    );
    expect(html).toContain("(since 2026-11-01 00:00 UTC)");
    expect(ratesSection([], T0)).toContain("No stops yet.");
  });
});
