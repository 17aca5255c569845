// `ws-lease schedule` in the agent (docs/coming-back.md, "A schedule the user sets"): the VM's
// start schedule lives with the VM outside it (Kubernetes: an annotation the collector writes), so
// the agent only carries a user's request to the collector in its next Report and waits for the
// Directive that answers it. A request is sent in every Report until it is answered or its caller
// gave up; nothing is kept on disk.
import { randomBytes } from "node:crypto";
import type { Directive } from "@ws/protocol";

export interface ScheduleAsk {
  op: "set" | "clear" | "skip" | "status";
  line?: string;
  timeZone?: string;
  date?: string;
}

export interface ScheduleReply {
  ok: boolean;
  message: string;
  /** The schedule as /api/vms shows it, or null when the VM has none. */
  schedule: Record<string, unknown> | null;
}

interface Pending {
  request: { id: string; op: string; line: string; timeZone: string; date: string; user: string };
  resolve: (reply: ScheduleReply | undefined) => void;
}

/** At most this many requests wait at once (a Report carries them all). */
const MAX_PENDING = 8;

export class ScheduleRequests {
  private readonly pending = new Map<string, Pending>();

  /** What the next Report carries. */
  inReport(): Pending["request"][] {
    return [...this.pending.values()].map((entry) => entry.request);
  }

  /**
   * Queues the request and resolves with the collector's answer, or undefined after `waitMs`
   * (`wake` sends a Report now; the caller passes a timer so tests need no clock of their own).
   */
  ask(ask: ScheduleAsk, user: string, wake: () => void, waitMs: number): Promise<ScheduleReply | undefined> | "busy" {
    if (this.pending.size >= MAX_PENDING) return "busy";
    const id = randomBytes(4).toString("hex");
    return new Promise((resolve) => {
      const timer = setTimeout(() => finish(undefined), waitMs);
      const finish = (reply: ScheduleReply | undefined) => {
        clearTimeout(timer);
        this.pending.delete(id);
        resolve(reply);
      };
      this.pending.set(id, {
        request: {
          id,
          op: ask.op,
          line: ask.line ?? "",
          timeZone: ask.timeZone ?? "",
          date: ask.date ?? "",
          user,
        },
        resolve: finish,
      });
      wake();
    });
  }

  /** The collector's answers in a Directive resolve their requests. */
  answered(directive: Directive): void {
    for (const answer of directive.scheduleAnswers) {
      const entry = this.pending.get(answer.id);
      if (!entry) continue;
      let schedule: Record<string, unknown> | null = null;
      try {
        schedule = answer.statusJson ? (JSON.parse(answer.statusJson) as Record<string, unknown>) : null;
      } catch {
        schedule = null;
      }
      entry.resolve({ ok: answer.ok, message: answer.message, schedule });
    }
  }

  /** The agent stops: every waiting caller hears that nothing is known. */
  close(): void {
    for (const entry of [...this.pending.values()]) entry.resolve(undefined);
  }
}
