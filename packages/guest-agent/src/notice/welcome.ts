// The welcome back (docs/coming-back.md): the first Directive after ws stopped the VM and it was
// started again carries why it was stopped. The agent shows it at the first human evidence of
// the new boot — the first login terminal of a human account (an SSH or console login, a
// terminal in a desktop or tmux) — written to that terminal the way the stop notice is, once
// per stop: the ids shown are kept in the agent's state directory (root's, not a user's), so a
// reconnect, an agent restart or a reboot never repeats it. Also <run>/ws-agent/welcome.json for
// other integrations (a desktop widget, a Jupyter extension). Never throws into the agent.
import { mkdir, readFile } from "node:fs/promises";
import path from "node:path";
import { type WelcomeBack, errorMessage, formatDuration, sentence, escapedJson, terminalText } from "@ws/protocol";
import { writeFileAtomic } from "../fs/atomic-write.js";
import { under } from "../roots.js";
import type { NoticeDeliveryOptions } from "./delivery.js";
import { formatLocalTime, terminalBytes, type NoticeText } from "./format.js";
import { systemScheduler, type Scheduler, type TimerHandle } from "./schedule.js";
import { listLoggedInTerminals, writeToTerminal, type ListTerminals } from "./terminals.js";

/** How often the agent looks for the first login while a welcome waits. */
const POLL_MS = 2_000;
/** Ids remembered as shown (one per stop): the newest few are all a repeat can carry. */
const MAX_SHOWN = 32;

export interface WelcomeFacts {
  stoppedAtMs: number;
  reason: string;
  idleSeconds?: number;
  lastActivity: string;
  lastActivityAtMs?: number;
  keepHint: string;
  disputeUrl: string;
  /** How long this start waited to be placed (a GPU or node went to someone else), and the scheduler's words. */
  placementWaitSeconds?: number;
  placementMessage?: string;
}

/**
 * "2026-12-01 14:32" in the given zone (the machine's own when undefined). Built from the parts,
 * not a locale's pattern: Node's ICU builds differ in what "en-CA" looks like (Debian's Node 18
 * writes 12/01/2026).
 */
export function formatLocalDateTime(wallMs: number, timeZone?: string): string {
  const parts = new Intl.DateTimeFormat("en-US", {
    year: "numeric",
    month: "2-digit",
    day: "2-digit",
    timeZone,
  }).formatToParts(new Date(wallMs));
  const part = (type: Intl.DateTimeFormatPartTypes) => parts.find((p) => p.type === type)?.value ?? "??";
  return `${part("year")}-${part("month")}-${part("day")} ${formatLocalTime(wallMs, timeZone)}`;
}

