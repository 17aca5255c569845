// lease-audit.log: one append-only line per thing that happened to a lease
// (who, when, how long, why, what). logfmt, so grep, journald-style tools and
// people all read it.
import { constants } from "node:fs";
import { open } from "node:fs/promises";
import path from "node:path";
import { formatLeaseDuration } from "./format.js";
import type { AuditEvent } from "./leases.js";

export const AUDIT_FILE = "lease-audit.log";

function quote(value: string): string {
  return /^[\w./:@+-]+$/.test(value) ? value : JSON.stringify(value);
}

export function formatAuditLine(event: AuditEvent, wallMs: number): string {
  const { lease } = event;
  const fields: Array<[string, string]> = [
    ["time", new Date(wallMs).toISOString()],
    ["action", event.action],
    ["id", lease.id],
    ["uid", String(lease.uid)],
    ["user", lease.user],
    ["requested", formatLeaseDuration(lease.requestedSeconds)],
    ["holds", formatLeaseDuration(lease.holdSeconds)],
    ["taken", new Date(lease.takenAtMs).toISOString()],
    ["reason", lease.reason],
  ];
  if (lease.via !== undefined) fields.push(["via", lease.via]);
  if (event.byUid !== undefined) fields.push(["by_uid", String(event.byUid)]);
  if (event.byUser !== undefined) fields.push(["by_user", event.byUser]);
  if (event.detail !== undefined) fields.push(["detail", event.detail]);
  return `${fields.map(([key, value]) => `${key}=${quote(value)}`).join(" ")}\n`;
}

/**
 * Appends lines in order. record() is for what already happened (an expiry, a collector's
 * answer): a failing disk is logged, never thrown into the agent. append() is for what may
 * only happen once it is on disk (a lease granted): it fsyncs and rejects on failure.
 */
export class AuditLog {
  private queue: Promise<void> = Promise.resolve();

  constructor(
    private readonly file: string,
    private readonly log: (line: string) => void,
  ) {}

  static in(stateDir: string, log: (line: string) => void): AuditLog {
    return new AuditLog(path.join(stateDir, AUDIT_FILE), log);
  }

  record(events: AuditEvent[], wallMs: number): void {
    void this.append(events, wallMs).catch((error: Error) =>
      this.log(`leases: cannot append to ${this.file}: ${error.message}`),
    );
  }

  /** Resolves once the lines are written and fsynced; rejects (with the errno code) if they could not be. */
  append(events: AuditEvent[], wallMs: number): Promise<void> {
    if (events.length === 0) return this.queue;
    const text = events.map((event) => formatAuditLine(event, wallMs)).join("");
    const run = this.queue.then(() => appendDurably(this.file, text));
    this.queue = run.catch(() => undefined);
    return run;
  }

  flush(): Promise<void> {
    return this.queue;
  }
}

async function appendDurably(file: string, text: string): Promise<void> {
  const handle = await open(
    file,
    constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT | constants.O_NOFOLLOW,
    0o600,
  );
  try {
    const before = (await handle.stat()).size;
    try {
      await handle.writeFile(text, "utf8");
      await handle.sync();
    } catch (error) {
      // A full disk may take half a line: cut it off so the log stays one event per line.
      await handle.truncate(before).catch(() => undefined);
      throw error;
    }
  } finally {
    await handle.close();
  }
}
