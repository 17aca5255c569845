// The `notifications:` section of the collector's config file, and the
// per-VM annotations that add a webhook. Pure: text and maps in, a config or
// every problem out. docs/notifications.md is the reference.
import { DurationError, isJsonObject, parseDuration } from "@ws/protocol";
import { TRANSITION_KINDS, type TransitionKind } from "./events.js";

export const WEBHOOK_FORMATS = ["json", "slack", "ntfy"] as const;
export type WebhookFormat = (typeof WEBHOOK_FORMATS)[number];

export interface WebhookTarget {
  url: string;
  format: WebhookFormat;
  /** What logs and metrics call it: never the URL, which is a secret for Slack and ntfy. */
  name: string;
}

export interface NotificationsConfig {
  /** Label (first) or annotation naming the VM's owner. */
  ownerKey: string;
  /** Base URL users reach the collector's HTTP side at, for keep-running links and VM pages; "" = no links. */
  publicUrl: string;
  timeoutMs: number;
  /** Retries after the first attempt. */
  retries: number;
  queueSize: number;
  /** Which transitions are sent. */
  send: TransitionKind[];
  /** Webhooks for every VM. */
  webhooks: WebhookTarget[];
  /** Webhooks for VMs of a profile, in addition to `webhooks`. */
  profiles: Record<string, WebhookTarget[]>;
  /** Keep-running link choices, in hours (each capped by the VM's max-keep-running). */
  keepChoicesHours: number[];
}

export const DEFAULT_OWNER_KEY = "platform.example.com/user";
export const DEFAULT_SEND: TransitionKind[] = [
  "notice",
  "reminder",
  "cancel",
  "stop",
  "refused-stop",
  "dispute",
  "schedule",
  "unplaced",
  "placed",
];
/** Per-VM annotations (after the policy prefix). */
export const NOTIFY_URL_ANNOTATION = "notify-url";
export const NOTIFY_FORMAT_ANNOTATION = "notify-format";

export const DEFAULT_NOTIFICATIONS: NotificationsConfig = Object.freeze({
  ownerKey: DEFAULT_OWNER_KEY,
  publicUrl: "",
  timeoutMs: 5000,
  retries: 3,
  queueSize: 500,
  send: DEFAULT_SEND,
  webhooks: [],
  profiles: {},
  keepChoicesHours: [1, 4, 8],
}) as NotificationsConfig;

const KEYS = [
  "ownerKey",
  "publicUrl",
  "timeout",
  "retries",
  "queueSize",
  "send",
  "webhooks",
  "profiles",
  "keepChoices",
];

/** The URL a log line may show: scheme and host, never the path or query (Slack and ntfy keep the secret there). */
export function redactUrl(url: string): string {
  try {
    const parsed = new URL(url);
    return `${parsed.protocol}//${parsed.host}/…`;
  } catch {
    return "(invalid URL)";
  }
}

export function parseWebhookUrl(raw: unknown, label: string, problems: string[]): string | undefined {
  if (typeof raw !== "string" || raw.trim() === "") {
    problems.push(`${label}: url must be an http(s) URL`);
    return undefined;
  }
  try {
    const url = new URL(raw.trim());
    if (url.protocol !== "https:" && url.protocol !== "http:") throw new Error("not http(s)");
    if (url.username || url.password) {
      problems.push(`${label}: url must not carry a user or password (${redactUrl(raw)})`);
      return undefined;
    }
    return url.toString();
  } catch {
    // The value itself may be a secret: name the setting, not its content.
    problems.push(`${label}: url is not a valid http(s) URL`);
    return undefined;
  }
}

export function parseFormat(raw: unknown, label: string, problems: string[]): WebhookFormat | undefined {
  const text = raw === undefined ? "json" : String(raw).trim().toLowerCase();
  if ((WEBHOOK_FORMATS as readonly string[]).includes(text)) return text as WebhookFormat;
  problems.push(`${label}: format must be one of ${WEBHOOK_FORMATS.join(", ")}, not "${text.slice(0, 40)}"`);
  return undefined;
}

function parseTargets(raw: unknown, label: string, problems: string[]): WebhookTarget[] {
  if (raw == null) return [];
  if (!Array.isArray(raw)) {
    problems.push(`${label}: expected a list of { url, format }`);
    return [];
  }
  const out: WebhookTarget[] = [];
  for (const [index, entry] of raw.entries()) {
    const where = `${label}[${index}]`;
    if (!isJsonObject(entry)) {
      problems.push(`${where}: expected { url, format }`);
      continue;
    }
    for (const key of Object.keys(entry))
      if (!["url", "format", "name"].includes(key))
        problems.push(`${where}: unknown setting "${key}" (known: url, format, name)`);
    const url = parseWebhookUrl(entry.url, where, problems);
    const format = parseFormat(entry.format, where, problems);
    if (url && format)
      out.push({
        url,
        format,
        name: typeof entry.name === "string" && entry.name ? entry.name.slice(0, 60) : `${format}@${new URL(url).host}`,
      });
  }

  return out;
}

