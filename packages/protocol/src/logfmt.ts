// logfmt lines, shared by agent and collector: journald keeps them, people and Loki read them.

export type LogLevel = "info" | "warn" | "error";
export type Logger = (level: LogLevel, message: string, fields?: Record<string, unknown>) => void;

function quote(value: unknown): string {
  const text = typeof value === "string" ? value : JSON.stringify(value);
  return /^[\w./:@-]+$/.test(text) ? text : JSON.stringify(text);
}

export function logfmtLogger(write: (line: string) => void, nowMs: () => number): Logger {
  return (level, message, fields = {}) => {
    const parts = [`time=${new Date(nowMs()).toISOString()}`, `level=${level}`, `msg=${quote(message)}`];
    for (const [key, value] of Object.entries(fields)) {
      if (value !== undefined) parts.push(`${key}=${quote(value)}`);
    }
    write(`${parts.join(" ")}\n`);
  };
}
