// The loop edge that makes a schedule's starts (docs/coming-back.md): every pass it reads each VM's
// schedule (comeback/schedule/schedules.ts), and a start that fell due since the last pass goes
// through the same start path as the start link (StartLinks.start: one start per VM however many
// ask, a `Started` audit event), as trigger `schedule`. Only the leader fires; a standby keeps its
// pass clock moving so that it does not make up starts on the day it becomes leader.
//
// A start that fails (the platform refused) is tried again every `retryMs` until `giveUpMs` after
// its time; a start KubeVirt accepted but cannot place (the VMI Pending, unschedulable: its GPU
// went to someone else) stays asked for — KubeVirt places it as soon as there is room — and the
// owner is told once, with the scheduler's own message.
import { dueStart } from "@ws/protocol";
import { type VmKey, vmId } from "../../model/vm-key.js";
import type { StartFacts, StartPlatform, StartResult } from "../start/platform.js";
import type { AuthorizedStart } from "../start/handler.js";
import { runViewOf } from "../start/tracker.js";
import { type ProfileSchedules, scheduleOf } from "./schedules.js";

export interface ScheduleRunnerOptions {
  platform: StartPlatform;
  start: (request: AuthorizedStart) => Promise<{ ok: boolean; message: string }>;
  prefix: string;
  /** The time zone of a schedule that names none, on a VM without a `time-zone` annotation. */
  siteZone: string;
  /** The profiles' schedules (a VM's own annotation wins over its profile's). */
  profileSchedules?: ProfileSchedules;
  nowMs: () => number;
  leader: () => boolean;
  /** A start that was due this long ago and never happened is not made up for. */
  catchUpMs: number;
  retryMs: number;
  /** After this long a failing start is given up (the owner is told). */
  giveUpMs: number;
  /** The audit trail (Kubernetes Events): an invalid schedule, a start that cannot be made or placed. */
  audit: (
    vm: VmKey,
    type: "Normal" | "Warning",
    reason: "ScheduleInvalid" | "ScheduledStartUnplaced" | "ScheduledStartFailed",
    message: string,
  ) => void;
  /** Tells the owner (webhook): the scheduled start could not be made or placed. */
  tellOwner?: (vm: VmKey, message: string) => void;
  log: (level: "info" | "warn", message: string) => void;
}

interface DueStart {
  dueMs: number;
  line: string;
  nextTryMs: number;
  lastError?: string;
  /** The start was accepted: now it waits for the platform to place it. */
  accepted?: boolean;
  toldUnplaced?: boolean;
}

/** Whether the platform placed the VM (a node, or the standalone start command ran). */
function placed(facts: StartFacts): boolean {
  return facts.instance?.nodeName != null || facts.instance?.phase === "Running";
}

export class ScheduleRunner {
  private lastPassMs: number;
  private readonly due = new Map<string, DueStart>();
  /** The invalid lines already reported, per VM: one Warning per line, not one per pass. */
  private readonly reportedInvalid = new Map<string, string>();
  private running = false;

  constructor(private readonly options: ScheduleRunnerOptions) {
    this.lastPassMs = options.nowMs();
  }

  /** One pass: finds the starts due since the last, makes the ones whose time came. Never rejects. */
  async pass(): Promise<void> {
    if (this.running) return;
    this.running = true;
    try {
      await this.passOnce();
    } finally {
      this.running = false;
    }
  }

  private async passOnce(): Promise<void> {
    const now = this.options.nowMs();
    const since = this.lastPassMs;
    this.lastPassMs = now;
    if (!this.options.leader()) {
      this.due.clear();
      return;
    }
    const { platform, prefix, siteZone } = this.options;
    const seen = new Set<string>();
    for (const vm of platform.list()) {
      const id = vmId(vm);
      seen.add(id);
      const facts = platform.facts(vm);
      if (!facts) continue;
      const read = scheduleOf(facts.annotations, prefix, siteZone, this.options.profileSchedules);
      if (!read?.schedule) {
        this.due.delete(id);
        if (read?.error && this.reportedInvalid.get(id) !== read.line) {
          this.reportedInvalid.set(id, read.line);
          this.options.audit(
            vm,
            "Warning",
            "ScheduleInvalid",
            `the schedule "${read.line}" is not applied (nothing is started or stopped for it): ${read.error}`,
          );
        }
        if (!read) this.reportedInvalid.delete(id);
        continue;
      }
      this.reportedInvalid.delete(id);
      const dueMs = dueStart(read.schedule, since, now, this.options.catchUpMs);
      if (dueMs !== undefined && !runViewOf(facts).running)
        this.due.set(id, { dueMs, line: read.line, nextTryMs: now });
      const pending = this.due.get(id);
      if (pending) await this.advance(vm, facts, pending, now);
    }
    for (const id of this.due.keys()) if (!seen.has(id)) this.due.delete(id);
    for (const id of this.reportedInvalid.keys()) if (!seen.has(id)) this.reportedInvalid.delete(id);
  }

  private async advance(vm: VmKey, facts: StartFacts, pending: DueStart, now: number): Promise<void> {
    const id = vmId(vm);
    if (pending.accepted) {
      if (placed(facts) || !runViewOf(facts).running) {
        // Placed (done), or stopped again by someone meanwhile (not ours to undo).
        if (placed(facts) && pending.toldUnplaced)
          this.tell(vm, `the scheduled start of ${id} is placed now, ${minutes(now - pending.dueMs)} after its time`);
        this.due.delete(id);
        return;
      }
      const blocked = facts.instance?.unschedulable;
      if (blocked && !pending.toldUnplaced) {
        pending.toldUnplaced = true;
        const message = `the scheduled start of ${id} (${pending.line}) cannot be placed yet: ${blocked.reason || "Unschedulable"}: ${blocked.message}; it stays asked for and starts as soon as there is room`;
        this.options.audit(vm, "Warning", "ScheduledStartUnplaced", message);
        this.tell(vm, message);
      }
      return;
    }
    if (now < pending.nextTryMs) return;
    if (now - pending.dueMs > this.options.giveUpMs) {
      const message = `the scheduled start of ${id} (${pending.line}) was given up ${minutes(now - pending.dueMs)} after its time: ${pending.lastError ?? "it did not happen"}`;
      this.options.audit(vm, "Warning", "ScheduledStartFailed", message);
      this.tell(vm, message);
      this.due.delete(id);
      return;
    }
    let result: StartResult | { ok: boolean; message: string };
    try {
      result = await this.options.start({ vm, by: `its schedule (${pending.line})`, trigger: "schedule" });
    } catch (error) {
      result = { ok: false, message: String(error) };
    }
    if (result.ok) {
      pending.accepted = true;
      delete pending.lastError;
      return;
    }
    pending.lastError = result.message;
    pending.nextTryMs = now + this.options.retryMs;
    this.options.log("warn", `${id}: the scheduled start failed, trying again: ${result.message}`);
  }

  private tell(vm: VmKey, message: string): void {
    this.options.log("info", `${vmId(vm)}: ${message}`);
    this.options.tellOwner?.(vm, message);
  }
}

function minutes(ms: number): string {
  return ms < 60_000 ? `${Math.round(ms / 1000)} s` : `${Math.round(ms / 60_000)} min`;
}
