// logind's inhibitor files carry WHO and WHY as the locking user typed them (systemd-inhibit
// --who/--why). Fuzzed: damaged captures and random text: a lock with ids in range, or an
// InhibitorFileError, nothing else.
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { InhibitorFileError, parseInhibitorFile } from "../../src/signals/inhibitors-parse.js";
import { anyText, mutated, parsesOrRefuses } from "../support/fuzz.js";

const fixtures = path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "fixtures", "inhibitors");

describe("parseInhibitorFile under fuzzing", () => {
  it("gives a lock with valid ids (or none), or refuses with InhibitorFileError", () => {
    const captures = ["idle-block-root", "sleep-idle-escaped", "quoted-newer-systemd"].map((name) =>
      readFileSync(path.join(fixtures, name), "utf8"),
    );
    fc.assert(
      fc.property(fc.oneof(...captures.map(mutated), anyText), (text) =>
        parsesOrRefuses(
          () => parseInhibitorFile(text),
          (lock) => {
            if (lock.uid !== undefined) expect(Number.isInteger(lock.uid) && lock.uid >= 0).toBe(true);
            if (lock.pid !== undefined) expect(Number.isInteger(lock.pid) && lock.pid > 0).toBe(true);
            for (const what of lock.whatList) expect(what !== "" && lock.what.split(":").includes(what)).toBe(true);
          },
          [InhibitorFileError],
        ),
      ),
      { numRuns: 400 },
    );
  });
});
