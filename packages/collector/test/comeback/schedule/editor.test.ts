// Changing a schedule (issue 36): what each change writes, that a refused change writes nothing,
// the page's same-site check, and standalone's in-memory keeping.
import { describe, expect, it } from "vitest";
import { plannedSchedule, ScheduleEditor } from "../../../src/comeback/schedule/editor.js";
import { changeFromForm, crossSite } from "../../../src/comeback/schedule/page.js";
import { scheduleStatus } from "../../../src/comeback/schedule/schedules.js";
import { StandaloneStarts } from "../../../src/platform/standalone/start.js";

const PREFIX = "workstation.aik8s.run/";
const MONDAY_NOON_BERLIN = Date.parse("2026-12-07T11:00:00Z");

describe("plannedSchedule", () => {
  it("writes the canonical line, with the VM's zone when the line names none", () => {
    const annotations = { [`${PREFIX}time-zone`]: "Europe/Berlin" };
    expect(plannedSchedule(annotations, PREFIX, "UTC", { kind: "set", line: "mon-fri 8:45" }, 0)).toEqual({
      ok: true,
      value: "weekdays 08:45 tz Europe/Berlin",
      message: "schedule set: weekdays 08:45 tz Europe/Berlin",
    });
    expect(
      plannedSchedule({}, PREFIX, "Asia/Tokyo", { kind: "set", line: "daily 07:00", timeZone: "America/New_York" }, 0),
    ).toMatchObject({ ok: true, value: "daily 07:00 tz America/New_York" });
    expect(plannedSchedule({}, PREFIX, "Asia/Tokyo", { kind: "set", line: "daily 07:00" }, 0)).toMatchObject({
      value: "daily 07:00 tz Asia/Tokyo",
    });
  });

  it("skips a date in the schedule's own zone, and refuses to skip what is not there", () => {
    const annotations = { [`${PREFIX}schedule`]: "weekdays 08:45 tz Europe/Berlin" };
    expect(plannedSchedule(annotations, PREFIX, "UTC", { kind: "skip", date: "tomorrow" }, MONDAY_NOON_BERLIN)).toEqual(
      {
        ok: true,
        value: "weekdays 08:45 tz Europe/Berlin skip 2026-12-08",
        message: "no scheduled start on 2026-12-08",
      },
    );
    expect(plannedSchedule({}, PREFIX, "UTC", { kind: "skip", date: "tomorrow" }, 0)).toEqual({
      ok: false,
      error: "this VM has no schedule to skip a day of",
    });
    expect(
      plannedSchedule(
        { [`${PREFIX}schedule`]: "weekdyas 08:45" },
        PREFIX,
        "UTC",
        { kind: "skip", date: "tomorrow" },
        0,
      ),
    ).toMatchObject({ ok: false, error: expect.stringContaining("set it again first") });
    expect(plannedSchedule({}, PREFIX, "UTC", { kind: "clear" }, 0)).toMatchObject({ ok: true, value: null });
  });
});

describe("the schedule page's checks", () => {
  it("refuses what a browser says came from another site", () => {
    expect(crossSite({ host: "ws.example.com", origin: "https://ws.example.com" })).toBe(false);
    expect(crossSite({ host: "ws.example.com", "sec-fetch-site": "same-origin" })).toBe(false);
    expect(crossSite({ host: "ws.example.com" })).toBe(false);
    expect(crossSite({ host: "ws.example.com", origin: "https://evil.example" })).toBe(true);
    expect(crossSite({ host: "ws.example.com", "sec-fetch-site": "cross-site" })).toBe(true);
    expect(crossSite({ host: "ws.example.com", "sec-fetch-site": "same-site" })).toBe(true);
    expect(crossSite({ host: "ws.example.com", origin: "null" })).toBe(true);
  });

  it("reads the form's fields as a change", () => {
    expect(changeFromForm(new URLSearchParams("schedule=weekdays+08:45&stopBy=20:00&tz=Europe/Berlin"))).toEqual({
      kind: "set",
      line: "weekdays 08:45 stop-by 20:00",
      timeZone: "Europe/Berlin",
    });
    expect(changeFromForm(new URLSearchParams("action=skip"))).toEqual({ kind: "skip", date: "tomorrow" });
    expect(changeFromForm(new URLSearchParams("action=clear"))).toEqual({ kind: "clear" });
    expect(changeFromForm(new URLSearchParams("action=set"))).toHaveProperty("error");
    expect(changeFromForm(new URLSearchParams("action=drop"))).toEqual({ error: 'unknown action "drop"' });
  });
});

