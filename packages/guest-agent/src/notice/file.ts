// /run/ws-agent/notice.json: the pending stop notice for other integrations
// (a desktop widget, a shell prompt, a Jupyter extension). Present while a
// stop is pending, removed when it is cancelled. Written atomically, so a
// reader never sees half a file.
import { mkdir, readFile, unlink } from "node:fs/promises";
import path from "node:path";
import { escapedJson, terminalText } from "@ws/protocol";
import { writeFileAtomic } from "../fs/atomic-write.js";
import { under, type Roots } from "../roots.js";
import type { NoticeText } from "./format.js";

export interface NoticeFileContent {
  id: string;
  /** Local wall time of the stop, ISO 8601. */
  stopAt: string;
  /** Seconds to the stop when the file was written. */
  stopInSeconds: number;
  writtenAt: string;
  reason: string;
  keepRunningHint: string;
  idleSeconds: number;
  mode: "enforce" | "observe" | "unknown";
  title: string;
  message: string;
}

export function defaultNoticeFile(roots: Roots): string {
  return under(roots.run, "ws-agent", "notice.json");
}

export function noticeFileContent(
  fields: Omit<NoticeFileContent, "stopAt" | "writtenAt" | "title" | "message">,
  text: NoticeText,
  nowWallMs: number,
): NoticeFileContent {
  // A shell prompt or a widget prints these: the collector's words as terminalText, as the tty notice has them.
  return {
    ...fields,
    id: terminalText(fields.id, 100),
    reason: terminalText(fields.reason),
    keepRunningHint: terminalText(fields.keepRunningHint, 600),
    stopAt: new Date(nowWallMs + fields.stopInSeconds * 1000).toISOString(),
    writtenAt: new Date(nowWallMs).toISOString(),
    title: text.title,
    message: text.lines.join("\n"),
  };
}

export async function writeNoticeFile(file: string, content: NoticeFileContent): Promise<void> {
  await mkdir(path.dirname(file), { recursive: true, mode: 0o755 });
  await writeFileAtomic(file, `${escapedJson(content, 2)}\n`, 0o644);
}

export async function removeNoticeFile(file: string): Promise<boolean> {
  try {
    await unlink(file);
    return true;
  } catch {
    return false;
  }
}

/** The id in an existing notice file (left by a previous agent run), if any. */
export async function readNoticeFileId(file: string): Promise<string | undefined> {
  try {
    const value: unknown = JSON.parse(await readFile(file, "utf8"));
    if (typeof value === "object" && value !== null && typeof (value as { id?: unknown }).id === "string")
      return (value as { id: string }).id;
  } catch {
    // absent or unreadable: no previous notice
  }
  return undefined;
}
