// What people read when their VM is about to stop: short, human, actionable.
// When (in N minutes, at HH:MM local time), why, and the exact command that
// keeps the VM. Pure: the moment and the time zone are arguments. Text from the collector goes
// through `terminalText` (@ws/protocol): these lines are written to other people's terminals.
import { terminalText } from "@ws/protocol";

import { sentence } from "@ws/protocol";

export const KEEP_RUNNING_COMMAND = "ws-lease 2h";

export interface NoticeText {
  /** One line: for a desktop notification's title and the first line on a terminal. */
  title: string;
  /** The rest, one entry per line. */
  lines: string[];
}

export interface NoticeFacts {
  stopInSeconds: number;
  reason: string;
  keepRunningHint: string;
  idleSeconds: number;
  observeMode: boolean;
}

/** "14:32" in the given zone (the machine's own when undefined). */
export function formatLocalTime(wallMs: number, timeZone?: string): string {
  return new Intl.DateTimeFormat("en-GB", { hour: "2-digit", minute: "2-digit", hourCycle: "h23", timeZone }).format(
    new Date(wallMs),
  );
}

/** "in 10 minutes", "in 1 minute", "in 40 seconds", "in 1 hour 5 minutes", "now". */
export function formatStopIn(seconds: number): string {
  const total = Math.max(0, Math.round(seconds));
  if (total < 1) return "now";
  if (total < 60) return `in ${plural(total, "second")}`;
  const minutes = Math.round(total / 60);
  if (minutes < 60) return `in ${plural(minutes, "minute")}`;
  const hours = Math.floor(minutes / 60);
  const rest = minutes % 60;
  return rest === 0 ? `in ${plural(hours, "hour")}` : `in ${plural(hours, "hour")} ${plural(rest, "minute")}`;
}

/** "2h", "1h 5m", "12m", "40s": how long something has been idle. */
export function formatSpan(seconds: number): string {
  const total = Math.max(0, Math.round(seconds));
  if (total < 60) return `${total}s`;
  const minutes = Math.floor(total / 60);
  if (minutes < 60) return `${minutes}m`;
  const days = Math.floor(minutes / 1440);
  const hours = Math.floor((minutes % 1440) / 60);
  const rest = minutes % 60;
  const parts = [days ? `${days}d` : "", hours ? `${hours}h` : "", rest ? `${rest}m` : ""].filter(Boolean);
  return parts.join(" ");
}

function plural(count: number, unit: string): string {
  return `${count} ${unit}${count === 1 ? "" : "s"}`;
}

export function noticeText(facts: NoticeFacts, nowWallMs: number, timeZone?: string): NoticeText {
  const at = formatLocalTime(nowWallMs + Math.max(0, facts.stopInSeconds) * 1000, timeZone);
  const when = formatStopIn(facts.stopInSeconds);
  const why =
    terminalText(facts.reason) ||
    (facts.idleSeconds > 0 ? `no activity for ${formatSpan(facts.idleSeconds)}` : "no activity");
  const hint = terminalText(facts.keepRunningHint, 600); // room for a keep-running link (docs/notifications.md)
  const keep = hint.includes("ws-lease")
    ? hint
    : `run \`${KEEP_RUNNING_COMMAND}\` in a terminal here, or just use it (type in a terminal, run a notebook cell)`;
  if (facts.observeMode) {
    return {
      title: `ws: this VM would stop ${when} (at ${at}) — observe mode, nothing will be stopped`,
      lines: [sentence(`Why: ${why}`), sentence(`In enforce mode it would be stopped; to keep it running: ${keep}`)],
    };
  }
  const title = when === "now" ? `ws: this VM is stopping now (${at})` : `ws: this VM will stop ${when} (at ${at})`;
  const lines = [
    sentence(`Why: ${why}`),
    // The hint may end with the keep and start links: never followed by a ".", which a double click
    // would select with it (packages/protocol/src/links.ts).
    sentence(`To keep it running: ${keep}`),
    `Your files are kept: the disk persists; the VM can be started again.`,
  ];
  return { title, lines };
}

export function cancellationText(reason: string): NoticeText {
  const why = terminalText(reason);
  return {
    title: "ws: the pending stop of this VM is cancelled",
    lines: [why ? `${sentence(`Why: ${why}`)} Nothing to do.` : "Nothing to do."],
  };
}

/**
 * The bytes for a terminal, the way wall frames a broadcast: a bell, CR LF
 * line ends (a terminal in raw mode, such as an editor, does not turn LF
 * into CR LF), a blank line before and after. The bell and the line ends are the only
 * controls: every line goes through terminalText once more here, the one way to a tty.
 */
export function terminalBytes(text: NoticeText): string {
  const line = (words: string) => terminalText(words, 2000);
  const body = [`*** ${line(text.title)} ***`, ...text.lines.map((words) => `    ${line(words)}`)];
  return `\r\n\u0007${body.join("\r\n")}\r\n\r\n`;
}