/** Parses the section (already read from YAML); `problems` gets every error with its path. */
export function parseNotificationsConfig(
  raw: unknown,
  problems: string[],
  label = "notifications",
): NotificationsConfig {
  if (raw == null) return DEFAULT_NOTIFICATIONS;
  if (!isJsonObject(raw)) {
    problems.push(`${label}: must be a mapping`);
    return DEFAULT_NOTIFICATIONS;
  }
  for (const key of Object.keys(raw))
    if (!KEYS.includes(key)) problems.push(`${label}: unknown setting "${key}" (known: ${KEYS.join(", ")})`);
  const config: NotificationsConfig = { ...DEFAULT_NOTIFICATIONS, profiles: {} };
  if (raw.ownerKey != null) {
    if (typeof raw.ownerKey === "string" && /^[\w.\-/]{1,253}$/.test(raw.ownerKey)) config.ownerKey = raw.ownerKey;
    else problems.push(`${label}.ownerKey: must be a label or annotation name such as ${DEFAULT_OWNER_KEY}`);
  }
  if (raw.publicUrl != null) {
    const url = parseWebhookUrl(raw.publicUrl, `${label}.publicUrl`, problems);
    if (url) config.publicUrl = url.replace(/\/+$/, "");
  }
  if (raw.timeout != null) {
    try {
      const seconds = parseDuration(String(raw.timeout), { allowBareSeconds: true });
      if (seconds <= 0 || seconds > 120) problems.push(`${label}.timeout: between 1ms and 2m, not ${raw.timeout}`);
      else config.timeoutMs = seconds * 1000;
    } catch (error) {
      problems.push(`${label}.timeout: ${error instanceof DurationError ? error.message : String(error)}`);
    }
  }
  const integer = (key: "retries" | "queueSize", min: number, max: number) => {
    const value = raw[key];
    if (value == null) return;
    if (typeof value === "number" && Number.isInteger(value) && value >= min && value <= max) config[key] = value;
    else problems.push(`${label}.${key}: an integer from ${min} to ${max}, not ${JSON.stringify(value)}`);
  };
  integer("retries", 0, 10);
  integer("queueSize", 1, 100_000);
  if (raw.send != null) {
    if (Array.isArray(raw.send) && raw.send.every((k) => (TRANSITION_KINDS as readonly unknown[]).includes(k)))
      config.send = raw.send as TransitionKind[];
    else problems.push(`${label}.send: a list of ${TRANSITION_KINDS.join(", ")}`);
  }
  if (raw.keepChoices != null) {
    const hours: number[] = [];
    if (Array.isArray(raw.keepChoices)) {
      for (const choice of raw.keepChoices) {
        try {
          hours.push(parseDuration(String(choice)) / 3600);
        } catch {
          problems.push(`${label}.keepChoices: "${String(choice).slice(0, 20)}" is not a duration (1h, 4h, 8h)`);
        }
      }
    }
    if (hours.length === 0 || hours.length > 6)
      problems.push(`${label}.keepChoices: one to six durations, e.g. [1h, 4h, 8h]`);
    else config.keepChoicesHours = hours;
  }
  config.webhooks = parseTargets(raw.webhooks, `${label}.webhooks`, problems);
  if (raw.profiles != null) {
    if (!isJsonObject(raw.profiles)) problems.push(`${label}.profiles: must map a profile name to a list of webhooks`);
    else
      for (const [profile, targets] of Object.entries(raw.profiles))
        config.profiles[profile] = parseTargets(targets, `${label}.profiles.${profile}`, problems);
  }
  return config;
}

export interface VmNotifyInputs {
  profile: string;
  labels: Record<string, string>;
  annotations: Record<string, string>;
  /** The policy annotation prefix ("workstation.aik8s.run/"). */
  prefix: string;
}

/** The webhooks one VM's transitions go to: the global ones, its profile's, and its own annotation's. */
export function targetsFor(
  config: NotificationsConfig,
  vm: VmNotifyInputs,
): { targets: WebhookTarget[]; problems: string[] } {
  const problems: string[] = [];
  const targets = [...config.webhooks, ...(vm.profile ? (config.profiles[vm.profile] ?? []) : [])];
  const urlKey = `${vm.prefix}${NOTIFY_URL_ANNOTATION}`;
  const own = vm.annotations[urlKey];
  if (own !== undefined) {
    const url = parseWebhookUrl(own, urlKey, problems);
    const format = parseFormat(
      vm.annotations[`${vm.prefix}${NOTIFY_FORMAT_ANNOTATION}`],
      `${vm.prefix}${NOTIFY_FORMAT_ANNOTATION}`,
      problems,
    );
    if (url && format) targets.push({ url, format, name: `${format}@${new URL(url).host} (annotation)` });
  }
  return { targets, problems };
}

/** The VM's owner: the label named by ownerKey, else the annotation of that name, else "". */
export function ownerOf(
  config: Pick<NotificationsConfig, "ownerKey">,
  labels: Record<string, string>,
  annotations: Record<string, string>,
): string {
  return (labels[config.ownerKey] ?? annotations[config.ownerKey] ?? "").slice(0, 100);
}
