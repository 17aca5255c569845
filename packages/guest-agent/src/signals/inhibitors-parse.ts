/**
 * The pure half of the inhibitors signal (inhibitors.ts reads): logind's inhibitor state files → the idle locks the report carries. Tested on fixtures.
 */
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { InhibitorSchema } from "@ws/protocol";

type InhibitorInit = MessageInitShape<typeof InhibitorSchema>;

/** The words WHAT may hold (inhibit_what_to_string). */
export const INHIBIT_WHAT_WORDS = [
  "shutdown",
  "sleep",
  "idle",
  "handle-power-key",
  "handle-suspend-key",
  "handle-hibernate-key",
  "handle-lid-switch",
  "handle-reboot-key",
] as const;
const INHIBIT_MODES = ["block", "delay", "block-weak"];
const MAX_UID = 0xfffffffe;

export interface InhibitorLock {
  /** WHAT as written: "idle", "sleep:idle". */
  what: string;
  /** WHAT split on ":". */
  whatList: string[];
  who: string;
  why: string;
  /** "block", "delay" or "block-weak"; "" when the file has no MODE (logind then assumes block). */
  mode: string;
  uid?: number;
  pid?: number;
  fifo?: string;
  /** What was odd about the file: unknown keys, bad numbers, bad escapes, a cut-off last line. */
  problems: string[];
}

export class InhibitorFileError extends Error {
  override name = "InhibitorFileError";
}

/**
 * One lock from its state file. Pure. Tolerant like logind's own loader: bad fields are left
 * unset and listed in problems; a text without WHAT= is not a lock and throws InhibitorFileError.
 */
export function parseInhibitorFile(text: string): InhibitorLock {
  const problems: string[] = [];
  const values = new Map<string, string>();
  const lines = text.split("\n");
  if (text !== "" && !text.endsWith("\n")) problems.push("last line has no newline (file cut short?)");
  lines.forEach((line, index) => {
    if (line.trim() === "" || line.startsWith("#") || line.startsWith(";")) return;
    const equals = line.indexOf("=");
    const key = equals > 0 ? line.slice(0, equals).trim() : "";
    if (!/^[A-Z][A-Z0-9_]*$/.test(key)) {
      problems.push(`line ${index + 1}: not KEY=VALUE: ${JSON.stringify(line.slice(0, 60))}`);
      return;
    }
    values.set(key, line.slice(equals + 1));
  });

  const what = values.get("WHAT");
  if (what === undefined) throw new InhibitorFileError("no WHAT= line: not a logind inhibitor file");
  const whatList = what.split(":").filter((word) => word !== "");
  const unknownWords = whatList.filter((word) => !(INHIBIT_WHAT_WORDS as readonly string[]).includes(word));
  if (unknownWords.length > 0) problems.push(`WHAT: unknown ${unknownWords.join(", ")}`);

  const mode = values.get("MODE") ?? "";
  if (mode !== "" && !INHIBIT_MODES.includes(mode)) problems.push(`MODE: unknown ${JSON.stringify(mode)}`);

  const lock: InhibitorLock = {
    what,
    whatList,
    who: decodeField("WHO", values.get("WHO"), problems),
    why: decodeField("WHY", values.get("WHY"), problems),
    mode,
    problems,
  };
  const uid = parseId("UID", values.get("UID"), 0, MAX_UID, problems);
  if (uid !== undefined) lock.uid = uid;
  const pid = parseId("PID", values.get("PID"), 1, 0x7fffffff, problems);
  if (pid !== undefined) lock.pid = pid;
  const fifo = values.get("FIFO");
  if (fifo !== undefined && fifo !== "") lock.fifo = decodeField("FIFO", fifo, problems);
  return lock;
}

export function isIdleLock(lock: InhibitorLock): boolean {
  return lock.whatList.includes("idle");
}

export interface LockFile {
  /** The state file's name: logind's inhibitor id ("1", "2", …). */
  id: string;
  lock: InhibitorLock;
  /** Whether the holder's PID still exists; undefined when the file names none. */
  holderAlive: boolean | undefined;
}

/**
 * The locks the report carries: idle locks whose holder still runs. A file whose holder is
 * gone is stale (logind deletes files when the holder lets go, so this is a logind that
 * stopped or crashed); counting it would keep the VM up forever. Pure.
 */
