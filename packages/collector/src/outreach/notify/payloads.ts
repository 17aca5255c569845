// The bodies each webhook format receives. Pure: a transition and its links
// in, { url, body } out. docs/notifications.md shows each one.
import { formatDuration, sentence } from "@ws/protocol";
import type { WebhookFormat, WebhookTarget } from "./config.js";
import type { TransitionKind, VmTransition } from "./events.js";
import type { StopEnds } from "../../loop/stop-ends.js";

/** Everything a message says about one transition. */
export interface NotificationContent {
  transition: VmTransition;
  owner: string;
  /** The signed keep-running link (notice and reminder, when a public URL is configured). */
  keepUrl?: string;
  /** The VM's page on the collector. */
  vmUrl?: string;
  /** The signed start link (every message, when a public URL is configured): how to come back. */
  startUrl?: string;
  /** What the stop will end (notice, reminder): sessions, kernels, processes by name. */
  ends?: StopEnds;
}

export const PAYLOAD_VERSION = 1;

/** The generic JSON body (format "json"). Field names are the contract; docs/notifications.md lists them. */
export interface JsonPayload {
  version: number;
  event: TransitionKind;
  vm: { namespace: string; name: string };
  owner: string;
  mode: string;
  at: string;
  reason: string;
  explanation: string;
  noticeId: string | null;
  deadline: string | null;
  stopInSeconds: number | null;
  idleSeconds: number | null;
  keepRunningHint: string | null;
  keepUrl: string | null;
  vmUrl: string | null;
  /** The start link: a page that shows the VM and starts it on a button press (docs/coming-back.md). */
  startUrl: string | null;
  /** What the stop will end (notice and reminder): per user logins, tmux/screen panes, process names and counts; Jupyter kernels and terminals. */
  stopEnds: (Omit<StopEnds, "text"> & { text: string }) | null;
  text: string;
}

const TITLES: Record<TransitionKind, string> = {
  notice: "will be stopped",
  reminder: "will be stopped (reminder)",
  cancel: "stop cancelled",
  stop: "was stopped",
  "refused-stop": "stop refused",
  "would-stop": "would be stopped (observe mode)",
  dispute: "was stopped by mistake, says its user",
  schedule: "scheduled start",
  unplaced: "cannot be placed yet",
  placed: "was placed at last",
};

export function titleOf(content: NotificationContent): string {
  const { vm, kind } = content.transition;
  return `Workstation ${vm.namespace}/${vm.name} ${TITLES[kind]}`;
}

/** One or two sentences a person reads in a chat message or a phone notification. */
export function textOf(content: NotificationContent): string {
  const t = content.transition;
  const who = content.owner ? `${content.owner}: ` : "";
  const stopIn =
    t.deadlineMs !== undefined
      ? ` in ${formatDuration(Math.max(0, (t.deadlineMs - t.atMs) / 1000))} (${new Date(t.deadlineMs).toISOString()})`
      : "";
  switch (t.kind) {
    case "notice":
    case "reminder":
      return `${who}${sentence(`${t.vm.namespace}/${t.vm.name} will be stopped${stopIn}: ${t.reason}`)}${content.ends ? ` ${sentence(`The stop ends ${content.ends.text}`)}` : ""}${content.keepUrl ? " Keep it running with the link." : t.hint ? ` ${t.hint}` : ""}${content.startUrl ? ` To come back later: ${content.startUrl}` : ""}`;
    case "cancel":
      return `${who}${sentence(`the pending stop of ${t.vm.namespace}/${t.vm.name} is cancelled: ${t.reason}`)}`;
    case "stop":
      return `${who}${sentence(`${t.vm.namespace}/${t.vm.name} was stopped: ${t.reason}`)} Its disk is kept; ${content.startUrl ? `start it again with the start link: ${content.startUrl}` : "start it again when you need it."}`;
    case "refused-stop":
      return `${who}${sentence(`${t.vm.namespace}/${t.vm.name} was not stopped: ${t.reason}`)}`;
    case "would-stop":
      return `${who}${sentence(`${t.vm.namespace}/${t.vm.name} would be stopped now (observe mode, nothing is stopped): ${t.reason}`)}`;
    case "dispute":
      return `${who}${sentence(`says the stop of ${t.vm.namespace}/${t.vm.name} was a mistake: ${t.reason}`)}${t.hint ? ` ${t.hint}` : ""}`;
    case "schedule":
      return `${who}${sentence(t.reason)}`;
    case "unplaced":
      return `${who}${sentence(`the start of ${t.vm.namespace}/${t.vm.name} cannot be placed yet: ${t.reason}`)} KubeVirt keeps trying; you will be told when it is placed.`;
    case "placed":
      return `${who}${sentence(`${t.vm.namespace}/${t.vm.name} was placed at last: ${t.reason}`)}`;
  }
}

