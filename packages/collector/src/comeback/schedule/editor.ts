// Changing a VM's start schedule (docs/coming-back.md, "A schedule the user sets"): the one place
// every writer goes through — the VM's user with `ws-lease schedule` (through the agent's stream),
// the owner or an admin on the schedule page. A change is validated here first (a typo is an error
// with a did-you-mean, and nothing is written), then kept durably on the VM (Kubernetes: its
// `schedule` annotation, in its canonical form with the time zone spelled out) and audited as a
// `ScheduleSet` Event.
import { formatSchedule, localDate, parseSchedule, parseSkipDate, withSkip } from "@ws/protocol";
import { type VmKey, vmId } from "../../model/vm-key.js";
import type { StartPlatform } from "../start/platform.js";
import {
  type ProfileSchedules,
  SCHEDULE_ANNOTATION,
  type ScheduleStatus,
  defaultZoneOf,
  scheduleOf,
  scheduleStatus,
} from "./schedules.js";

export type ScheduleChange =
  | { kind: "set"; line: string; timeZone?: string }
  | { kind: "clear" }
  /** "tomorrow", "today" or YYYY-MM-DD, in the schedule's zone. */
  | { kind: "skip"; date: string };

export type ScheduleChangeOutcome =
  | { ok: true; message: string; status?: ScheduleStatus }
  | { ok: false; status: 400 | 404 | 409 | 503; error: string };

/** The annotation value a change leads to (null: removed), or why it is refused. Pure. */
export function plannedSchedule(
  annotations: Record<string, string>,
  prefix: string,
  siteZone: string,
  change: ScheduleChange,
  nowMs: number,
  profileSchedules: ProfileSchedules = {},
): { ok: true; value: string | null; message: string } | { ok: false; error: string } {
  if (change.kind === "clear") return { ok: true, value: null, message: "schedule cleared" };
  if (change.kind === "set") {
    const line = change.timeZone ? `${change.line} tz ${change.timeZone}` : change.line;
    const parsed = parseSchedule(line, defaultZoneOf(annotations, prefix, siteZone));
    if (!parsed.ok) return { ok: false, error: parsed.error };
    const value = formatSchedule(parsed.schedule);
    return { ok: true, value, message: `schedule set: ${value}` };
  }
  const current = scheduleOf(annotations, prefix, siteZone, profileSchedules);
  if (!current) return { ok: false, error: "this VM has no schedule to skip a day of" };
  if (!current.schedule)
    return { ok: false, error: `the VM's schedule is invalid (${current.error}); set it again first` };
  const zone = current.schedule.timeZone;
  const date = parseSkipDate(change.date, nowMs, zone);
  if ("error" in date) return { ok: false, error: date.error };
  const value = formatSchedule(withSkip(current.schedule, date.date, localDate(nowMs, zone)));
  return { ok: true, value, message: `no scheduled start on ${date.date}` };
}

export interface ScheduleEditorOptions {
  platform: StartPlatform;
  prefix: string;
  siteZone: string;
  /** The profiles' schedules (a VM's own annotation wins over its profile's). */
  profileSchedules?: ProfileSchedules;
  nowMs: () => number;
  /** The audit trail: a `ScheduleSet` Event (Kubernetes), a log line (standalone). */
  audit: (vm: VmKey, message: string) => void;
}

export class ScheduleEditor {
  constructor(private readonly options: ScheduleEditorOptions) {}

  /** The schedule as shown now (undefined: none, or no such VM). */
  status(vm: VmKey): ScheduleStatus | undefined {
    const facts = this.options.platform.facts(vm);
    return facts
      ? scheduleStatus(
          facts.annotations,
          this.options.prefix,
          this.options.siteZone,
          this.options.nowMs(),
          this.options.profileSchedules,
        )
      : undefined;
  }

  /** Validates and keeps a change; `by` says who asked (audited). */
  async change(vm: VmKey, change: ScheduleChange, by: string): Promise<ScheduleChangeOutcome> {
    const { platform, prefix, siteZone } = this.options;
    const facts = platform.facts(vm);
    if (!facts) return { ok: false, status: 404, error: `no VM ${vmId(vm)} is known to the collector` };
    if (!platform.writeAnnotations)
      return { ok: false, status: 503, error: "this collector cannot keep settings on its VMs" };
    const now = this.options.nowMs();
    const { profileSchedules } = this.options;
    const planned = plannedSchedule(facts.annotations, prefix, siteZone, change, now, profileSchedules);
    if (!planned.ok) return { ok: false, status: 400, error: planned.error };
    const written = await platform.writeAnnotations(vm, { [SCHEDULE_ANNOTATION]: planned.value });
    if (!written.ok) return { ok: false, status: 503, error: `the schedule could not be kept: ${written.message}` };
    this.options.audit(vm, `${planned.message} (by ${by})`);
    // Cleared, the VM falls back to its profile's schedule, if it has one.
    const annotations = { ...facts.annotations };
    if (planned.value === null) delete annotations[`${prefix}${SCHEDULE_ANNOTATION}`];
    else annotations[`${prefix}${SCHEDULE_ANNOTATION}`] = planned.value;
    const after = scheduleStatus(annotations, prefix, siteZone, now, profileSchedules);
    return { ok: true, message: planned.message, ...(after ? { status: after } : {}) };
  }
}