export function reportedLocks(files: readonly LockFile[]): { locks: InhibitorInit[]; stale: string[] } {
  const locks: InhibitorInit[] = [];
  const stale: string[] = [];
  for (const file of files) {
    if (!isIdleLock(file.lock)) continue;
    if (file.holderAlive === false) {
      stale.push(file.id);
      continue;
    }
    const { who, why, what, mode, uid, pid } = file.lock;
    locks.push({ who, why, what, mode, ...(uid !== undefined ? { uid } : {}), ...(pid !== undefined ? { pid } : {}) });
  }
  return { locks, stale };
}

function parseId(
  key: string,
  raw: string | undefined,
  min: number,
  max: number,
  problems: string[],
): number | undefined {
  if (raw === undefined) return undefined;
  const value = /^\d{1,10}$/.test(raw) ? Number(raw) : NaN;
  if (Number.isInteger(value) && value >= min && value <= max) return value;
  problems.push(`${key}: not a valid id ${JSON.stringify(raw)}`);
  return undefined;
}

/** Undoes the env-file quoting of newer systemd and then cescape(). */
function decodeField(key: string, raw: string | undefined, problems: string[]): string {
  if (raw === undefined) return "";
  let text = raw;
  if (text.startsWith('"')) {
    const unquoted = shellUnquote(text);
    if (unquoted === undefined) problems.push(`${key}: unterminated quotes`);
    text = unquoted ?? text.slice(1);
  }
  const { value, bad } = cUnescape(text);
  if (bad.length > 0) problems.push(`${key}: kept invalid escape(s) ${bad.join(" ")} as written`);
  return value;
}

/**
 * The inside of a double-quoted env-file value (env_file_fputs_assignment escapes the shell
 * specials " \ ` $ with a backslash); undefined unless the closing quote ends the text.
 */
function shellUnquote(text: string): string | undefined {
  let out = "";
  for (let i = 1; i < text.length; i++) {
    const char = text[i]!;
    if (char === '"') return i === text.length - 1 ? out : undefined;
    if (char === "\\" && i + 1 < text.length && `"\\\`$`.includes(text[i + 1]!)) {
      out += text[++i];
      continue;
    }
    out += char;
  }
  return undefined;
}

/** systemd's cunescape(): C escapes to bytes, the bytes read as UTF-8. */
export function cUnescape(text: string): { value: string; bad: string[] } {
  const bytes: number[] = [];
  const bad: string[] = [];
  const literal = (s: string) => bytes.push(...Buffer.from(s, "utf8"));
  for (let i = 0; i < text.length; i++) {
    const char = text[i]!;
    if (char !== "\\") {
      literal(char);
      continue;
    }
    const next = text[i + 1];
    if (next === undefined) {
      bad.push("\\");
      literal("\\");
      continue;
    }
    if (Object.hasOwn(SIMPLE_ESCAPES, next)) {
      bytes.push(SIMPLE_ESCAPES[next]!);
      i++;
      continue;
    }
    const octal = /^[0-3][0-7]{2}/.exec(text.slice(i + 1, i + 4));
    const hex = next === "x" ? /^[0-9a-fA-F]{2}/.exec(text.slice(i + 2, i + 4)) : null;
    const unicode =
      next === "u"
        ? /^[0-9a-fA-F]{4}/.exec(text.slice(i + 2, i + 6))
        : next === "U"
          ? /^[0-9a-fA-F]{8}/.exec(text.slice(i + 2, i + 10))
          : null;
    if (octal) {
      bytes.push(parseInt(octal[0], 8));
      i += 3;
    } else if (hex) {
      bytes.push(parseInt(hex[0], 16));
      i += 3;
    } else if (unicode && parseInt(unicode[0], 16) <= 0x10ffff) {
      literal(String.fromCodePoint(parseInt(unicode[0], 16)));
      i += 1 + unicode[0].length;
    } else {
      bad.push(`\\${next}`);
      literal(`\\${next}`);
      i++;
    }
  }
  return { value: Buffer.from(bytes).toString("utf8"), bad };
}

const SIMPLE_ESCAPES: Record<string, number> = {
  a: 0x07,
  b: 0x08,
  f: 0x0c,
  n: 0x0a,
  r: 0x0d,
  t: 0x09,
  v: 0x0b,
  s: 0x20,
  "\\": 0x5c,
  '"': 0x22,
  "'": 0x27,
};