export function jsonPayload(content: NotificationContent): JsonPayload {
  const t = content.transition;
  return {
    version: PAYLOAD_VERSION,
    event: t.kind,
    vm: { namespace: t.vm.namespace, name: t.vm.name },
    owner: content.owner,
    mode: t.mode,
    at: new Date(t.atMs).toISOString(),
    reason: t.reason,
    explanation: t.explanation,
    noticeId: t.noticeId ?? null,
    deadline: t.deadlineMs !== undefined ? new Date(t.deadlineMs).toISOString() : null,
    stopInSeconds: t.deadlineMs !== undefined ? Math.max(0, Math.round((t.deadlineMs - t.atMs) / 1000)) : null,
    idleSeconds: t.idleSeconds !== undefined ? Math.round(t.idleSeconds) : null,
    keepRunningHint: t.hint ?? null,
    keepUrl: content.keepUrl ?? null,
    vmUrl: content.vmUrl ?? null,
    startUrl: content.startUrl ?? null,
    stopEnds: content.ends ?? null,
    text: textOf(content),
  };
}

/** Slack incoming webhook: `text` as the fallback, Block Kit with link buttons. */
export function slackPayload(content: NotificationContent): { text: string; blocks: unknown[] } {
  // Both fields carry the same escaped text: Slack shows `text` in notifications and where
  // blocks do not render, and parses mentions and links in it just as in a mrkdwn block.
  const slackText = ESCAPE_TEXT.slack;
  const text = `*${slackText(titleOf(content))}*\n${slackText(textOf(content))}`;
  const buttons: unknown[] = [];
  if (content.keepUrl)
    buttons.push({
      type: "button",
      text: { type: "plain_text", text: "Keep running…" },
      url: content.keepUrl,
      style: "primary",
      action_id: "ws-keep",
    });
  if (content.startUrl && content.transition.kind === "stop")
    buttons.push({
      type: "button",
      text: { type: "plain_text", text: "Start again…" },
      url: content.startUrl,
      style: "primary",
      action_id: "ws-start",
    });
  if (content.vmUrl)
    buttons.push({
      type: "button",
      text: { type: "plain_text", text: "Why?" },
      url: content.vmUrl,
      action_id: "ws-why",
    });
  return {
    text,
    blocks: [
      { type: "section", text: { type: "mrkdwn", text } },
      ...(buttons.length ? [{ type: "actions", elements: buttons }] : []),
    ],
  };
}

/**
 * One escaping rule per webhook format, applied to every field that carries text from a user or a
 * VM (a reason, a dispute's words, a name): Slack parses <, > and & as markup in `text` and in
 * mrkdwn blocks alike (`<!channel>` is a mention, `<http://x|click>` a link), so all three are
 * entities there (https://api.slack.com/reference/surfaces/formatting#escaping); generic JSON is
 * data and ntfy's title and message are plain text (no `markdown: true`), so both carry text as written.
 */
export const ESCAPE_TEXT: Record<WebhookFormat, (text: string) => string> = {
  json: (text) => text,
  slack: (text) => text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;"),
  ntfy: (text) => text,
};

/** An ntfy topic URL split into the server's root (where JSON is published) and the topic. */
export function ntfyTopic(url: string): { root: string; topic: string } {
  const parsed = new URL(url);
  const segments = parsed.pathname.split("/").filter(Boolean);
  const topic = segments.pop() ?? "";
  parsed.pathname = segments.length ? `/${segments.join("/")}/` : "/";
  return { root: parsed.toString(), topic };
}

/**
 * ntfy (https://docs.ntfy.sh/publish/#publish-as-json): the configured URL is
 * the topic's URL (https://ntfy.example.com/ws-alice); JSON is published to the
 * server's root with the topic in the body, and the link becomes a view action.
 */
export function ntfyRequest(url: string, content: NotificationContent): { url: string; body: Record<string, unknown> } {
  const { root, topic } = ntfyTopic(url);
  const kind = content.transition.kind;
  const actions: unknown[] = [];
  if (content.keepUrl) actions.push({ action: "view", label: "Keep running", url: content.keepUrl, clear: true });
  if (content.startUrl && kind === "stop")
    actions.push({ action: "view", label: "Start again", url: content.startUrl });
  if (content.vmUrl) actions.push({ action: "view", label: "Why?", url: content.vmUrl });
  return {
    url: root,
    body: {
      topic,
      title: titleOf(content),
      message: textOf(content),
      priority: kind === "notice" || kind === "refused-stop" ? 4 : 3,
      tags: [kind === "stop" ? "stop_sign" : kind === "cancel" ? "white_check_mark" : "hourglass"],
      ...(content.vmUrl ? { click: content.vmUrl } : {}),
      ...(actions.length ? { actions } : {}),
    },
  };
}

/** The request one target gets for one transition. */
export function requestFor(target: WebhookTarget, content: NotificationContent): { url: string; body: string } {
  switch (target.format) {
    case "json":
      return { url: target.url, body: JSON.stringify(jsonPayload(content)) };
    case "slack":
      return { url: target.url, body: JSON.stringify(slackPayload(content)) };
    case "ntfy": {
      const request = ntfyRequest(target.url, content);
      return { url: request.url, body: JSON.stringify(request.body) };
    }
  }
}
