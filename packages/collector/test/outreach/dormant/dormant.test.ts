import { describe, expect, it } from "vitest";
import { DEFAULT_DORMANT, parseDormantConfig } from "../../../src/outreach/dormant/config.js";
import { BUILTIN_DEFAULT_POLICY, policyFromAnnotations } from "../../../src/engine/policy.js";
import { dormantRequest } from "../../../src/outreach/dormant/payloads.js";
import {
  type DormantVm,
  dormantText,
  dormantTotals,
  formatDormantState,
  parseDormantState,
  planDormant,
} from "../../../src/outreach/dormant/report.js";
import { dormantSection } from "../../../src/web/dormant-section.js";

const P = "workstation.aik8s.run/";
const DAY = 86_400_000;
const NOW = Date.parse("2026-12-05T00:00:00Z");
const config = { ...DEFAULT_DORMANT };
const GiB = 1024 ** 3;

function vm(partial: Partial<DormantVm> = {}): DormantVm {
  return {
    namespace: "lab",
    name: "ada",
    owner: "ada",
    profile: "",
    stoppedSinceMs: NOW - 42 * DAY,
    stoppedSeconds: 42 * 86_400,
    disks: [{ claim: "ada-root", bytes: 200 * GiB, storageClass: "ceph-rbd", snapshots: null }],
    bytes: 200 * GiB,
    notifiedMs: null,
    ...partial,
  };
}

describe("dormant config", () => {
  it("defaults to 30 days, a monthly reminder and an hourly look", () => {
    const problems: string[] = [];
    expect(parseDormantConfig(undefined, problems, "dormant")).toEqual({
      afterSeconds: 30 * 86_400,
      notifyEverySeconds: 30 * 86_400,
      scanEverySeconds: 3600,
    });
    expect(problems).toEqual([]);
  });

  it("reads durations and names every bad value and unknown key", () => {
    const problems: string[] = [];
    expect(parseDormantConfig({ after: "14d", notifyEvery: "7d", scanEvery: "10m" }, problems, "dormant")).toEqual({
      afterSeconds: 14 * 86_400,
      notifyEverySeconds: 7 * 86_400,
      scanEverySeconds: 600,
    });
    const bad = parseDormantConfig({ after: "soon", scanEvery: "2d", every: "1d" }, problems, "dormant");
    expect(bad).toEqual(DEFAULT_DORMANT);
    expect(problems).toEqual([
      'dormant: unknown setting "every" (known: after, notifyEvery, scanEvery)',
      'dormant.after: expected a duration from 1s to 10 years (e.g. "30d"), not "soon"',
      'dormant.scanEvery: expected a duration from 1s to 1 day (e.g. "30d"), not "2d"',
    ]);
    parseDormantConfig("30d", problems, "dormant");
    expect(problems.at(-1)).toBe("dormant: expected a mapping with after, notifyEvery, scanEvery");
  });
});

