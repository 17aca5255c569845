// Delivers the collector's stop notices to people: every logged-in terminal,
// desktop sessions (best effort), and the notice file. Repeats as the stop
// nears; says so when the stop is cancelled. Never throws into the agent.
import { PolicyMode, type Notice, type NoticeCleared, errorMessage, terminalText } from "@ws/protocol";
import type { Clock } from "../clock.js";
import type { Roots } from "../roots.js";
import type { Users } from "../users.js";
import { desktopCommand, findDesktopSessions, findExecutable, runDesktopCommand } from "./desktop.js";
import { defaultNoticeFile, noticeFileContent, readNoticeFileId, removeNoticeFile, writeNoticeFile } from "./file.js";
import { cancellationText, noticeText, terminalBytes, type NoticeText } from "./format.js";
import {
  planReminders,
  REMINDER_OFFSETS_SECONDS,
  systemScheduler,
  type Scheduler,
  type TimerHandle,
} from "./schedule.js";
import {
  listLoggedInTerminals,
  mergeTerminals,
  writeToTerminal,
  type ListTerminals,
  type TerminalTarget,
  type WriteOutcome,
} from "./terminals.js";

/** A stop further away than this is not believed (a collector bug must not schedule timers for years). */
const MAX_STOP_IN_SECONDS = 7 * 86_400;

export interface NoticeDeliveryOptions {
  roots: Roots;
  users: Users;
  clock: Clock;
  log: (line: string) => void;
  scheduler?: Scheduler;
  /** The terminals to write to. Default: utmp login sessions and human-owned /dev/pts entries. */
  listTerminals?: ListTerminals;
  /** Default: <run>/ws-agent/notice.json. */
  noticeFile?: string;
  /** IANA zone for "at HH:MM"; default: the machine's. */
  timeZone?: string;
  /** Desktop notifications through notify-send; default on. */
  desktop?: boolean;
  reminderOffsetsSeconds?: number[];
}

export interface PendingNotice {
  id: string;
  stopInSeconds: number;
  reason: string;
  keepRunningHint: string;
  idleSeconds: number;
  mode: "enforce" | "observe" | "unknown";
}

export interface Broadcast {
  kind: "notice" | "reminder" | "cancelled";
  id: string;
  text: NoticeText;
  terminals: WriteOutcome[];
  desktopErrors: string[];
  desktopUsers: string[];
}

interface Tracked {
  id: string;
  stopAtMonoMs: number;
  receivedAtMonoMs: number;
  reason: string;
  keepRunningHint: string;
  idleSecondsAtArrival: number;
  mode: PolicyMode;
  timers: TimerHandle[];
}

export class NoticeDelivery {
  private current: Tracked | undefined;
  private chain: Promise<unknown> = Promise.resolve();
  private desktopTools: Promise<{ runuser: string; notifySend: string } | undefined> | undefined;
  private readonly scheduler: Scheduler;
  private readonly listTerminals: ListTerminals;
  readonly noticeFile: string;
  /** Every broadcast, for whoever wants to know (logs, tests). */
  onBroadcast: ((broadcast: Broadcast) => void) | undefined;

  constructor(private readonly options: NoticeDeliveryOptions) {
    this.scheduler = options.scheduler ?? systemScheduler;
    this.listTerminals = options.listTerminals ?? (() => listLoggedInTerminals(options.roots, options.users));
    this.noticeFile = options.noticeFile ?? defaultNoticeFile(options.roots);
  }

  /**
   * A Notice arrived at monotonic time `receivedAtMonoMs`. A new id is
   * announced at once; a repeat of the pending one only moves its deadline.
   */
  deliver(notice: Notice, receivedAtMonoMs: number): Promise<void> {
    const stopIn = Number.isFinite(notice.stopInSeconds)
      ? Math.min(MAX_STOP_IN_SECONDS, Math.max(0, notice.stopInSeconds))
      : 0;
    const previous = this.current;
    const tracked: Tracked = {
      id: terminalText(notice.id, 100) || "notice",
      stopAtMonoMs: receivedAtMonoMs + stopIn * 1000,
      receivedAtMonoMs,
      reason: notice.reason,
      keepRunningHint: notice.keepRunningHint,
      idleSecondsAtArrival: Number.isFinite(notice.idleSeconds) ? Math.max(0, notice.idleSeconds) : 0,
      mode: notice.mode,
      timers: [],
    };
    if (previous) for (const timer of previous.timers) timer.cancel();
    this.current = tracked;
    const sinceArrivalMs = this.options.clock.monotonicMs() - receivedAtMonoMs;
    for (const reminder of planReminders(stopIn, this.options.reminderOffsetsSeconds ?? REMINDER_OFFSETS_SECONDS)) {
      const delay = reminder.delayMs - sinceArrivalMs;
      if (delay <= 0) continue;
      tracked.timers.push(this.scheduler.after(delay, () => void this.announce(tracked, "reminder")));
    }
    if (previous?.id === tracked.id) return this.enqueue(() => this.writeFile(tracked));
    return this.announce(tracked, "notice");
  }