describe("standalone keeps a schedule in memory, over the configured one", () => {
  it("set, then clear hides the configured line; a refused change writes nothing", async () => {
    const vm = { namespace: "lab", name: "box" };
    const starts = new StandaloneStarts({
      configured: () => [vm],
      labels: () => ({}),
      annotations: () => ({ [`${PREFIX}schedule`]: "daily 09:00 tz UTC" }),
      owner: () => "alice",
      connectedAtMs: () => undefined,
      nowMs: () => MONDAY_NOON_BERLIN,
    });
    const audits: string[] = [];
    const editor = new ScheduleEditor({
      platform: starts,
      prefix: PREFIX,
      siteZone: "UTC",
      nowMs: () => MONDAY_NOON_BERLIN,
      audit: (_vm, message) => audits.push(message),
    });
    expect(editor.status(vm)).toMatchObject({ line: "daily 09:00 tz UTC", nextStart: "Tue 8 Dec 09:00 UTC" });
    const refused = await editor.change(vm, { kind: "set", line: "weekdays 25:00" }, "alice");
    expect(refused).toEqual({
      ok: false,
      status: 400,
      error: '"25:00" is not a time: write HH:MM, 24-hour, e.g. 08:45',
    });
    expect(audits).toEqual([]);
    const set = await editor.change(vm, { kind: "set", line: "weekdays 08:45", timeZone: "Europe/Berlin" }, "alice");
    expect(set).toMatchObject({ ok: true, status: { nextStart: "Tue 8 Dec 08:45 CET" } });
    expect(starts.facts(vm)?.annotations[`${PREFIX}schedule`]).toBe("weekdays 08:45 tz Europe/Berlin");
    await editor.change(vm, { kind: "clear" }, "alice");
    expect(editor.status(vm)).toBeUndefined();
    expect(audits).toEqual(["schedule set: weekdays 08:45 tz Europe/Berlin (by alice)", "schedule cleared (by alice)"]);
    expect(scheduleStatus({}, PREFIX, "UTC", 0)).toBeUndefined();
  });
});

describe("a profile's schedule", () => {
  const profiles = { office: "weekdays 08:45" };
  it("applies to a VM that names the profile and has no schedule of its own; the VM's annotation wins", () => {
    const named = { [`${PREFIX}profile`]: "office", [`${PREFIX}time-zone`]: "Europe/Berlin" };
    expect(scheduleStatus(named, PREFIX, "UTC", MONDAY_NOON_BERLIN, profiles)).toMatchObject({
      line: "weekdays 08:45",
      timeZone: "Europe/Berlin",
      nextStartMs: Date.parse("2026-12-08T07:45:00Z"),
    });
    const own = { ...named, [`${PREFIX}schedule`]: "daily 10:00" };
    expect(scheduleStatus(own, PREFIX, "UTC", MONDAY_NOON_BERLIN, profiles)?.line).toBe("daily 10:00");
    expect(
      scheduleStatus({ [`${PREFIX}profile`]: "lab" }, PREFIX, "UTC", MONDAY_NOON_BERLIN, profiles),
    ).toBeUndefined();
    // A day skipped on a VM that only has its profile's schedule keeps it, with the skip, on the VM.
    const skip = plannedSchedule(
      named,
      PREFIX,
      "UTC",
      { kind: "skip", date: "tomorrow" },
      MONDAY_NOON_BERLIN,
      profiles,
    );
    expect(skip).toMatchObject({ ok: true, value: "weekdays 08:45 tz Europe/Berlin skip 2026-12-08" });
  });
});
