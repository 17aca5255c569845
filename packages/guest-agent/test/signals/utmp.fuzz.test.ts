// utmp is written by login services, some of them setgid utmp and fed by remote peers (the host
// an SSH client claims): any bytes at all must parse into records, never throw.
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { isSafeTtyName, userLogins } from "../../src/signals/sessions-parse.js";
import { parseUtmp, UTMP_RECORD_SIZE, utmpTrailingBytes } from "../../src/signals/utmp.js";
import { RUNS } from "../support/fuzz.js";

const fixtures = path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "fixtures", "utmp");
const capture = readFileSync(path.join(fixtures, "two-ssh-logins.utmp"));

/** A real capture with random bytes overwritten, and cut or grown at random. */
const damagedCapture = fc
  .tuple(
    fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })), { maxLength: 64 }),
    fc.integer({ min: -UTMP_RECORD_SIZE, max: UTMP_RECORD_SIZE }),
  )
  .map(([writes, resize]) => {
    const buffer = Buffer.alloc(Math.max(0, capture.length + resize));
    capture.copy(buffer, 0, 0, Math.min(capture.length, buffer.length));
    for (const [at, byte] of writes) if (buffer.length > 0) buffer[at % buffer.length] = byte;
    return buffer;
  });

describe("parseUtmp under fuzzing", () => {
  it("turns any bytes into whole records: integers where the C struct has them, finite times, bounded strings", () => {
    fc.assert(
      fc.property(
        fc.oneof(
          damagedCapture,
          fc.uint8Array({ maxLength: UTMP_RECORD_SIZE * 4 + 17 }).map((bytes) => Buffer.from(bytes)),
        ),
        (buffer) => {
          const records = parseUtmp(buffer);
          expect(records).toHaveLength(Math.floor(buffer.length / UTMP_RECORD_SIZE));
          expect(utmpTrailingBytes(buffer)).toBe(buffer.length % UTMP_RECORD_SIZE);
          for (const record of records) {
            for (const value of [record.type, record.pid, record.session, record.exit.termination, record.exit.status])
              expect(Number.isInteger(value)).toBe(true);
            expect(Number.isFinite(record.timeMs)).toBe(true);
            expect(Buffer.byteLength(record.line)).toBeLessThanOrEqual(32 * 3); // 32 bytes, each at worst one replacement character
            expect(record.line.includes("\0") || record.user.includes("\0") || record.host.includes("\0")).toBe(false);
            expect(typeof record.typeName).toBe("string");
          }
          // What the sessions signal goes on to use stays inside /dev.
          for (const login of userLogins(records))
            if (isSafeTtyName(login.line)) expect(login.line.split("/")).not.toContain("..");
        },
      ),
      RUNS,
    );
  });
});
