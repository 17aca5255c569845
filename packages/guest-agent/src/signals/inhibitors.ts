/**
 * logind inhibitor locks, as `systemd-inhibit --what=idle …` takes them. logind keeps one state
 * file per lock under /run/systemd/inhibit/ (plus a FIFO "<id>.ref" that the holder keeps
 * open) and deletes both when the holder closes its end. The agent reads those files instead
 * of asking logind over D-Bus: no bus client, no process spawned.
 *
 * The file format (logind-inhibit.c, inhibitor_save): KEY=VALUE lines WHAT, MODE, UID, PID,
 * (PIDFDID in newer systemd), WHO, WHY, FIFO. WHO and WHY are C-escaped (cescape: \t, \",
 * \\, bytes ≥ 0x7f as \ooo); in newer systemd a value with spaces or shell specials is also
 * double-quoted with shell escaping on top. logind writes "Do not parse." in the header;
 * it is the only way to see locks without a bus, and its keys have not changed since 2012.
 */
import { readdir } from "node:fs/promises";
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { InhibitorSchema, InhibitorSignalSchema } from "@ws/protocol";
import { isMissingUserPath, readUserFile, UserPathError } from "../fs/user-file.js";
import { under } from "../roots.js";
import { exists, isMissing, processExists } from "../fs/exists.js";
import { errorMessage, type Signal, type SignalContext, type SignalOutcome } from "./types.js";

export type InhibitorSignalValue = MessageInitShape<typeof InhibitorSignalSchema>;
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
const MAX_UID = 0xfffffffe; // (uid_t) -1 means "no uid"
const MAX_FILE_BYTES = 64 * 1024;

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

export function createInhibitorsSignal(): Signal<InhibitorSignalValue> {
  return {
    name: "inhibitors",
    async collect(ctx: SignalContext): Promise<SignalOutcome<InhibitorSignalValue>> {
      const dir = under(ctx.roots.run, "systemd", "inhibit");
      let names: string[];
      try {
        const entries = await readdir(dir, { withFileTypes: true });
        // "<id>.ref" are the holders' FIFOs; dot files are logind's temporaries before rename.
        names = entries
          .filter((entry) => entry.isFile() && !entry.name.endsWith(".ref") && !entry.name.startsWith("."))
          .map((entry) => entry.name)
          .sort(byInhibitorId);
      } catch (error) {
        if (!isMissing(error)) return { state: "failed", message: `${dir}: ${errorMessage(error)}` };
        // logind makes the directory with the first lock, but seat0's state file at startup.
        if (await exists(under(ctx.roots.run, "systemd", "seats"))) return { state: "ok", value: { locks: [] } };
        return { state: "absent", message: `${dir} absent and no logind state beside it: logind is not running here` };
      }

      const notes: string[] = [];
      const files: LockFile[] = [];
      for (const name of names) {
        const file = under(dir, name);
        try {
          // logind's files, root's alone; read the safe way anyway (the .ref FIFOs sit beside them).
          const read = await readUserFile({
            trusted: ctx.roots.run,
            segments: ["systemd", "inhibit", name],
            maxBytes: MAX_FILE_BYTES,
            owners: "root",
            signal: ctx.signal,
          });
          const lock = parseInhibitorFile(read.data.toString("utf8"));
          if (lock.problems.length > 0) notes.push(`${file}: ${lock.problems.join(", ")}`);
          const holderAlive = lock.pid === undefined ? undefined : await processExists(ctx.roots.proc, lock.pid);
          files.push({ id: name, lock, holderAlive });
        } catch (error) {
          // Released between readdir() and here: logind deleted it, not a problem.
          if (!isMissing(error) && !isMissingUserPath(error))
            notes.push(error instanceof UserPathError ? error.message : `${file}: ${errorMessage(error)}`);
        }
      }

      const { locks, stale } = reportedLocks(files);
      if (stale.length > 0) notes.push(`ignored stale idle lock(s) ${stale.join(", ")}: holder process gone`);
      const value = { locks };
      const message = notes.length > 0 ? notes.join("; ") : undefined;
      if (files.length === 0 && message !== undefined) return { state: "failed", message, value };
      return message === undefined ? { state: "ok", value } : { state: "ok", value, message };
    },
  };
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

function byInhibitorId(a: string, b: string): number {
  const numeric = /^\d+$/;
  if (numeric.test(a) && numeric.test(b)) return Number(a) - Number(b);
  return a.localeCompare(b);
}
