// The VM's start schedule as the collector reads it (docs/coming-back.md, "A schedule the user
// sets"): one annotation, `schedule`, that an admin writes (kubectl annotate, a template) and that
// a user's `ws-lease schedule` or the VM page's form writes for them. Its default time zone is the
// VM's `time-zone` annotation, else the collector's `start.timeZone`. Pure: annotations and a clock
// in, what the pages, /api/vms and the loop need out. An invalid line is shown as invalid and never
// fires anything.
import { describeInstant, describeSchedule, nextStart, nextStopBy, parseSchedule, type Schedule } from "@ws/protocol";

export const SCHEDULE_ANNOTATION = "schedule";
export const TIME_ZONE_ANNOTATION = "time-zone";

/** What /api/vms and the VM page show of a VM's schedule. */
export interface ScheduleStatus {
  /** The annotation's text, as written. */
  line: string;
  valid: boolean;
  /** Why the line is invalid (nothing is started or stopped for it). */
  error?: string;
  /** "weekdays at 08:45, stop by 20:00 (Europe/Berlin)". */
  description?: string;
  timeZone?: string;
  nextStartMs?: number;
  /** "Mon 7 Dec 08:45 CET": the next start as the owner reads it. */
  nextStart?: string;
  nextStopByMs?: number;
  nextStopBy?: string;
}

/** A profile's `schedule` (collector config, policy.profiles.NAME.schedule), by profile name. */
export type ProfileSchedules = Readonly<Record<string, string>>;

/**
 * The VM's schedule line and default zone (undefined: no schedule): its own annotation, else the
 * schedule of the profile it names (`profile` annotation); the VM's annotation wins.
 */
export function scheduleLineOf(
  annotations: Record<string, string>,
  prefix: string,
  siteZone: string,
  profileSchedules: ProfileSchedules = {},
): { line: string; zone: string } | undefined {
  const profile = annotations[`${prefix}profile`]?.trim();
  const line =
    annotations[`${prefix}${SCHEDULE_ANNOTATION}`]?.trim() || (profile ? profileSchedules[profile]?.trim() : undefined);
  if (!line) return undefined;
  return { line, zone: defaultZoneOf(annotations, prefix, siteZone) };
}

/** The zone of a schedule that names none: the VM's `time-zone` annotation, else the site's. */
export function defaultZoneOf(annotations: Record<string, string>, prefix: string, siteZone: string): string {
  return annotations[`${prefix}${TIME_ZONE_ANNOTATION}`]?.trim() || siteZone;
}

/** The parsed schedule, or why not; undefined when the VM has none. */
export function scheduleOf(
  annotations: Record<string, string>,
  prefix: string,
  siteZone: string,
  profileSchedules: ProfileSchedules = {},
): { line: string; schedule?: Schedule; error?: string } | undefined {
  const found = scheduleLineOf(annotations, prefix, siteZone, profileSchedules);
  if (!found) return undefined;
  const parsed = parseSchedule(found.line, found.zone);
  return parsed.ok ? { line: found.line, schedule: parsed.schedule } : { line: found.line, error: parsed.error };
}

/** The schedule as shown: next start and stop in the owner's zone, or the error. */
export function scheduleStatus(
  annotations: Record<string, string>,
  prefix: string,
  siteZone: string,
  nowMs: number,
  profileSchedules: ProfileSchedules = {},
): ScheduleStatus | undefined {
  const read = scheduleOf(annotations, prefix, siteZone, profileSchedules);
  if (!read) return undefined;
  if (!read.schedule) return { line: read.line, valid: false, error: read.error ?? "invalid" };
  const schedule = read.schedule;
  const start = nextStart(schedule, nowMs);
  const stop = nextStopBy(schedule, nowMs);
  return {
    line: read.line,
    valid: true,
    description: describeSchedule(schedule),
    timeZone: schedule.timeZone,
    ...(start !== undefined ? { nextStartMs: start, nextStart: describeInstant(start, schedule.timeZone) } : {}),
    ...(stop !== undefined ? { nextStopByMs: stop, nextStopBy: describeInstant(stop, schedule.timeZone) } : {}),
  };
}
