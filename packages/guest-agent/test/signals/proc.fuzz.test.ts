// Property fuzzing of the procfs parsers (and passwd): random and damaged captures. A process
// name in /proc/PID/stat is the user's to choose, so comm gets every character there is.
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { parseDiskstats } from "../../src/signals/proc-diskstats.js";
import { parseLoadavg } from "../../src/signals/proc-loadavg.js";
import { parseMeminfo } from "../../src/signals/proc-meminfo.js";
import { parseMounts } from "../../src/signals/proc-mounts.js";
import { parseNetDev } from "../../src/signals/proc-netdev.js";
import { parsePidStat, parseStatusUid } from "../../src/signals/proc-pid.js";
import { parseProcStat } from "../../src/signals/proc-stat.js";
import { parseUptime } from "../../src/signals/proc-uptime.js";
import { parsePasswd } from "../../src/users.js";
import { anyText, expectFiniteNumbers, mutated, parsesOrRefuses, RUNS } from "../support/fuzz.js";

const snapshot = path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "fixtures", "proc", "snapshot-1");
const capture = (file: string) => readFileSync(path.join(snapshot, file), "utf8");

/** /proc/mounts as a Debian VM has it, with an octal-escaped space (\040) in one mount point. */
const MOUNTS = [
  "/dev/vda1 / ext4 rw,relatime,errors=remount-ro 0 0",
  "proc /proc proc rw,nosuid,nodev,noexec,relatime 0 0",
  "tmpfs /run tmpfs rw,nosuid,nodev,size=401012k,mode=755 0 0",
  "/dev/vdb /home/alice/my\\040data xfs rw,relatime 0 0",
  "",
].join("\n");

const PARSERS: Array<{ name: string; fixture: string; parse: (text: string) => unknown; signed?: string[] }> = [
  { name: "parseProcStat", fixture: "stat", parse: parseProcStat },
  { name: "parseLoadavg", fixture: "loadavg", parse: parseLoadavg },
  { name: "parseMeminfo", fixture: "meminfo", parse: parseMeminfo },
  { name: "parseDiskstats", fixture: "diskstats", parse: parseDiskstats },
  { name: "parseNetDev", fixture: "net/dev", parse: parseNetDev },
  { name: "parseUptime", fixture: "uptime", parse: parseUptime },
  { name: "parsePidStat", fixture: "13405/stat", parse: parsePidStat },
  { name: "parseStatusUid", fixture: "13405/status", parse: parseStatusUid },
];

describe("procfs parsers under fuzzing: a clear Error or finite, non-negative numbers", () => {
  for (const { name, fixture, parse } of PARSERS) {
    const text = capture(fixture);
    it(`${name}: damaged captures and random text`, () => {
      expect(() => parse(text)).not.toThrow(); // the capture itself parses: the damage is what is tested
      fc.assert(
        fc.property(fc.oneof(mutated(text), anyText), (input) =>
          parsesOrRefuses(
            () => parse(input),
            (result) => expectFiniteNumbers(result, { nonNegative: true }),
          ),
        ),
        RUNS,
      );
    });
  }

  it("parsePidStat: any process name (the user's choice) leaves every other field where it was", () => {
    const original = capture("13405/stat");
    const open = original.indexOf("(");
    const close = original.lastIndexOf(")");
    const expected = parsePidStat(original);
    fc.assert(
      fc.property(fc.string({ unit: "binary", maxLength: 64 }), (comm) => {
        const text = `${original.slice(0, open + 1)}${comm}${original.slice(close)}`;
        const parsed = parsePidStat(text);
        expect({ ...parsed, comm: undefined }).toEqual({ ...expected, comm: undefined });
      }),
      RUNS,
    );
  });

  it("parseMounts: mount points are absolute, whatever the damage", () => {
    fc.assert(
      fc.property(fc.oneof(mutated(MOUNTS), anyText), (input) =>
        parsesOrRefuses(
          () => parseMounts(input),
          (mounts) => mounts.forEach((mount) => expect(mount.mountPoint.startsWith("/")).toBe(true)),
        ),
      ),
      RUNS,
    );
  });

  it("parsePasswd never throws and keeps integer ids only", () => {
    const passwd = readFileSync(path.join(snapshot, "..", "passwd"), "utf8");
    fc.assert(
      fc.property(fc.oneof(mutated(passwd), anyText), (input) => {
        for (const entry of parsePasswd(input)) {
          expect(Number.isInteger(entry.uid) && Number.isInteger(entry.gid)).toBe(true);
          expect(entry.name.includes(":") || entry.home.includes("\n")).toBe(false);
        }
      }),
      RUNS,
    );
  });
});
