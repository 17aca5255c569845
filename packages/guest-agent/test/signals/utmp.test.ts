import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { parseUtmp, UTMP_RECORD_SIZE, utmpTrailingBytes, UtmpType } from "../../src/signals/utmp.js";

const fixtures = path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "fixtures", "utmp");
const fixture = (name: string) => readFileSync(path.join(fixtures, name));

describe("parseUtmp on utmp files captured from sshd on this machine", () => {
  it("reads both live ssh logins with tty, user, host, pid and login time", () => {
    const records = parseUtmp(fixture("two-ssh-logins.utmp"));
    expect(records).toHaveLength(2);
    expect(records[0]).toEqual({
      type: UtmpType.USER_PROCESS,
      typeName: "USER_PROCESS",
      pid: 14293,
      line: "pts/1",
      id: "ts/1",
      user: "wstest1",
      host: "127.0.0.1",
      exit: { termination: 0, status: 0 },
      session: 0,
      timeMs: 1795962770068,
      address: "127.0.0.1",
    });
    expect(records[1]).toMatchObject({ typeName: "USER_PROCESS", pid: 14304, line: "pts/3", user: "wstest2" });
  });

  it("sees the slot of a closed session rewritten as DEAD_PROCESS with the user cleared", () => {
    const records = parseUtmp(fixture("one-logged-out.utmp"));
    expect(records.map((r) => [r.typeName, r.line, r.user])).toEqual([
      ["USER_PROCESS", "pts/1", "wstest1"],
      ["DEAD_PROCESS", "pts/3", ""],
    ]);
  });

  it("ignores a truncated trailing record and says how many bytes were left over", () => {
    const buffer = fixture("truncated.utmp");
    expect(buffer.length).toBe(UTMP_RECORD_SIZE + 200);
    expect(utmpTrailingBytes(buffer)).toBe(200);
    const records = parseUtmp(buffer);
    expect(records).toHaveLength(1);
    expect(records[0]).toMatchObject({ user: "wstest1", line: "pts/1" });
  });

  it("keeps going through malformed records: traversal lines, displays, unknown types, full fields, IPv6", () => {
    const records = parseUtmp(fixture("malformed.utmp"));
    expect(utmpTrailingBytes(fixture("malformed.utmp"))).toBe(0);
    expect(records).toHaveLength(7);
    expect(records[1]).toMatchObject({ line: "../../etc/shadow", pid: 424242, typeName: "USER_PROCESS" });
    expect(records[2]).toMatchObject({ line: ":0", host: ":0", address: "" });
    expect(records[3]).toMatchObject({ type: 42, typeName: "UNKNOWN(42)" });
    // A field that fills its whole width has no NUL: it must stop at the field, not run on.
    expect(records[4]!.user).toBe("u".repeat(32));
    expect(records[4]!.line).toBe(`pts/${"9".repeat(28)}`);
    expect(records[4]!.host).toHaveLength(256);
    expect(records[4]!.host.startsWith("host-\ufffd\ufffd")).toBe(true);
    expect(records[4]!.pid).toBe(-1);
    expect(records[5]).toMatchObject({ host: "2001:db8::1", address: "2001:db8:0:0:0:0:0:1" });
    expect(records[6]).toMatchObject({ user: "", typeName: "USER_PROCESS" });
  });

  it("reads an empty file as no records", () => {
    expect(parseUtmp(Buffer.alloc(0))).toEqual([]);
    expect(utmpTrailingBytes(Buffer.alloc(0))).toBe(0);
  });

  it("reads a file shorter than one record as no records", () => {
    const buffer = fixture("two-ssh-logins.utmp").subarray(0, 100);
    expect(parseUtmp(buffer)).toEqual([]);
    expect(utmpTrailingBytes(buffer)).toBe(100);
  });
});
