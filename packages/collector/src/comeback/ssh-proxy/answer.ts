// What the ssh helper makes of the collector's answer to its start link (docs/coming-back.md,
// "`ssh` that wakes the VM"). The helper may reach anything at the link's address: ws, but also a
// site login in front of /start/ (an HTML page, a 302 to an auth proxy, a 401), a gateway's own
// error page (JSON or not), or nothing at all. Every answer becomes one of a few kinds, each with a
// sentence for the person and a defined next step, so no answer can crash the helper or pass for
// "ws does not answer". Pure: the answer's status, headers and (the first bytes of its) body in.
import { isJsonObject, terminalText } from "@ws/protocol";
import type { StartJson } from "../start/handler.js";
import type { StartStatus } from "../start/progress.js";

/** What the helper read of one HTTP answer. */
export interface RawAnswer {
  status: number;
  contentType: string;
  /** The Location header of a redirect, as sent. */
  location: string | null;
  /** The body's first bytes (the helper reads at most MAX_ANSWER_BYTES). */
  body: Uint8Array;
}

/** ws's JSON answer is a few hundred bytes; more than this is not ws's, and is not read further. */
export const MAX_ANSWER_BYTES = 256 * 1024;

export type CollectorAnswer =
  /** ws answered with the VM's progress. */
  | { kind: "progress"; state: StartJson }
  /** ws refused the link itself (not valid, expired, another VM, an unknown VM). */
  | { kind: "refused"; message: string }
  /** A login stands in front of /start/ (an HTML page, a redirect, 401/403/407). */
  | { kind: "login"; message: string }
  /** Something answered that is not ws's JSON (a gateway's error page, a proxy, a text page). */
  | { kind: "foreign"; message: string }
  /** Nothing answered (connection refused, timeout, TLS error). */
  | { kind: "silent"; message: string };

/** The statuses ws's JSON refusals use: the link's verdicts (400, 410), an unknown VM (404), a method (405). */
const REFUSAL_STATUSES = new Set([400, 404, 405, 410]);
const STATUSES: readonly StartStatus[] = ["stopped", "starting", "unschedulable", "ready", "failed"];
const STAGE_STATES = new Set(["done", "current", "waiting", "blocked"]);
const LOGIN_HINT = "/start/ must be reachable without the site login (it carries its own proof), see docs/install.md";

export function classifyAnswer(raw: RawAnswer, where: string): CollectorAnswer {
  const type = raw.contentType.toLowerCase();
  const text = new TextDecoder().decode(raw.body);
  const what = `HTTP ${raw.status}${type ? ` (${terminalText(type.split(";")[0] ?? "", 60)})` : ""}`;
  if (raw.status >= 300 && raw.status < 400)
    return {
      kind: "login",
      message: `the start URL ${where} answered with a redirect${raw.location ? ` to ${redirectTarget(raw.location)}` : ""} (${what}), a login in front of it: ${LOGIN_HINT}`,
    };
  if (raw.status === 401 || raw.status === 403 || raw.status === 407)
    return { kind: "login", message: `the start URL ${where} asks for a login (${what}): ${LOGIN_HINT}` };
  const json = /[/+]json\b/.test(type) ? parseJson(text) : undefined;
  if (raw.status >= 200 && raw.status < 300 && isStartJson(json)) return { kind: "progress", state: json };
  if (REFUSAL_STATUSES.has(raw.status) && isJsonObject(json) && typeof json["error"] === "string")
    return { kind: "refused", message: terminalText(json["error"], 200) };
  if (type.includes("html") || /^\s*</.test(text))
    return {
      kind: "login",
      message: `the start URL ${where} answered with an HTML page (${what}), not ws's answer: a login page? ${LOGIN_HINT}`,
    };
  const said =
    type.startsWith("text/plain") && text.trim() ? `: "${terminalText(text.trim().split("\n")[0] ?? "", 120)}"` : "";
  return {
    kind: "foreign",
    message: `the start URL ${where} answered ${what}${said}, which is not ws's answer (a gateway or proxy in front of the collector?)`,
  };
}

/** ws's StartJson, checked field by field: what the helper prints and decides on is there and typed. */
export function isStartJson(value: unknown): value is StartJson {
  if (!isJsonObject(value) || !isJsonObject(value["vm"])) return false;
  const { vm, status, stages, unschedulable, failure, entryUrl } = value;
  if (typeof vm["namespace"] !== "string" || typeof vm["name"] !== "string") return false;
  if (!STATUSES.includes(status as StartStatus) || !Array.isArray(stages)) return false;
  const stageOk = (stage: unknown) =>
    isJsonObject(stage) &&
    typeof stage["name"] === "string" &&
    typeof stage["label"] === "string" &&
    STAGE_STATES.has(stage["state"] as string) &&
    (stage["atMs"] === undefined || Number.isFinite(stage["atMs"])) &&
    (stage["detail"] === undefined || typeof stage["detail"] === "string");
  if (!stages.every(stageOk)) return false;
  if (unschedulable !== undefined && !(isJsonObject(unschedulable) && typeof unschedulable["message"] === "string"))
    return false;
  return (
    (failure === undefined || typeof failure === "string") && (entryUrl === undefined || typeof entryUrl === "string")
  );
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** Where a redirect goes, without its query (an auth proxy's state, a token). */
function redirectTarget(location: string): string {
  try {
    const url = new URL(location, "http://relative.invalid");
    return terminalText(url.host === "relative.invalid" ? url.pathname : `${url.origin}${url.pathname}`, 200);
  } catch {
    return "an address that is not a URL";
  }
}
