/**
 * Pure parser for glibc's utmp file (/run/utmp) on 64-bit Linux.
 *
 * Layout of `struct utmp` (bits/utmp.h, x86_64 and aarch64; the time is two int32 fields
 * there so that 32-bit and 64-bit programs share the file):
 *
 *   offset  size  field
 *        0     2  ut_type (short) + 2 bytes padding
 *        4     4  ut_pid
 *        8    32  ut_line   "pts/3", "tty1", ":0"
 *       40     4  ut_id
 *       44    32  ut_user
 *       76   256  ut_host
 *      332     4  ut_exit   (short e_termination, short e_exit)
 *      336     4  ut_session
 *      340     8  ut_tv     (int32 tv_sec, int32 tv_usec)
 *      348    16  ut_addr_v6 (4 × int32, network byte order)
 *      364    20  reserved
 *
 * Strings fill their field and are NUL-terminated only when shorter than it.
 */

export const UTMP_RECORD_SIZE = 384;

/** ut_type values from bits/utmp.h. */
export const UtmpType = {
  EMPTY: 0,
  RUN_LVL: 1,
  BOOT_TIME: 2,
  NEW_TIME: 3,
  OLD_TIME: 4,
  INIT_PROCESS: 5,
  LOGIN_PROCESS: 6,
  USER_PROCESS: 7,
  DEAD_PROCESS: 8,
  ACCOUNTING: 9,
} as const;

const TYPE_NAMES: Record<number, string> = Object.fromEntries(
  Object.entries(UtmpType).map(([name, value]) => [value, name]),
);

export interface UtmpRecord {
  type: number;
  /** "USER_PROCESS", … or "UNKNOWN(n)". */
  typeName: string;
  pid: number;
  /** Device name relative to /dev: "pts/3", "tty1"; ":0" for X displays. */
  line: string;
  id: string;
  user: string;
  /** Remote host as the login service wrote it (sshd: address or name). */
  host: string;
  exit: { termination: number; status: number };
  session: number;
  /** Login (or record) time, milliseconds since the epoch. */
  timeMs: number;
  /** Textual address from ut_addr_v6: IPv4 when only the first word is set; "" when unset. */
  address: string;
}

/**
 * Every complete record of a utmp file, in file order. A trailing partial record (a
 * writer caught mid-write, a truncated copy) is ignored; see utmpTrailingBytes().
 */
export function parseUtmp(buffer: Buffer): UtmpRecord[] {
  const records: UtmpRecord[] = [];
  const complete = buffer.length - utmpTrailingBytes(buffer);
  for (let offset = 0; offset < complete; offset += UTMP_RECORD_SIZE) {
    records.push(parseRecord(buffer.subarray(offset, offset + UTMP_RECORD_SIZE)));
  }
  return records;
}

/** Bytes after the last complete record: non-zero means the file was truncated. */
export function utmpTrailingBytes(buffer: Buffer): number {
  return buffer.length % UTMP_RECORD_SIZE;
}

function parseRecord(record: Buffer): UtmpRecord {
  const type = record.readInt16LE(0);
  const seconds = record.readInt32LE(340);
  const microseconds = record.readInt32LE(344);
  return {
    type,
    typeName: TYPE_NAMES[type] ?? `UNKNOWN(${type})`,
    pid: record.readInt32LE(4),
    line: cString(record, 8, 32),
    id: cString(record, 40, 4),
    user: cString(record, 44, 32),
    host: cString(record, 76, 256),
    exit: { termination: record.readInt16LE(332), status: record.readInt16LE(334) },
    session: record.readInt32LE(336),
    timeMs: seconds * 1000 + Math.trunc(microseconds / 1000),
    address: formatAddress(record.subarray(348, 364)),
  };
}

function cString(record: Buffer, offset: number, length: number): string {
  const field = record.subarray(offset, offset + length);
  const end = field.indexOf(0);
  return field.subarray(0, end === -1 ? length : end).toString("utf8");
}

function formatAddress(field: Buffer): string {
  if (field.every((byte) => byte === 0)) return "";
  if (field.subarray(4).every((byte) => byte === 0)) return [...field.subarray(0, 4)].join(".");
  const groups: string[] = [];
  for (let i = 0; i < 16; i += 2) groups.push(field.readUInt16BE(i).toString(16));
  return groups.join(":");
}