  /** The pending stop was cancelled: tell the terminals, remove the notice file. */
  clear(cleared: NoticeCleared): Promise<void> {
    const tracked = this.current;
    if (tracked && cleared.id !== "" && cleared.id !== tracked.id) {
      this.options.log(`notice: ignoring a cancellation for ${cleared.id}; the pending notice is ${tracked.id}`);
      return this.chain.then(() => undefined);
    }
    if (tracked) for (const timer of tracked.timers) timer.cancel();
    this.current = undefined;
    return this.enqueue(async () => {
      // A notice announced by a previous run of the agent is still on people's screens: cancel it too.
      const fileId = tracked ? undefined : await readNoticeFileId(this.noticeFile);
      const announcedBefore =
        tracked !== undefined || (fileId !== undefined && (cleared.id === "" || cleared.id === fileId));
      await removeNoticeFile(this.noticeFile);
      if (announcedBefore)
        await this.broadcast("cancelled", cleared.id || tracked?.id || "", cancellationText(cleared.reason));
    });
  }

  pending(): PendingNotice | undefined {
    const tracked = this.current;
    return tracked ? this.view(tracked) : undefined;
  }

  /** Stops the reminders; what was written stays written. */
  close(): Promise<void> {
    if (this.current) for (const timer of this.current.timers) timer.cancel();
    return this.chain.then(() => undefined);
  }

  private view(tracked: Tracked): PendingNotice {
    const nowMono = this.options.clock.monotonicMs();
    return {
      id: tracked.id,
      stopInSeconds: Math.max(0, (tracked.stopAtMonoMs - nowMono) / 1000),
      reason: tracked.reason,
      keepRunningHint: tracked.keepRunningHint,
      idleSeconds: tracked.idleSecondsAtArrival + Math.max(0, nowMono - tracked.receivedAtMonoMs) / 1000,
      mode: modeName(tracked.mode),
    };
  }

  private textFor(tracked: Tracked): NoticeText {
    const view = this.view(tracked);
    return noticeText(
      { ...view, observeMode: tracked.mode === PolicyMode.OBSERVE },
      this.options.clock.nowMs(),
      this.options.timeZone,
    );
  }

  private announce(tracked: Tracked, kind: "notice" | "reminder"): Promise<void> {
    return this.enqueue(async () => {
      if (this.current !== tracked) return; // replaced or cancelled while queued
      await this.writeFile(tracked);
      await this.broadcast(kind, tracked.id, this.textFor(tracked));
    });
  }

  private async writeFile(tracked: Tracked): Promise<void> {
    if (this.current !== tracked) return;
    const view = this.view(tracked);
    try {
      await writeNoticeFile(
        this.noticeFile,
        noticeFileContent(view, this.textFor(tracked), this.options.clock.nowMs()),
      );
    } catch (error) {
      this.options.log(`notice: cannot write ${this.noticeFile}: ${errorMessage(error)}`);
    }
  }

  private async broadcast(kind: Broadcast["kind"], id: string, text: NoticeText): Promise<void> {
    const { log, roots } = this.options;
    let targets: TerminalTarget[];
    try {
      targets = mergeTerminals(await this.listTerminals());
    } catch (error) {
      log(`notice: cannot list terminals: ${errorMessage(error)}`);
      targets = [];
    }
    const bytes = terminalBytes(text);
    const terminals = await Promise.all(targets.map((target) => writeToTerminal(roots.dev, target.tty, bytes)));
    const { users: desktopUsers, errors: desktopErrors } = await this.notifyDesktops(kind, text);
    const reached = terminals.filter((outcome) => outcome.ok).map((outcome) => outcome.tty);
    const failedTerminals = terminals
      .filter((outcome) => !outcome.ok)
      .map((outcome) => `${outcome.tty} (${outcome.ok ? "" : outcome.error})`);
    log(
      `notice ${id}: ${kind} sent to ${reached.length} terminal(s)${reached.length ? ` [${reached.join(", ")}]` : ""}` +
        `${failedTerminals.length ? `, not to ${failedTerminals.join(", ")}` : ""}` +
        `${desktopUsers.length ? `, desktop: ${desktopUsers.join(", ")}` : ""}` +
        `${desktopErrors.length ? `, desktop errors: ${desktopErrors.join("; ")}` : ""}`,
    );
    this.onBroadcast?.({ kind, id, text, terminals, desktopUsers, desktopErrors });
  }

  private async notifyDesktops(
    kind: Broadcast["kind"],
    text: NoticeText,
  ): Promise<{ users: string[]; errors: string[] }> {
    if (this.options.desktop === false) return { users: [], errors: [] };
    this.desktopTools ??= (async () => {
      const [runuser, notifySend] = await Promise.all([findExecutable("runuser"), findExecutable("notify-send")]);
      return runuser && notifySend ? { runuser, notifySend } : undefined;
    })();
    const tools = await this.desktopTools;
    if (!tools) return { users: [], errors: [] };
    const sessions = await findDesktopSessions(this.options.roots.run, this.options.users);
    const users: string[] = [];
    const errors: string[] = [];
    await Promise.all(
      sessions.map(async (session) => {
        const command = desktopCommand(
          tools,
          session,
          text.title,
          text.lines.join("\n"),
          kind === "cancelled" ? "normal" : "critical",
        );
        const error = await runDesktopCommand(command);
        if (error) errors.push(`${session.user}: ${error}`);
        else users.push(session.user);
      }),
    );
    return { users, errors };
  }

  private enqueue(step: () => Promise<void>): Promise<void> {
    const run = this.chain
      .then(step)
      .catch((error: Error) => this.options.log(`notice: delivery failed: ${error.stack ?? error.message}`));
    this.chain = run;
    return run;
  }
}

function modeName(mode: PolicyMode): PendingNotice["mode"] {
  return mode === PolicyMode.ENFORCE ? "enforce" : mode === PolicyMode.OBSERVE ? "observe" : "unknown";
}