/** What the user reads at the first login after the start. Pure. */
export function welcomeText(facts: WelcomeFacts, timeZone?: string): NoticeText {
  const why = terminalText(facts.reason) || "it was idle";
  const lines = [sentence(`Why: ${why}`)];
  const idle = facts.idleSeconds !== undefined && Number.isFinite(facts.idleSeconds) ? facts.idleSeconds : undefined;
  const activity = terminalText(facts.lastActivity, 200);
  if (idle !== undefined || activity)
    lines.push(
      sentence(
        [
          idle !== undefined ? `It had been idle ${formatDuration(idle)}` : "",
          activity
            ? `the last activity ws saw: ${activity}${
                facts.lastActivityAtMs !== undefined && Number.isFinite(facts.lastActivityAtMs)
                  ? ` (at ${formatLocalTime(facts.lastActivityAtMs, timeZone)})`
                  : ""
              }`
            : "",
        ]
          .filter(Boolean)
          .join("; "),
      ),
    );
  const placement = placementLine(facts);
  if (placement) lines.push(placement);
  const keep = terminalText(facts.keepHint, 200) || "ws-lease 8h";
  lines.push(`To keep it running next time: run \`${keep}\` in a terminal here before you leave it running.`);
  const dispute = terminalText(facts.disputeUrl, 600);
  if (/^https?:\/\//.test(dispute))
    lines.push(`Was this stop a mistake (you were working)? Say so in one click: ${dispute}`);
  return {
    title: `ws: welcome back — this VM was stopped by ws on ${formatLocalDateTime(facts.stoppedAtMs, timeZone)}`,
    lines,
  };
}

/** "This start waited 12m for the cluster to place it: …": the wait was the cluster's, not the VM's boot. */
function placementLine(facts: WelcomeFacts): string | undefined {
  const waited = facts.placementWaitSeconds;
  if (waited === undefined || !Number.isFinite(waited) || waited < 1) return undefined;
  const why = terminalText(facts.placementMessage ?? "", 300);
  return sentence(
    `This start waited ${formatDuration(waited)} for the cluster to place it${why ? ` (the scheduler said: ${why})` : ""}; ws holds no GPU for a stopped VM, so a start can wait for one to be free`,
  );
}

export function welcomeFacts(welcome: WelcomeBack): WelcomeFacts {
  return {
    stoppedAtMs: welcome.stoppedAtUnixSeconds * 1000,
    reason: welcome.reason,
    ...(welcome.idleSeconds !== undefined ? { idleSeconds: welcome.idleSeconds } : {}),
    lastActivity: welcome.lastActivity,
    ...(welcome.lastActivityAtUnixSeconds !== undefined
      ? { lastActivityAtMs: welcome.lastActivityAtUnixSeconds * 1000 }
      : {}),
    keepHint: welcome.keepHint,
    disputeUrl: welcome.disputeUrl,
    ...(welcome.placementWaitSeconds !== undefined
      ? { placementWaitSeconds: welcome.placementWaitSeconds, placementMessage: welcome.placementMessage }
      : {}),
  };
}

/** The shown ids as stored: a JSON list of short strings; anything else is none. Pure. */
export function parseShown(text: string): string[] {
  try {
    const value: unknown = JSON.parse(text);
    const list = (value as { shown?: unknown })?.shown;
    return Array.isArray(list) ? list.filter((id): id is string => typeof id === "string" && id.length <= 100) : [];
  } catch {
    return [];
  }
}

/** The notice delivery's own options (the same roots, users, clock, log, scheduler, terminals and zone), and how often to look for a login. */
export type WelcomeDeliveryOptions = Pick<
  NoticeDeliveryOptions,
  "roots" | "users" | "clock" | "log" | "scheduler" | "listTerminals" | "timeZone"
> & { pollMs?: number };

export class WelcomeDelivery {
  private pending: { id: string; text: NoticeText } | undefined;
  private timer: TimerHandle | undefined;
  private shown: Promise<string[]> | undefined;
  private checking = false;
  private closed = false;
  private readonly scheduler: Scheduler;
  private readonly listTerminals: ListTerminals;
  readonly stateFile: string;
  readonly welcomeFile: string;
  /** Each delivery, for whoever wants to know (tests). */
  onShown: ((id: string, ttys: string[]) => void) | undefined;

  constructor(private readonly options: WelcomeDeliveryOptions) {
    this.scheduler = options.scheduler ?? systemScheduler;
    this.listTerminals = options.listTerminals ?? (() => listLoggedInTerminals(options.roots, options.users));
    this.stateFile = path.join(options.roots.state, "welcome-shown.json");
    this.welcomeFile = under(options.roots.run, "ws-agent", "welcome.json");
  }

  /** A welcome arrived: shown at the first login, unless this stop's welcome was shown already. */
  async offer(welcome: WelcomeBack): Promise<void> {
    const id = terminalText(welcome.id, 100);
    if (!id || this.closed || this.pending?.id === id) return;
    if ((await this.loadShown()).includes(id)) {
      this.options.log(`welcome ${id}: already shown (once per stop)`);
      return;
    }
    const facts = welcomeFacts(welcome);
    this.pending = { id, text: welcomeText(facts, this.options.timeZone) };
    try {
      await mkdir(path.dirname(this.welcomeFile), { recursive: true, mode: 0o755 });
      await writeFileAtomic(
        this.welcomeFile,
        `${escapedJson({ id, ...facts, title: this.pending.text.title, message: this.pending.text.lines.join("\n") }, 2)}\n`,
        0o644,
      );
    } catch (error) {
      this.options.log(`welcome: cannot write ${this.welcomeFile}: ${errorMessage(error)}`);
    }
    this.options.log(`welcome ${id}: waiting for the first login of this boot`);
    this.schedule(0);
  }

  close(): void {
    this.closed = true;
    this.timer?.cancel();
  }

  private schedule(delayMs: number): void {
    this.timer?.cancel();
    if (this.closed || !this.pending) return;
    this.timer = this.scheduler.after(delayMs, () => void this.check());
  }

  private async check(): Promise<void> {
    const pending = this.pending;
    if (!pending || this.checking) return;
    this.checking = true;
    try {
      let terminals = [] as Awaited<ReturnType<ListTerminals>>;
      try {
        terminals = (await this.listTerminals()).filter((target) => this.options.users.isHuman(target.uid));
      } catch (error) {
        this.options.log(`welcome: cannot list terminals: ${errorMessage(error)}`);
      }
      if (terminals.length === 0) return;
      const bytes = terminalBytes(pending.text);
      const outcomes = await Promise.all(
        terminals.map((target) => writeToTerminal(this.options.roots.dev, target.tty, bytes)),
      );
      const reached = outcomes.filter((outcome) => outcome.ok).map((outcome) => outcome.tty);
      if (reached.length === 0) return;
      this.pending = undefined;
      await this.markShown(pending.id);
      this.options.log(`welcome ${pending.id}: shown on ${reached.join(", ")}`);
      this.onShown?.(pending.id, reached);
    } finally {
      this.checking = false;
      if (this.pending) this.schedule(this.options.pollMs ?? POLL_MS);
    }
  }

  private loadShown(): Promise<string[]> {
    this.shown ??= readFile(this.stateFile, "utf8").then(parseShown, () => []);
    return this.shown;
  }

  private async markShown(id: string): Promise<void> {
    const shown = [...(await this.loadShown()).filter((known) => known !== id), id].slice(-MAX_SHOWN);
    this.shown = Promise.resolve(shown);
    try {
      await writeFileAtomic(this.stateFile, `${JSON.stringify({ shown })}\n`, 0o644);
    } catch (error) {
      this.options.log(`welcome: cannot record ${id} as shown in ${this.stateFile}: ${errorMessage(error)}`);
    }
  }
}
