// Text someone else wrote (a VM user's process name, kernel name, lease reason, dispute; a
// Kubernetes label; a Prometheus answer), made safe for where it is shown. Two ways, one each:
//
// - `terminalText`: for a person's terminal (whatif, replay, `ws-agent probe`, ws-lease, the ssh
//   helper's lines, the notices the agent writes to ttys). Every character a terminal acts on
//   or that changes how the rest of the line reads becomes a space: C0 and C1 controls (so no
//   ESC, no CSI/OSC/DCS — an OSC 52 clipboard write, a window title, a clear screen — and no
//   8-bit CSI), bidi overrides and isolates, zero-width and other format characters, line and
//   paragraph separators, lone surrogates (invalid UTF-8 was already U+FFFD when decoded). One
//   line, runs of white space as one space, a length cap marked with "…".
// - `escapedText`: for log lines and JSON a person may read in a terminal. The same characters
//   are written as visible `\uXXXX` escapes (`\x1b` → `\u001b`), so what an attacker sent stays
//   readable and greppable but does nothing; inside a JSON string the escape is the same
//   character, so JSON stays the same data. The shared logger applies it to every line.
//
// Markup is the third kind of reader: `escapeHtml` for the collector's pages and the body of a
// desktop notification (which notification servers read as markup: <a href>, <img>).

/**
 * What must not reach a terminal or a log line as itself: controls (Cc: C0, DEL, C1), format
 * characters (Cf: bidi embeddings, overrides and isolates U+202A–202E and U+2066–2069, the
 * marks U+200E/U+200F/U+061C, zero-width U+200B–U+200D, U+2060, BOM, soft hyphen, tags), line
 * and paragraph separators (Zl, Zp: U+2028, U+2029) and lone surrogates (Cs).
 */
const UNSAFE = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Cs}]/gu;

/** A terminal line's default cap. */
export const TERMINAL_TEXT_MAX_CHARS = 300;

/** Text for a person's terminal: one line, nothing a terminal acts on, at most `maxLength` characters. */
export function terminalText(text: string | null | undefined, maxLength = TERMINAL_TEXT_MAX_CHARS): string {
  const clean = String(text ?? "")
    .replace(UNSAFE, " ")
    .replace(/\s+/g, " ")
    .trim();
  return cap(clean, maxLength);
}

/** A log value's default cap: a line stays one readable line, a hostile 1 MB string costs 4 kB. */
export const LOG_TEXT_MAX_CHARS = 4096;

export interface EscapeOptions {
  /** Cut the text to this many characters first (default LOG_TEXT_MAX_CHARS), saying how many were left off. */
  maxLength?: number;
  /** Return it as a JSON string literal (quotes, backslashes and C0 escaped by JSON.stringify first). */
  quoted?: boolean;
  /** Leave "\n" as it is: a multi-line message (an error with its stack), an indented JSON document. */
  keepLineEnds?: boolean;
}

/**
 * Text for a log line or a JSON document: every unsafe character written as a visible escape
 * (`\u001b`, `\u202e`, a tag character as `\udb40\udc41`). Given a JSON document (maxLength
 * Infinity), it stays valid JSON and the same data: unsafe characters only occur inside strings.
 */
export function escapedText(text: string, options: EscapeOptions = {}): string {
  const maxLength = options.maxLength ?? LOG_TEXT_MAX_CHARS;
  const cut = text.length > maxLength ? `${text.slice(0, maxLength)}…(${text.length - maxLength} more chars)` : text;
  return escapeUnits(options.quoted ? JSON.stringify(cut) : cut, options.keepLineEnds ? UNSAFE_BUT_LINE_ENDS : UNSAFE);
}

const UNSAFE_BUT_LINE_ENDS = /(?!\n)[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Cs}]/gu;

/**
 * A JSON document for a terminal or a file people print: `JSON.stringify`, then every unsafe
 * character inside its strings as a `\uXXXX` escape, uncut (an indented document's line ends
 * are between values; inside a string they are already `\n`). Still valid JSON, the same data.
 */
export function escapedJson(value: unknown, indent?: number): string {
  return escapedText(JSON.stringify(value, null, indent), { maxLength: Number.POSITIVE_INFINITY, keepLineEnds: true });
}

/** Each UTF-16 unit of each match as \uXXXX (a tag character is a pair): what JSON and JavaScript both read back. */
function escapeUnits(text: string, unsafe: RegExp): string {
  return text.replace(unsafe, (char) =>
    Array.from({ length: char.length }, (_, i) => `\\u${char.charCodeAt(i).toString(16).padStart(4, "0")}`).join(""),
  );
}

/** Text inside HTML (or a notification body's markup): `& < > " '` as entities. */
export const escapeHtml = (text: string) =>
  text.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c] ?? c);

function cap(text: string, maxLength: number): string {
  if (text.length <= maxLength) return text;
  // Never cut a surrogate pair in two: that would make a lone surrogate of the last character.
  let end = maxLength - 1;
  if (end > 0 && /[\ud800-\udbff]/.test(text[end - 1]!)) end--;
  return `${text.slice(0, end)}…`;
}