describe("planDormant", () => {
  it("starts counting at ws's own last stop, else now, and writes that once", () => {
    const lastStop = JSON.stringify({ when: new Date(NOW - 42 * DAY).toISOString(), reason: "idle" });
    const plan = planDormant({ annotations: { [`${P}last-stop`]: lastStop }, stopped: true }, P, config, NOW);
    expect(plan).toMatchObject({ dormant: true, notify: true, state: { sinceMs: NOW - 42 * DAY, notifiedMs: NOW } });
    const fresh = planDormant({ annotations: {}, stopped: true }, P, config, NOW);
    expect(fresh).toMatchObject({ dormant: false, notify: false, state: { sinceMs: NOW } });
    expect(fresh.write).toBe(formatDormantState({ sinceMs: NOW }));
    // Nothing new to say: nothing written.
    expect(
      planDormant({ annotations: { [`${P}dormant`]: fresh.write! }, stopped: true }, P, config, NOW + DAY).write,
    ).toBe(undefined);
  });

  it("a VM seen running since ws's last stop counts from now, not from that older stop", () => {
    const lastStop = JSON.stringify({ when: new Date(NOW - 42 * DAY).toISOString(), reason: "idle" });
    const plan = planDormant(
      { annotations: { [`${P}last-stop`]: lastStop }, stopped: true, ranSinceLastStop: true },
      P,
      config,
      NOW,
    );
    expect(plan).toMatchObject({ dormant: false, notify: false, state: { sinceMs: NOW } });
  });

  it("reminds once per period: not again within notifyEvery, again after it", () => {
    const stored = (notifiedDaysAgo: number) => ({
      [`${P}dormant`]: formatDormantState({ sinceMs: NOW - 60 * DAY, notifiedMs: NOW - notifiedDaysAgo * DAY }),
    });
    expect(planDormant({ annotations: stored(5), stopped: true }, P, config, NOW)).toMatchObject({
      dormant: true,
      notify: false,
      write: undefined,
    });
    expect(planDormant({ annotations: stored(30), stopped: true }, P, config, NOW)).toMatchObject({
      notify: true,
      state: { notifiedMs: NOW },
    });
  });

  it("its annotation is ws's own state, never reported as an unknown policy setting", () => {
    const annotations = { [`${P}dormant`]: formatDormantState({ sinceMs: NOW }) };
    expect(policyFromAnnotations({}, annotations, BUILTIN_DEFAULT_POLICY, {}, P).errors).toEqual([]);
  });

  it("a running VM loses the record (the next stop counts afresh); a malformed record is rewritten", () => {
    const annotations = { [`${P}dormant`]: formatDormantState({ sinceMs: NOW - 60 * DAY }) };
    expect(planDormant({ annotations, stopped: false }, P, config, NOW)).toEqual({
      state: null,
      write: null,
      dormant: false,
      notify: false,
    });
    expect(parseDormantState("{not json")).toBe(null);
    expect(planDormant({ annotations: { [`${P}dormant`]: "[]" }, stopped: true }, P, config, NOW).write).toBe(
      formatDormantState({ sinceMs: NOW }),
    );
  });
});

describe("what is said and counted", () => {
  it("tells the owner how long and how much", () => {
    expect(dormantText(vm())).toBe(
      "ada: your workstation lab/ada has been stopped for 42 days and holds 200 GiB; start it or ask for it to be archived.",
    );
    const json = JSON.parse(dormantRequest({ url: "http://h/x", format: "json", name: "j" }, vm(), NOW).body);
    expect(json).toMatchObject({ event: "dormant", stoppedDays: 42, diskBytes: 200 * GiB, owner: "ada" });
    const ntfy = dormantRequest({ url: "https://ntfy.example.com/ws-ada", format: "ntfy", name: "n" }, vm(), NOW);
    expect(ntfy.url).toBe("https://ntfy.example.com/");
    expect(JSON.parse(ntfy.body)).toMatchObject({
      topic: "ws-ada",
      title: "Workstation lab/ada has been stopped for 42 days",
    });
  });

  it("totals per namespace and StorageClass, a VM once per class", () => {
    const two = vm({
      name: "bob",
      disks: [
        { claim: "a", bytes: GiB, storageClass: "ceph-rbd", snapshots: null },
        { claim: "b", bytes: 2 * GiB, storageClass: "ceph-rbd", snapshots: null },
        { claim: "c", bytes: null, storageClass: null, snapshots: null },
      ],
    });
    expect(dormantTotals([vm(), two, vm({ namespace: "ops", disks: [], bytes: 0 })])).toEqual([
      { namespace: "lab", storageClass: "ceph-rbd", vms: 2, bytes: 203 * GiB },
      { namespace: "lab", storageClass: "unknown", vms: 1, bytes: 0 },
      { namespace: "ops", storageClass: "none", vms: 1, bytes: 0 },
    ]);
  });

  it("the fleet page section lists each VM, or says none", () => {
    const html = dormantSection([vm({ notifiedMs: NOW - 2 * DAY })], NOW);
    expect(html).toContain('data-dormant="lab/ada"');
    expect(html).toContain('<td class="days">42</td>');
    expect(html).toContain("2 day(s) ago");
    expect(dormantSection([], NOW)).toContain("None: no VM has been stopped that long.");
    expect(dormantSection(undefined, NOW)).toBe("");
  });
});
