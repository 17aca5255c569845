// logfmt lines, shared by agent and collector: journald keeps them, people and Loki read them.
// Every line is safe whatever a call site passes: the message, every key and every value go
// through `escapedText` (a VM user's process name with an ESC, a C1 control, a bidi override or
// a newline is written as `\u001b`…, never as itself; a huge value is cut), so no call site has
// to remember it.
import { escapedText } from "./safe-text.js";

export type LogLevel = "info" | "warn" | "error";
export type Logger = (level: LogLevel, message: string, fields?: Record<string, unknown>) => void;

/** A bare word stays bare (ASCII only: `\w` without the u flag); anything else is a quoted, escaped string. */
function quote(value: unknown): string {
  const text = typeof value === "string" ? value : (JSON.stringify(value) ?? String(value));
  return /^[\w./:@-]+$/.test(text) ? text : escapedText(text, { quoted: true });
}

export function logfmtLogger(write: (line: string) => void, nowMs: () => number): Logger {
  return (level, message, fields = {}) => {
    const parts = [`time=${new Date(nowMs()).toISOString()}`, `level=${level}`, `msg=${quote(message)}`];
    for (const [key, value] of Object.entries(fields)) {
      if (value !== undefined) parts.push(`${/^[\w.-]+$/.test(key) ? key : quote(key)}=${quote(value)}`);
    }
    write(`${parts.join(" ")}\n`);
  };
}
