// lease-audit.log: one append-only line per thing that happened to a lease
// (who, when, how long, why, what). logfmt, so grep, journald-style tools and
// people all read it.
import { appendFile } from "node:fs/promises";
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
  return fields.map(([key, value]) => `${key}=${quote(value)}`).join(" ") + "\n";
}

/** Appends lines in order; a failing disk is logged, never thrown into the agent. */
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
    if (events.length === 0) return;
    const text = events.map((event) => formatAuditLine(event, wallMs)).join("");
    this.queue = this.queue
      .then(() => appendFile(this.file, text, { mode: 0o600, flag: "a" }))
      .catch((error: Error) => this.log(`leases: cannot append to ${this.file}: ${error.message}`));
  }

  flush(): Promise<void> {
    return this.queue;
  }
}
